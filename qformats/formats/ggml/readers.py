"""Real GGUF readers, judged on a file's own tensors (``qformats conformance checkpoint FILE.gguf``).

GGML-2.2 makes the decoders normative and bit-exact: a GGUF tensor means one thing, whoever wrote it,
so a reader is judged against the reference decode alone (GGML-5.5). Each reader that is installed
decodes every block tensor (and F16/BF16 tensor) of the file, a slice of rows at a time; its float32
output is compared bit for bit with the reference's (a NaN matches any NaN: GGML-2.2 fixes where NaN
comes out, not its payload). A reader that lacks a type "cannot read" it; one that is not installed
is "not judged", and the table says so rather than leaving it out.

- ``ggml_oracle``: ``dequantize_row_*`` of the ggml library ``QFORMATS_GGML_LIB`` names (the pinned
  0.10.1 that ``make ggml-oracle`` builds);
- ``llama_cpp``: the same functions of llama.cpp's own ggml (``libggml-base.so`` in the build folder
  ``QFORMATS_LLAMA_CPP`` names; ``make llama-cpp`` builds 0.25.3);
- ``gguf_py``: ``gguf.quants.dequantize`` of the installed gguf-py;
- ``transformers``: its GGUF loader decodes through gguf-py's ``dequantize`` (transformers 5.24.0,
  ``modeling_gguf_pytorch_utils.py``, ``load_gguf_checkpoint``), then renames and permutes tensors per
  architecture; those steps are not judged, so it is listed as not judged, pointing to gguf_py.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from . import TYPES
from .codec import dequantize

__all__ = ["READERS", "reader_rows"]

SLICE_BYTES = 1 << 24           # rows of blocks decoded at once per reader: memory follows the slice
FLOAT_TYPES = ("f16", "bf16")   # plain types with a decode step (F32 is its own bytes)

Decode = Callable[[str, np.ndarray], np.ndarray]


class Unavailable(Exception):
    """The reader cannot be judged here (not installed, not configured): the row says why."""


def _ggml_library(env: str, relative: str) -> Decode:
    from conformance.adapters.ggml import Library

    where = os.environ.get(env)
    if not where:
        raise Unavailable(f"set {env} to judge it")
    path = Path(where) / relative if relative else Path(where)
    if not path.is_file():
        raise Unavailable(f"{path} not found ({env})")
    lib = Library(path)
    convert = {"f16": "ggml_fp16_to_fp32_row", "bf16": "ggml_bf16_to_fp32_row"}

    def decode(name: str, rows: np.ndarray) -> np.ndarray:
        if name in convert:                     # the plain types' to_float, row by row
            return _ggml_float_rows(lib, convert[name], rows)
        try:
            return lib.dequantize(name, rows)
        except AttributeError:                  # ctypes: the library exports no dequantize_row_<name>
            raise LookupError(f"ggml {lib.version()[0]} has no dequantize_row_{name}") from None
    decode.version = lib.version()[0]           # type: ignore[attr-defined]
    return decode


def _ggml_float_rows(lib: Any, symbol: str, rows: np.ndarray) -> np.ndarray:
    import ctypes

    rows = np.ascontiguousarray(rows, np.uint8)
    out = np.zeros((rows.shape[0], rows.shape[1] // 2), np.float32)
    fn = getattr(lib.lib, symbol)
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    fn(rows.ctypes.data, out.ctypes.data, out.size)
    return out


def _gguf_py() -> Decode:
    try:
        import gguf
        from gguf.quants import dequantize as gguf_dequantize
    except ImportError:
        raise Unavailable("gguf-py is not installed") from None
    from importlib.metadata import version

    def decode(name: str, rows: np.ndarray) -> np.ndarray:
        qtype = gguf.GGMLQuantizationType.__members__.get(name.upper())
        if qtype is None:
            raise LookupError(f"gguf-py {version('gguf')} does not know the type {name}")
        try:
            out = gguf_dequantize(np.ascontiguousarray(rows, np.uint8), qtype)
        except NotImplementedError:
            raise LookupError(f"gguf-py {version('gguf')} has no decoder for {name}") from None
        return np.asarray(out, np.float32).reshape(rows.shape[0], -1)
    decode.version = version("gguf")            # type: ignore[attr-defined]
    return decode


def _transformers() -> Decode:
    raise Unavailable("decodes through gguf-py's dequantize (transformers' load_gguf_checkpoint): its values are "
                      "gguf_py's; its per-architecture renames and permutations are not judged")


class Reader:
    """``enable``: the command that makes the reader judgeable here (``conformance checkpoint`` prints it
    when the reader is not judged); None for a reader that is never judged on its own."""

    def __init__(self, name: str, description: str, load: Callable[[], Decode], enable: str | None = None):
        self.name, self.description, self.load, self.enable = name, description, load, enable


READERS = MappingProxyType({r.name: r for r in (
    Reader("ggml_oracle", "ggml's dequantize_row_* in the library QFORMATS_GGML_LIB names (make ggml-oracle: 0.10.1)",
           lambda: _ggml_library("QFORMATS_GGML_LIB", ""),
           "make ggml-oracle, then QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so (in a qformats checkout)"),
    Reader("llama_cpp", "llama.cpp's own ggml (libggml-base.so of the build QFORMATS_LLAMA_CPP names; "
           "make llama-cpp: 0.25.3)", lambda: _ggml_library("QFORMATS_LLAMA_CPP", "bin/libggml-base.so"),
           "make llama-cpp, then QFORMATS_LLAMA_CPP=.venv/llama.cpp/build (in a qformats checkout)"),
    Reader("gguf_py", "gguf-py's gguf.quants.dequantize (numpy)", _gguf_py, "pip install gguf"),
    Reader("transformers", "transformers' GGUF loader (load_gguf_checkpoint)", _transformers),
)})


def _differences(mine: np.ndarray, theirs: np.ndarray) -> int:
    """Weights whose float32 bits differ, a NaN matching any NaN (GGML-2.2)."""
    same = mine.view(np.uint32) == theirs.view(np.uint32)
    same |= np.isnan(mine) & np.isnan(theirs)
    return int(same.size - np.count_nonzero(same))


def _judge(decode: Decode, name: str, rows: np.ndarray) -> dict[str, Any]:
    bt = TYPES[name]
    step = max(1, SLICE_BYTES // max(rows.shape[1], 1))
    wrong = 0
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        with np.errstate(all="ignore"):
            mine = dequantize(bt, part).astype(np.float32, copy=False)
        try:
            theirs = np.asarray(decode(name, part))
        except LookupError as err:
            return {"status": "cannot read", "detail": str(err)}
        except Exception as err:                # an untrusted reader: its failure is its verdict
            return {"status": "cannot read", "detail": f"raised {type(err).__name__}: {str(err)[:200]}"}
        if theirs.shape != mine.shape or theirs.dtype != np.float32:
            return {"status": "wrong", "wrong_weights": int(rows.shape[0] * mine.shape[1]),
                    "detail": f"returned {theirs.dtype} {theirs.shape}, expected float32 {mine.shape}"}
        wrong += _differences(mine, theirs)
    return {"status": "wrong", "wrong_weights": wrong} if wrong else {"status": "correct"}


def _loaded() -> dict[str, Decode | Unavailable]:
    out: dict[str, Decode | Unavailable] = {}
    for name, reader in READERS.items():
        try:
            out[name] = reader.load()
        except Unavailable as why:
            out[name] = why
        except OSError as err:                  # a library that does not load
            out[name] = Unavailable(f"could not load: {err}")
    return out


def reader_rows(ckpt: Any, groups: list) -> list[dict[str, Any]]:
    """One row per decoded tensor of a GGUF checkpoint: every reader's status on it (GGML-5.5)."""
    if getattr(ckpt, "kind", None) != "gguf":
        return []
    decoders = _loaded()
    rows = []
    for info in ckpt.gguf.tensors:
        name = info.type_name.lower()
        bt = TYPES.get(name)
        if bt is None or (bt.plain and name not in FLOAT_TYPES):
            continue
        data = ckpt.gguf.tensor_rows(info.name)
        verdicts = {}
        for reader, decode in decoders.items():
            if isinstance(decode, Unavailable):
                verdicts[reader] = {"status": "not judged", "detail": str(decode)}
            else:
                verdicts[reader] = _judge(decode, name, data)
        rows.append({"layer": info.name, "format": name, "judged_against": "the reference decode (GGML-2.2; "
                     "one meaning whoever wrote it)", "readers": verdicts})
    return rows
