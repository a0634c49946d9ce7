"""FP4 codecs (spec/fp4.md): unpack E2M1 nibbles, decode each layout as its library does (FP4-3), vectorized.

Nibble order, every layout here (FP4-1.2)::

    byte j of a row:   bit 7 6 5 4 | 3 2 1 0
                       element 2j+1 | element 2j        (each nibble: sign | exponent 2 | mantissa 1, E2M1)

Element values come from ``qformats.elements`` (E2M1, UE4M3, E8M0). Decodes return float32 arrays holding
exactly the bfloat16 values the libraries return (every bfloat16 is a float32; safetensors output stays F32).
"""

from __future__ import annotations

import numpy as np

from ... import elements
from ...errors import fail
from ...layers import round_to

__all__ = ["unpack", "pack", "nvfp4_dequantize", "mxfp4_dequantize", "gpt_oss_dequantize", "e2m1_values",
           "nvfp4_scales", "modelopt_nvfp4_dequantize"]


def unpack(packed: np.ndarray) -> np.ndarray:
    """uint8 ``(..., C)`` -> E2M1 codes ``(..., 2C)``: element 2j the low nibble of byte j (FP4-1.2)."""
    p = np.asarray(packed)
    codes = np.empty(p.shape[:-1] + (2 * p.shape[-1],), dtype=np.uint8)
    codes[..., 0::2] = p & 0x0F
    codes[..., 1::2] = p >> 4
    return codes


def pack(codes: np.ndarray) -> np.ndarray:
    """E2M1 codes ``(..., 2C)`` -> uint8 ``(..., C)``, the inverse of :func:`unpack`. The codes are checked as
    given: a cast to uint8 first would pack 256 as code 0 and 2.5 as code 2."""
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise fail("argument.invalid", "codes", "an integer array of E2M1 codes (FP4-1.2)", str(c.dtype))
    low, high = (int(c.min()), int(c.max())) if c.size else (0, 0)
    if c.shape[-1] % 2 or low < 0 or high > 15:
        raise fail("argument.invalid", "codes", "E2M1 codes in [0, 15], an even count a row (FP4-1.2)",
                   f"shape {c.shape}, codes in [{low}, {high}]")
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def e2m1_values(packed: np.ndarray) -> np.ndarray:
    """The float32 E2M1 value of every element (FE-6), ``(..., 2C)``."""
    return elements.decode(unpack(packed), elements.E2M1)


def _per_element(scales: np.ndarray, group: int) -> np.ndarray:
    return np.repeat(scales, group, axis=-1)


def nvfp4_scales(weight_scale: np.ndarray, weight_global_scale: np.ndarray) -> np.ndarray:
    """compressed-tensors' effective block scale (FP4-3.1): ``float32(UE4M3 byte) / float32(global)``, one float32
    rounding (``_dequantize``: ``scale / global_scale``; a bfloat16 block scale over a float32 ``(1,)`` tensor
    promotes to float32)."""
    s = elements.decode(np.asarray(weight_scale, dtype=np.uint8), elements.UE4M3)
    g = np.asarray(weight_global_scale, dtype=np.float32).reshape(-1)[0]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):      # a 0 or tiny global: quietly (FP4-3.2)
        return (s / g).astype(np.float32)


def nvfp4_dequantize(weight_packed: np.ndarray, weight_scale: np.ndarray,
                     weight_global_scale: np.ndarray) -> np.ndarray:
    """compressed-tensors 0.20.0 ``NVFP4PackedCompressor.decompress`` (FP4-3.1): ``w32 = e2m1 * s32`` rounded to
    float32, then rounded to bfloat16; returned ``(N, K)`` float32 holding the bfloat16 values."""
    q = e2m1_values(weight_packed)
    s = nvfp4_scales(weight_scale, weight_global_scale)
    with np.errstate(over="ignore", invalid="ignore"):      # inf, and NaN for 0 * inf, quietly as torch (FP4-3.2)
        w32 = (q * _per_element(s, 16)).astype(np.float32)
        return round_to(w32, "bfloat16")


def _mx(values: np.ndarray, scale_bytes: np.ndarray) -> np.ndarray:
    """``e2m1 * 2^(e - 127)`` exact in float64, rounded once to bfloat16 (FP4-3.7: both libraries' results)."""
    s = elements.decode(np.asarray(scale_bytes, dtype=np.uint8), elements.E8M0).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return round_to(values.astype(np.float64) * _per_element(s, 32), "bfloat16")


def mxfp4_dequantize(weight_packed: np.ndarray, weight_scale: np.ndarray) -> np.ndarray:
    """compressed-tensors 0.20.0 ``MXFP4PackedCompressor.decompress`` (FP4-3.7): bfloat16 ``e2m1 * 2^(e-127)``,
    ``(N, K)`` float32 holding the bfloat16 values."""
    return _mx(e2m1_values(weight_packed), weight_scale)


def gpt_oss_dequantize(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """gpt-oss ``*_blocks`` ``(E, R, K/32, 16)`` and ``*_scales`` ``(E, R, K/32)`` -> ``(E, R, K)`` float32 holding
    transformers' bfloat16 values (FP4-3.8), in nn.Linear orientation per expert ``(E, out, in)``: transformers'
    ``convert_moe_packed_tensors`` returns the transpose ``(E, in, out)``."""
    b = np.asarray(blocks, dtype=np.uint8)
    e, r, g, _ = b.shape
    return _mx(e2m1_values(b.reshape(e, r, g * 16)), scales)


def modelopt_nvfp4_dequantize(weight: np.ndarray, weight_scale: np.ndarray, weight_scale_2: np.ndarray) -> np.ndarray:
    """ModelOpt 0.47.0 ``NVFP4QTensor.dequantize(dtype=bfloat16)`` (FP4-4.1): ``s32 = float32(UE4M3) *
    float32(weight_scale_2)`` rounded to float32, ``w32 = e2m1 * s32`` rounded to float32, then to bfloat16.
    Its E2M1 table holds +0 for code 8, so no weight decodes to -0 (FP4-4.1)."""
    codes = unpack(weight)
    q = np.where(codes == 8, np.float32(0), elements.decode(codes, elements.E2M1))
    s = elements.decode(np.asarray(weight_scale, dtype=np.uint8), elements.UE4M3)
    with np.errstate(over="ignore", invalid="ignore"):
        s32 = (s * np.asarray(weight_scale_2, dtype=np.float32).reshape(-1)[0]).astype(np.float32)
        w32 = (q * _per_element(s32, 16)).astype(np.float32)
        return round_to(w32, "bfloat16")
