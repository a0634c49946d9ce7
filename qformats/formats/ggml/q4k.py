"""q4_K joins the family: its room is ``qformats.formats.q4_k`` (spec/q4_k.md); this is its family entry."""

from __future__ import annotations

import numpy as np

from ..q4_k.codec import dequantize as _dequantize_rows, quantize as _quantize
from ..q4_k.layout import BLOCK_BYTES
from .base import BlockType, fp16_field

__all__ = ["TYPES"]


def _decode(blk: np.ndarray) -> np.ndarray:
    return _dequantize_rows(blk).reshape(-1, 256)


def _scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0), "dmin": fp16_field(blk, 2)}


def _encode(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
    return _quantize(x, importance)


assert BLOCK_BYTES == 144
# d = max_scale / 63 and dmin = max_min / 63 with both maxima starting at 0 (Q4K-4.3, Q4K-4.6)
TYPES = (BlockType("q4_k", "Q4K-1", _decode, _scales, never_negative=("d", "dmin"), fp16_offsets={"d": 0, "dmin": 2},
                   quantize=_encode, importance=True, bits=4, group=32),)
