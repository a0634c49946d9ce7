"""Plain element types: F32, F16, BF16, F64 and the integer types (spec/ggml.md GGML-6).

They are blocks of one element. ggml checks every element of F32 / F16 / BF16 / F64 tensors for
inf and NaN (``ggml_validate_row_data``, ``validate_float`` / ``validate_fp16`` / ``validate_bf16``)
and nothing in integer tensors. BF16 widens exactly to float32 (it is float32's upper half), F16
exactly by IEEE conversion; F64 stays float64 and the integers keep their own dtype.
"""

from __future__ import annotations

import numpy as np

from .base import F32, BlockType

__all__ = ["TYPES"]


def _view(dtype: str):
    def decode(blk: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(blk).view(dtype)
    return decode


def _f16(blk: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(blk).view("<f2").astype(F32)


def _bf16(blk: np.ndarray) -> np.ndarray:
    wide = np.ascontiguousarray(blk).view("<u2").astype(np.uint32) << 16     # GGML-6.2: exact widening
    return wide.view(F32)


def _elements(decode):
    return lambda blk: {"element": decode(blk)}


def _nothing(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {}


TYPES = (
    BlockType("f32", "GGML-6.1", _view("<f4"), _elements(_view("<f4")), plain=True),
    BlockType("f16", "GGML-6.1", _f16, _elements(_f16), plain=True),
    BlockType("bf16", "GGML-6.2", _bf16, _elements(_bf16), plain=True),
    BlockType("f64", "GGML-6.1", _view("<f8"), _elements(_view("<f8")), plain=True, out_dtype="float64"),
    *(BlockType(name, "GGML-6.3", _view(dt), _nothing, plain=True, out_dtype=dt.replace("<", ""))
      for name, dt in (("i8", "i1"), ("i16", "<i2"), ("i32", "<i4"), ("i64", "<i8"))),
)
