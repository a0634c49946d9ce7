"""ggml's own q4_K code (``ggml-quants.c`` in a ggml shared library) as a q4_K subject, via ctypes.

The library is named by ``QFORMATS_GGML_LIB`` (``make ggml-oracle`` builds ggml 0.10.1's ggml-base
under ``.venv/ggml``). ``quantize_q4_K`` without importance weights is ``quantize_row_q4_K_ref``
(Q4K-4.3); ``dequantize_row_q4_K`` is the decoder (Q4K-3.1). ggml before 2025-06 (b9061570) read
fp16 through a table filled by ``ggml_init``; this adapter targets newer builds, where it is not.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

BLOCK_BYTES = 2 + 2 + 12 + 256 // 2   # d, dmin, packed 6-bit scales/mins, 256 4-bit codes
QK_K = 256


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    path = os.environ.get("QFORMATS_GGML_LIB")
    if not path:
        raise RuntimeError("set QFORMATS_GGML_LIB to a ggml shared library (make ggml-oracle builds one)")
    lib = ctypes.CDLL(path)
    lib.quantize_q4_K.restype = ctypes.c_size_t
    lib.quantize_q4_K.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.dequantize_row_q4_K.restype = None
    lib.dequantize_row_q4_K.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.ggml_version.restype = ctypes.c_char_p
    lib.ggml_commit.restype = ctypes.c_char_p
    return lib


def version() -> tuple[str, str]:
    """(ggml_version(), ggml_commit()) of the loaded library."""
    lib = library()
    return lib.ggml_version().decode(), lib.ggml_commit().decode()


def q4_k_quantize(*, x, importance=None):
    """float32 ``(rows, n)`` → uint8 ``(rows, n / 256 * 144)``; ggml asserts n % 256 == 0, so we check first."""
    x = np.ascontiguousarray(x, np.float32)
    if x.ndim != 2 or x.shape[1] % QK_K:
        raise ValueError(f"x must be (rows, a multiple of {QK_K}), got {x.shape}")
    out = np.zeros((x.shape[0], x.shape[1] // QK_K * BLOCK_BYTES), np.uint8)
    w = None if importance is None else np.ascontiguousarray(importance, np.float32)
    library().quantize_q4_K(x.ctypes.data, out.ctypes.data, x.shape[0], x.shape[1],
                            None if w is None else w.ctypes.data)
    return out


def q4_k_dequantize(*, blocks, rows=None, n=None):
    """uint8 ``(rows, k * 144)`` → float32 ``(rows, k * 256)``."""
    blocks = np.ascontiguousarray(blocks, np.uint8)
    if blocks.ndim != 2 or blocks.shape[1] % BLOCK_BYTES:
        raise ValueError(f"blocks must be (rows, a multiple of {BLOCK_BYTES}), got {blocks.shape}")
    y = np.zeros((blocks.shape[0], blocks.shape[1] // BLOCK_BYTES * QK_K), np.float32)
    library().dequantize_row_q4_K(blocks.ctypes.data, y.ctypes.data, y.size)
    return y
