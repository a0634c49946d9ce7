"""The reference FP8 quantizer (FP8-5.3, informative): fixtures and samples, not a normative encoder.

    layer = encode.quantize(w, strategy="block", block=(128, 128))      # {"weight": uint8, "weight_scale": f32}

Decode is normative (FP8-5.1); writers choose their scales as they like. This one takes, for every cell of the
strategy's grid (FP8-1.2, ragged last blocks included, FP8-1.3), ``s = amax / 448`` rounded once to the scale
dtype and at least its smallest positive value, and the codes ``E4M3FN(w / s)`` rounded to nearest, ties to even,
saturating at +-448 (FE-8). An all-zero cell gets ``s = 1`` so that every scale stays positive (FP8-6.4).
"""

from __future__ import annotations

import numpy as np

from ... import elements
from ...layers import round_to
from .codec import expand, grid

__all__ = ["quantize"]

E4M3_MAX = 448.0
SCALE_NUMPY = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}
SCALE_TINY = {"F32": 2.0 ** -149, "BF16": 2.0 ** -133, "F16": 2.0 ** -24}   # each dtype's smallest positive value


def _cell_amax(a: np.ndarray, strategy: str, block: tuple[int, int] | None, group_size: int | None) -> np.ndarray:
    """max |w| over each cell of the grid, in the grid's shape."""
    n, k = a.shape
    if strategy == "tensor":
        return a.max(initial=0.0).reshape(1)
    if strategy == "channel":
        return a.max(axis=1, initial=0.0).reshape(n, 1)
    if strategy == "group":
        return a.reshape(n, k // group_size, group_size).max(axis=2, initial=0.0)
    bn, bk = block or (n, k)
    gn, gk = grid(n, k, "block", block=(bn, bk))
    padded = np.zeros((gn * bn, gk * bk))            # zeros never raise a maximum of magnitudes
    padded[:n, :k] = a
    return padded.reshape(gn, bn, gk, bk).max(axis=(1, 3))


def quantize(w: np.ndarray, *, strategy: str, block: tuple[int, int] | None = None, group_size: int | None = None,
             scale_dtype: str = "F32") -> dict[str, np.ndarray]:
    """``{"weight": E4M3FN bytes (n, k) uint8, "weight_scale": float32 holding scale_dtype values}``."""
    x = np.asarray(w, dtype=np.float64)
    n, k = x.shape
    amax = _cell_amax(np.abs(x), strategy, block, group_size)
    # rounded once from float64 (a float32 stop first would round a bfloat16 subnormal twice); a tiny nonzero cell
    # whose s rounds to 0 keeps the dtype's smallest positive value, so every scale stays positive (FP8-6.4)
    s = round_to(np.where(amax > 0, amax / E4M3_MAX, 1.0), SCALE_NUMPY[scale_dtype])
    scale = np.maximum(s, np.float32(SCALE_TINY[scale_dtype]))
    full = expand(scale, n, k, strategy, block=block, group_size=group_size)
    return {"weight": elements.encode(x / full, elements.E4M3FN), "weight_scale": scale.astype(np.float32)}
