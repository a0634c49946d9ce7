"""Float element formats shared by the FP8 and FP4 families (spec/float_elements.md, FE-).

One decode table per format, built at import from the bit definitions (FE-1 .. FE-7), never typed in:
256 float32 entries for the 8-bit formats, 16 for E2M1. ``decode`` is a table lookup; ``encode`` is the
reference rounding of FE-8 (round to nearest, ties to the even code, optional saturation), exact for any
float16/float32/float64 input because it compares each magnitude with the midpoint of its two table
neighbours in float64, where every neighbour and midpoint is exact.

The GGUF mxfp4 and nvfp4 types take their E2M1, E8M0 and UE4M3 values from here; the FP8 and FP4 families and
the kernels' references are meant to as well (DESIGN.md section 7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import fail

__all__ = ["E4M3FN", "E4M3FNUZ", "E5M2", "E8M0", "E2M1", "UE4M3", "FORMATS", "Element", "ELEMENTS", "table",
           "decode", "encode", "is_nan_code", "is_inf_code", "max_finite"]

E4M3FN, E4M3FNUZ, E5M2, E8M0, E2M1, UE4M3 = "e4m3fn", "e4m3fnuz", "e5m2", "e8m0", "e2m1", "ue4m3"
FORMATS = (E4M3FN, E4M3FNUZ, E5M2, E8M0, E2M1, UE4M3)


@dataclass(frozen=True)
class Element:
    """One format's bit definition: ``bits`` = sign (when signed) + ``exp`` exponent bits + ``man`` mantissa bits."""

    name: str
    clause: str
    bits: int
    exp: int
    man: int
    bias: int
    signed: bool
    subnormals: bool = True      # E8M0 has none: exponent field 0 is 2^-127, not zero (FE-5.1)
    nan_code: int | None = None  # the code encode writes for NaN (None: the format has no NaN)
    inf_code: int | None = None  # +inf (E5M2 only); -inf is its sign-flipped code


def _bit_values(f: Element) -> np.ndarray:
    """Every code's value from the fields alone, in float64, before the format's special codes (FE-1.2):
    ``(-1)^s * 2^(1 - bias) * m / 2^man`` for exponent field 0 (subnormals), else ``(-1)^s * 2^(e - bias) * (1 + m / 2^man)``."""
    c = np.arange(1 << f.bits)
    e, m = (c >> f.man) & ((1 << f.exp) - 1), c & ((1 << f.man) - 1)
    normal = np.ldexp(1.0 + m / (1 << f.man), e - f.bias)
    sub = np.ldexp(m / (1 << f.man), 1 - f.bias)
    v = np.where((e == 0) & f.subnormals, sub, normal)
    if f.signed:
        v = np.where(c >> (f.bits - 1), -v, v)        # -0.0 where the sign is set on a zero
    return v


def _e4m3fn(v, c):          # FE-2.2: S.1111.111 is NaN, no infinity; 0x80 is -0
    v[(c & 0x7F) == 0x7F] = np.nan


def _e4m3fnuz(v, c):        # FE-3.2: the -0 pattern 0x80 is the only NaN; no infinity, no -0
    v[c == 0x80] = np.nan


def _e5m2(v, c):            # FE-4.2: exponent 31 with mantissa 0 is +-inf, otherwise NaN (IEEE 754)
    top = (c & 0x7F) >= 0x7C
    v[top] = np.where((c[top] & 3) == 0, np.copysign(np.inf, v[top]), np.nan)


def _e8m0(v, c):            # FE-5.2: 0xFF is NaN
    v[c == 0xFF] = np.nan


def _ue4m3(v, c):           # FE-7.2: E4M3FN with the sign bit unused: 0x7F NaN, no value with bit 7 set
    v[(c == 0x7F) | (c >= 0x80)] = np.nan


ELEMENTS: dict[str, Element] = {
    E4M3FN: Element(E4M3FN, "FE-2", 8, 4, 3, 7, True, nan_code=0x7F),
    E4M3FNUZ: Element(E4M3FNUZ, "FE-3", 8, 4, 3, 8, True, nan_code=0x80),
    E5M2: Element(E5M2, "FE-4", 8, 5, 2, 15, True, nan_code=0x7F, inf_code=0x7C),
    E8M0: Element(E8M0, "FE-5", 8, 8, 0, 127, False, subnormals=False, nan_code=0xFF),
    E2M1: Element(E2M1, "FE-6", 4, 2, 1, 1, True),
    UE4M3: Element(UE4M3, "FE-7", 8, 4, 3, 7, False, nan_code=0x7F),
}
_SPECIALS = {E4M3FN: _e4m3fn, E4M3FNUZ: _e4m3fnuz, E5M2: _e5m2, E8M0: _e8m0, E2M1: lambda v, c: None, UE4M3: _ue4m3}


def _build(f: Element) -> np.ndarray:
    v = _bit_values(f)
    _SPECIALS[f.name](v, np.arange(1 << f.bits))
    t = v.astype(np.float32)
    assert np.array_equal(t.astype(np.float64), v, equal_nan=True)   # every value is exact in float32
    t.flags.writeable = False
    return t


_TABLES = {name: _build(f) for name, f in ELEMENTS.items()}


