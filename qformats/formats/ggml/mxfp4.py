"""mxfp4: OCP MX FP4 blocks, 32 E2M1 codes sharing one E8M0 exponent (spec/ggml_ternary_fp4.md, MX-1).

ggml stores E2M1 values doubled (``kvalues_mxfp4``, integers) and halves the exponent instead
(``ggml_e8m0_to_fp32_half``), so a weight is ``kvalues_mxfp4[c] * 2^(e - 128)``: one float32
product, exact unless it overflows to inf (``e >= 253``). The E8M0 value 0xFF is NaN in the OCP MX spec and the
one pattern ``ggml_validate_row_data`` refuses; ggml's decoder still reads it as 2^127 (MX-1.3).
Decode and the reference encoder ``quantize_row_mxfp4_ref`` are bit- and byte-identical to ggml 0.10.1.
"""

from __future__ import annotations

import numpy as np

from .base import F32, BlockType

__all__ = ["TYPES", "KVALUES_MXFP4", "E8M0_HALF", "e8m0", "unpack_codes", "mxfp4_exponent"]

QK = 32                     # block: e (1 byte) | qs[16]: 1 + QK_MXFP4 / 2 = 17 bytes
_CHUNK = 16384              # blocks per encoder pass

# ggml-common.h `kvalues_mxfp4` (ggml 0.10.1): E2M1 code -> 2 * value. Code bit 3 is the sign; 0b1000 is -0,
# stored as the integer 0, so it decodes to +0.0.
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int8)
_KF = KVALUES_MXFP4.astype(F32)

# ggml-impl.h `ggml_e8m0_to_fp32_half(e)`: bits 0x00200000 << e for e < 2 (2^-128, 2^-127: subnormal),
# (e - 1) << 23 otherwise: 2^(e - 128) for every byte, 0xFF included (2^127, no NaN).
E8M0_HALF = np.ldexp(1.0, np.arange(256) - 128).astype(F32)


def e8m0(e: np.ndarray) -> np.ndarray:
    """The OCP E8M0 value 2^(e - 127) as float32, NaN for e == 0xFF (MX-1.4); e == 0 is 2^-127, finite."""
    v = np.ldexp(1.0, np.minimum(e, 0xFE).astype(np.int32) - 127).astype(F32)
    return np.where(e == 0xFF, F32(np.nan), v)


# qs[16] (MX-1.1): qs[j] = code(j) | code(j + 16) << 4 — low nibbles are elements 0..15, high 16..31:
#
#   byte 1 + j:  [ c(j+16) 7:4 | c(j) 3:0 ]      j = 0..15


def unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(nb, 16) uint8 -> (nb, 32) codes in element order."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _decode(blk: np.ndarray) -> np.ndarray:
    d = E8M0_HALF[blk[:, 0]][:, None]
    return _KF[unpack_codes(blk[:, 1:])] * d          # x0 * d: int8 widened to float, one rounding


def _scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"e": e8m0(blk[:, :1])}


# ---------------------------------------------------------------------------------------------
# reference encoder (MX-1.5)
# ---------------------------------------------------------------------------------------------


def mxfp4_exponent(amax: np.ndarray) -> np.ndarray:
    """``amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0`` as ggml 0.10.1 runs it (MX-1.5 step 2).

    ``log2f`` is taken correctly rounded to float32 (the float64 logarithm rounded once; glibc 2.36 agrees
    on every float32 within 300 ulps below a power of two, where the floor is decided). The float-to-uint8
    conversion is C undefined behaviour for values outside 0..255; the oracle's x86-64 build converts to a
    32-bit int (``cvttss2si``: inf -> INT_MIN) and keeps the low byte, so -1 becomes 0xFF and +inf 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log2(amax.astype(np.float64)).astype(F32)
    t = np.floor(lg) - F32(2) + F32(127)                              # float32, exact small integers
    i = np.where(np.isfinite(t), t, F32(-2.0 ** 31)).astype(np.int64)
    return np.where(amax > 0, i & 0xFF, 0).astype(np.uint8)


def _best_index(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``best_index_mxfp4``: the first code i of 0..15 with the least ``fabsf(kvalues[i]*d - x)``."""
    best = np.zeros(x.shape, np.uint8)
    best_err = np.abs(_KF[0] * d - x)
    for i in range(1, 16):
        err = np.abs(_KF[i] * d - x)
        better = err < best_err                  # strict: ties keep the lower code; NaN never wins
        best = np.where(better, np.uint8(i), best)
        best_err = np.where(better, err, best_err)
    return best


def _encode(xb: np.ndarray) -> np.ndarray:
    amax = np.zeros(xb.shape[0], F32)
    a = np.abs(xb)
    for j in range(QK):
        amax = np.where(amax < a[:, j], a[:, j], amax)      # `if (amax < fabsf(v))`: NaN never enters
    e = mxfp4_exponent(amax)
    codes = _best_index(xb, E8M0_HALF[e][:, None])
    out = np.empty((xb.shape[0], 1 + QK // 2), np.uint8)
    out[:, 0] = e
    out[:, 1:] = codes[:, :16] | (codes[:, 16:] << 4)
    return out


def _quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
    rows, n = x.shape
    xb = x.reshape(-1, QK)
    out = np.empty((xb.shape[0], 1 + QK // 2), np.uint8)
    for start in range(0, xb.shape[0], _CHUNK):
        out[start:start + _CHUNK] = _encode(xb[start:start + _CHUNK])
    return out.reshape(rows, n // QK * (1 + QK // 2))


def _set_scale(blk: np.ndarray, values: np.ndarray) -> None:
    """Case classes for the E8M0 byte (GGML-5.1): the exponent of each float16 value, clamped to a byte;
    zero and subnormal values take e = 0..2 (2^-127 .. 2^-125), inf and NaN take 0xFF (MX-1.4)."""
    v = np.abs(np.asarray(values, np.float32))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(v > 0, v, 1.0))) + 127
    e = np.where(v < 2.0 ** -14, np.arange(v.size) % 3, e)               # the smallest exponents
    e = np.where(v >= 65504, 253 + np.arange(v.size) % 2, e)             # the overflowing end (MX-1.4)
    blk[:, 0] = np.where(np.isfinite(v), np.clip(e, 0, 254), 0xFF).astype(np.uint8)


# e is a byte: never negative, so GGML-3.2 has nothing to add (MX-1.4)
TYPES = (BlockType("mxfp4", "MX-1", _decode, _scales, quantize=_quantize, set_scale=_set_scale, bits=4, group=32),)
