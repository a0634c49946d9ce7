"""ggml's own codecs (``ggml-quants.c`` in a ggml shared library) as conformance subjects, via ctypes.

The library is named by ``QFORMATS_GGML_LIB`` (``make ggml-oracle`` builds ggml 0.10.1's ggml-base
under ``.venv/ggml``). For every block type ``T`` ggml exports ``dequantize_row_T`` (the decoder) and
``quantize_T(src, dst, nrows, n_per_row, imatrix)``: with ``imatrix`` NULL it runs the reference
path (``quantize_row_T_ref``) where the type has one, otherwise the importance path. The i-quants
with grids need ``ggml_quantize_init(type)`` first. ``ggml_validate_row_data`` is llama.cpp's one
validity check (``--check-tensors``), the oracle for GGML-3.1 / GGML-3.3.

Subjects for the runner are module attributes ``<type>_dequantize`` / ``<type>_quantize``
(``q6_k_dequantize``), one per type ggml 0.10.1 exports. ggml before 2025-06 (b9061570) read fp16
through a table filled by ``ggml_init``; this adapter targets newer builds, where it is not.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from . import type_subjects

# type name (ggml's spelling) -> (type id, elements per block, bytes per block); ggml-common.h structs
GEOMETRY = {
    "q4_0": (2, 32, 18), "q4_1": (3, 32, 20), "q5_0": (6, 32, 22), "q5_1": (7, 32, 24), "q8_0": (8, 32, 34),
    "q2_K": (10, 256, 84), "q3_K": (11, 256, 110), "q4_K": (12, 256, 144), "q5_K": (13, 256, 176),
    "q6_K": (14, 256, 210), "q8_K": (15, 256, 292), "iq2_xxs": (16, 256, 66), "iq2_xs": (17, 256, 74),
    "iq3_xxs": (18, 256, 98), "iq1_s": (19, 256, 50), "iq4_nl": (20, 32, 18), "iq3_s": (21, 256, 110),
    "iq2_s": (22, 256, 82), "iq4_xs": (23, 256, 136), "iq1_m": (29, 256, 56), "tq1_0": (34, 256, 54),
    "tq2_0": (35, 256, 66), "mxfp4": (39, 32, 17), "nvfp4": (40, 64, 36), "q1_0": (41, 128, 18),
    "q2_0": (42, 64, 18),      # ggml 0.25.3 only: the pinned oracle (0.10.1) has no q2_0 symbols
}
NEEDS_INIT = {"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m", "iq3_xxs", "iq3_s"}
BLOCK_BYTES = 144          # q4_K, kept for callers of the q4_K-only adapter
QK_K = 256


def _spelling(name: str) -> str:
    """ggml's symbol spelling of a type name: ``q6_k`` -> ``q6_K``."""
    low = name.lower()
    return next((key for key in GEOMETRY if key.lower() == low), low)


class Library:
    """One ggml shared library, loaded by path: ``Library(".venv/llama.cpp/build/bin/libggml-base.so")
    .dequantize("q6_K", blocks)``. The module's functions are those of the pinned oracle (:func:`oracle`);
    another instance judges a newer ggml (llama.cpp's) beside it."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        lib = ctypes.CDLL(self.path)
        lib.ggml_version.restype = ctypes.c_char_p
        lib.ggml_commit.restype = ctypes.c_char_p
        lib.ggml_quantize_init.argtypes = [ctypes.c_int]
        lib.ggml_quantize_init.restype = None
        lib.ggml_validate_row_data.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        lib.ggml_validate_row_data.restype = ctypes.c_bool
        self.lib = lib
        self._initialized: set[str] = set()

    def version(self) -> tuple[str, str]:
        return self.lib.ggml_version().decode(), self.lib.ggml_commit().decode()

    def dequantize(self, name: str, blocks) -> np.ndarray:
        """uint8 ``(rows, k * type_size)`` -> float32 ``(rows, k * block_size)`` by ``dequantize_row_<name>``."""
        name = _spelling(name)
        _, qk, size = GEOMETRY[name]
        blocks = np.ascontiguousarray(blocks, np.uint8)
        if blocks.ndim != 2 or blocks.shape[1] % size:
            raise ValueError(f"blocks must be (rows, a multiple of {size}), got {blocks.shape}")
        y = np.zeros((blocks.shape[0], blocks.shape[1] // size * qk), np.float32)
        fn = getattr(self.lib, f"dequantize_row_{name}")
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
        fn(blocks.ctypes.data, y.ctypes.data, y.size)
        return y

    def quantize(self, name: str, x, importance=None) -> np.ndarray:
        """float32 ``(rows, n)`` -> uint8 by ``quantize_<name>(x, y, rows, n, importance)``; ggml asserts
        ``n % block_size == 0``, so it is checked here first."""
        name = _spelling(name)
        _, qk, size = GEOMETRY[name]
        x = np.ascontiguousarray(x, np.float32)
        if x.ndim != 2 or x.shape[1] % qk:
            raise ValueError(f"x must be (rows, a multiple of {qk}), got {x.shape}")
        if name in NEEDS_INIT and name not in self._initialized:
            self.lib.ggml_quantize_init(GEOMETRY[name][0])
            self._initialized.add(name)
        out = np.zeros((x.shape[0], x.shape[1] // qk * size), np.uint8)
        w = None if importance is None else np.ascontiguousarray(importance, np.float32)
        fn = getattr(self.lib, f"quantize_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        fn.restype = ctypes.c_size_t
        fn(x.ctypes.data, out.ctypes.data, x.shape[0], x.shape[1], None if w is None else w.ctypes.data)
        return out

    def validate_row_data(self, type_id: int, data) -> bool:
        data = np.ascontiguousarray(data, np.uint8)
        return bool(self.lib.ggml_validate_row_data(type_id, data.ctypes.data, data.size))


@functools.lru_cache(maxsize=1)
def oracle() -> Library:
    """The pinned oracle, the ggml library QFORMATS_GGML_LIB names."""
    path = os.environ.get("QFORMATS_GGML_LIB")
    if not path:
        raise RuntimeError("set QFORMATS_GGML_LIB to a ggml shared library (make ggml-oracle builds one)")
    return Library(path)


def library() -> ctypes.CDLL:
    return oracle().lib


def version() -> tuple[str, str]:
    """(ggml_version(), ggml_commit()) of the pinned oracle."""
    return oracle().version()


def dequantize(name: str, blocks) -> np.ndarray:
    """uint8 ``(rows, k * type_size)`` -> float32 ``(rows, k * block_size)`` by ``dequantize_row_<name>``."""
    return oracle().dequantize(name, blocks)


def quantize(name: str, x, importance=None) -> np.ndarray:
    """float32 ``(rows, n)`` -> uint8 by ``quantize_<name>(x, y, rows, n, importance)``."""
    return oracle().quantize(name, x, importance)


def validate_row_data(type_id: int, data) -> bool:
    """ggml_validate_row_data(type, data, nbytes): llama.cpp's verdict on a tensor's bytes."""
    return oracle().validate_row_data(type_id, data)


type_subjects(globals(), GEOMETRY, dequantize, quantize)


def q4_k_quantize(*, x, importance=None):
    """float32 ``(rows, n)`` → uint8 ``(rows, n / 256 * 144)`` (the q4_K subject, with an importance option)."""
    return quantize("q4_K", x, importance)
