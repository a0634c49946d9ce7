"""The reference NVFP4 and MXFP4 quantizers (FP4-3.9, informative): fixtures and samples, not normative.

    packed, scale, global_scale = encode.nvfp4(w)     # compressed-tensors tensors (FP4-2.1)
    packed, scale = encode.mxfp4(w)                   # E8M0 scale bytes (FP4-3.7)

Decode is normative (FP4-3.1, FP4-3.7); writers choose scales as they like. These follow the published recipes:

- NVFP4: ``global = 448 * 6 / amax(W)`` (float32), the block scale byte ``UE4M3(amax(block) / 6 * global)``,
  codes ``E2M1(w / (ue4m3 / global))``; all rounding to nearest, ties to even, saturating (FE-8).
- MXFP4 (OCP MX v1.0 section 6.3): ``e = floor(log2(amax(block))) - 2`` (2 is E2M1's largest exponent), clamped
  to E8M0's range, the byte ``e + 127``, codes ``E2M1(w / 2^e)`` saturating at +-6. An all-zero block gets 0x00.
Element 2j is the low nibble of byte j (FP4-1.2). K must be a multiple of the group (16 or 32, FP4-2.2).
"""

from __future__ import annotations

import numpy as np

from ... import elements
from ...errors import fail
from .codec import pack

__all__ = ["nvfp4", "mxfp4"]

E2M1_MAX, UE4M3_MAX = 6.0, 448.0


def _blocks(w: np.ndarray, group: int) -> np.ndarray:
    x = np.asarray(w, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] % group:
        raise fail("fp4.group.shape", "weight", f"(N, K) with K a multiple of {group}", list(x.shape))
    return x.reshape(x.shape[0], x.shape[1] // group, group)


def _codes(scaled: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    return pack(elements.encode(scaled, elements.E2M1).reshape(shape))


def nvfp4(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(weight_packed uint8 (N, K/2), weight_scale UE4M3 bytes (N, K/16), weight_global_scale float32 (1,))``."""
    b = _blocks(w, 16)
    amax = float(np.abs(b).max(initial=0.0))
    g = np.float32(UE4M3_MAX * E2M1_MAX / amax if amax > 0 else 1.0)
    scale = elements.encode(np.abs(b).max(axis=2) / E2M1_MAX * np.float64(g), elements.UE4M3)
    eff = elements.decode(scale, elements.UE4M3).astype(np.float64) / np.float64(g)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(eff[..., None] > 0, b / eff[..., None], 0.0)
    return _codes(scaled, np.shape(w)), scale, np.array([g], np.float32)


def mxfp4(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(weight_packed uint8 (N, K/2), weight_scale E8M0 bytes (N, K/32))``."""
    b = _blocks(w, 32)
    amax = np.abs(b).max(axis=2)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, -127)
    e = np.clip(e, -127, 127)
    return _codes(b / np.exp2(e)[..., None], np.shape(w)), (e + 127).astype(np.uint8)