def _grid(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The non-negative finite values in increasing order with their codes, plus one virtual step past the
    largest (the next value the exponent range would give, code max + 1): the overflow neighbour of FE-8.2."""
    t = _TABLES[name].astype(np.float64)
    half = np.arange(len(t) // 2 if ELEMENTS[name].signed else len(t))
    codes = half[np.isfinite(t[half])]
    vals = t[codes]
    step = vals[-1] if name == E8M0 else vals[-1] - vals[-2]       # E8M0's next power of two is 2^128
    assert np.all(np.diff(vals) > 0)
    return np.append(vals, vals[-1] + step), np.append(codes, codes[-1] + 1)


_GRIDS = {name: _grid(name) for name in FORMATS}


def _format(fmt: str) -> Element:
    if fmt not in ELEMENTS:
        raise fail("argument.invalid", "fmt", f"one of {', '.join(FORMATS)}", fmt, clause="FE-1.3")
    return ELEMENTS[fmt]


def table(fmt: str) -> np.ndarray:
    """The read-only float32 decode table of ``fmt``, indexed by code (FE-2 .. FE-7)."""
    return _TABLES[_format(fmt).name]


def max_finite(fmt: str) -> float:
    """The largest finite value of ``fmt`` (448, 240, 57344, 2^127, 6, 448)."""
    return float(np.nanmax(np.where(np.isinf(table(fmt)), np.nan, table(fmt))))


def _codes(codes, f: Element) -> np.ndarray:
    c = np.asarray(codes)
    if c.dtype.kind not in "ui":
        raise fail("argument.invalid", "codes", "an integer array", c.dtype, clause="FE-1.1")
    if c.size and (c.min() < 0 or c.max() >= 1 << f.bits):
        raise fail("argument.invalid", "codes", f"{f.name} codes in [0, {(1 << f.bits) - 1}]",
                   int(c.max() if c.max() >= 1 << f.bits else c.min()), clause="FE-1.1")
    return c


def decode(codes, fmt: str) -> np.ndarray:
    """The float32 value of every code (NaN for the NaN codes and, in UE4M3, for every byte with bit 7 set)."""
    f = _format(fmt)
    return _TABLES[f.name][_codes(codes, f)]


def is_nan_code(codes, fmt: str) -> np.ndarray:
    """True where a code decodes to no number: the format's NaN codes (FE-2.2 .. FE-7.2)."""
    return np.isnan(decode(codes, fmt))


def is_inf_code(codes, fmt: str) -> np.ndarray:
    """True where a code decodes to an infinity (E5M2's 0x7C and 0xFC only)."""
    return np.isinf(decode(codes, fmt))


def encode(values, fmt: str, *, saturate: bool = True) -> np.ndarray:
    """Round ``values`` to codes of ``fmt`` (FE-8): nearest value, ties to the even code (E8M0: to the larger
    power of two, FE-8.3). ``saturate`` clamps to +-max_finite first (+-inf included); without it a magnitude
    that rounds past the largest value becomes inf (E5M2) or NaN. NaN becomes the NaN code. Values a format
    cannot hold in either mode are refused (FE-8.4): NaN or unsaturated overflow in E2M1, negatives in the
    unsigned formats, zero in E8M0."""
    f = _format(fmt)
    x = np.asarray(values)
    if x.dtype.kind not in "fiu":
        raise fail("argument.invalid", "values", "a real array", x.dtype, clause="FE-8.1")
    with np.errstate(invalid="ignore"):          # signalling NaN bit patterns
        x = x.astype(np.float64)                 # exact for float16, float32 and float64 input
    nan, neg = np.isnan(x), np.signbit(x)
    _refuse_outside_domain(f, x, nan)
    a = np.where(nan, 0.0, np.abs(x))
    if saturate:
        a = np.minimum(a, _GRIDS[f.name][0][-2])
    code, over = _round_magnitude(f, a)
    if not saturate and f.nan_code is None and over.any():
        raise fail("argument.invalid", "values", f"|x| that rounds to at most {max_finite(fmt)} ({f.name} has no "
                   "infinity or NaN)", float(x[over][0]), clause="FE-8.4")
    if f.signed:
        keep_sign = neg & ((code != 0) | (f.name != E4M3FNUZ))      # E4M3FNUZ has no -0 (FE-3.2)
        code = code | (keep_sign.astype(np.int64) << (f.bits - 1))
    if over.any():
        ovf = f.inf_code if f.inf_code is not None else f.nan_code
        sign = (neg & f.signed & (f.name != E4M3FNUZ)).astype(np.int64) << (f.bits - 1)
        code = np.where(over, ovf | sign, code)
    if nan.any():
        code = np.where(nan, f.nan_code, code)
    return code.astype(np.uint8)


def _refuse_outside_domain(f: Element, x: np.ndarray, nan: np.ndarray) -> None:
    if f.nan_code is None and nan.any():
        raise fail("argument.invalid", "values", f"not NaN ({f.name} has no NaN)", float("nan"), clause="FE-8.4")
    if not f.signed:
        bad = (x < 0) | ((x == 0) if f.name == E8M0 else False)
        if np.any(bad):
            what = "positive (E8M0 has neither zero nor sign)" if f.name == E8M0 else "not negative (unsigned)"
            raise fail("argument.invalid", "values", f"{what} for {f.name}", float(x[bad][0]), clause="FE-8.4")


def _round_magnitude(f: Element, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the non-negative finite-or-inf magnitudes ``a`` (float64) and where they overflow."""
    vals, codes = _GRIDS[f.name]
    i = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 2)   # vals[i] <= a < vals[i + 1]
    lo, hi = vals[i], vals[i + 1]
    mid = (lo + hi) / 2                          # exact: few significant bits, far from float64's limits
    tie_up = True if f.name == E8M0 else (codes[i] & 1) == 1
    up = (a > mid) | ((a == mid) & tie_up)       # a below E8M0's smallest value (i clipped to 0) stays there
    j = i + up
    over = j == len(vals) - 1
    return np.where(over, codes[-2], codes[j]).astype(np.int64), over
