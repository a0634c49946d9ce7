"""Rounding rules and floating-point helpers shared by the format codecs (spec/README.md, QF-4).

Each rule is named after what it reproduces, because the formats disagree on rounding:
GPTQ producers round half to even (``torch.round``), llama.cpp uses a float-addition trick
whose result is also half-to-even but only for |x| < 2^22, and SpQR evaluates in float16.
"""

from __future__ import annotations

import numpy as np

from .errors import fail

__all__ = [
    "round_half_even",
    "nearest_int",
    "fp16_bits",
    "fp16_from_bits",
    "ulp_distance",
    "first_nonfinite",
]

_MAGIC = np.float32(12582912.0)  # 1.5 * 2^23: adding it leaves the integer in the low mantissa bits


def round_half_even(x) -> np.ndarray:
    """Round to the nearest integer, ties to even (torch.round / numpy.rint semantics)."""
    return np.rint(x)


def nearest_int(x) -> np.ndarray:
    """llama.cpp ``nearest_int``: ``bits(x + 12582912.f) & 0x7fffff) - 0x400000`` as int32.

    Defined for float32 |x| <= 4194303 (llama.cpp asserts this); evaluated in float32 exactly
    as the C code does, which differs from ``np.rint`` only outside that range.
    """
    val = np.asarray(x, np.float32) + _MAGIC
    return (val.view(np.int32) & np.int32(0x007FFFFF)) - np.int32(0x00400000)


def fp16_bits(x) -> np.ndarray:
    """The IEEE binary16 bit patterns of ``x`` (rounded to float16 first) as uint16."""
    return np.asarray(x, np.float16).view(np.uint16)


def fp16_from_bits(bits) -> np.ndarray:
    """float16 values from uint16 (or int16/int32 low-half) bit patterns."""
    return (np.asarray(bits).astype(np.uint32) & 0xFFFF).astype(np.uint16).view(np.float16)


def _ordered(x: np.ndarray) -> np.ndarray:
    """Map floats to integers whose order is the float order (sign-magnitude to two's complement)."""
    itype = {2: np.int16, 4: np.int32}[x.dtype.itemsize]
    i = x.view(itype).astype(np.int64)
    sign_bit = np.int64(1) << (8 * x.dtype.itemsize - 1)
    return np.where(i < 0, -(i & (sign_bit - 1)), i)


def ulp_distance(a, b) -> np.ndarray:
    """Number of representable values between ``a`` and ``b`` (both float16 or both float32), elementwise.

    +0 and -0 are 0 apart. Float32 orderings span 2^32 values, so the difference fits int64
    exactly; float64 would not, and is refused.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype != b.dtype or a.dtype not in (np.float16, np.float32):
        raise fail("argument.invalid", "ulp_distance", "two arrays of one dtype, float16 or float32",
                   f"{a.dtype.name} and {b.dtype.name}")
    return np.abs(_ordered(a) - _ordered(b))


def first_nonfinite(x: np.ndarray) -> tuple[str, list[int]] | None:
    """("NaN" | "inf" | "-inf", index) of the first non-finite element, or None."""
    bad = ~np.isfinite(x)
    if not bad.any():
        return None
    idx = np.unravel_index(int(np.flatnonzero(bad)[0]), x.shape)
    v = float(x[idx])
    label = "NaN" if v != v else ("inf" if v > 0 else "-inf")
    return label, [int(i) for i in idx]
