"""mxfp4: OCP MX FP4 blocks, 32 E2M1 codes sharing one E8M0 exponent (spec/ggml_ternary_fp4.md, MX-1).

ggml stores E2M1 values doubled (``kvalues_mxfp4``, integers) and halves the exponent instead
(``ggml_e8m0_to_fp32_half``), so a weight is ``kvalues_mxfp4[c] * 2^(e - 128)``: one float32
product, exact unless it overflows to inf (``e >= 253``). The E8M0 value 0xFF is NaN in the OCP MX spec and the
one pattern ``ggml_validate_row_data`` refuses; ggml's decoder still reads it as 2^127 (MX-1.3).
Decode and the reference encoder ``quantize_row_mxfp4_ref`` are bit- and byte-identical to ggml 0.10.1. The E2M1
and E8M0 values come from the shared element tables (``qformats.elements``, spec/float_elements.md FE-5, FE-6).
"""

from __future__ import annotations

import numpy as np

from ...elements import E2M1, E8M0, decode as decode_element, table as element_table
from .base import F32, BlockType

__all__ = ["TYPES", "KVALUES_MXFP4", "E8M0_HALF", "e8m0", "unpack_codes", "mxfp4_exponent"]

QK = 32                     # block: e (1 byte) | qs[16]: 1 + QK_MXFP4 / 2 = 17 bytes
_CHUNK = 16384              # blocks per encoder pass

# ggml-common.h `kvalues_mxfp4` (ggml 0.10.1): E2M1 code -> 2 * value (FE-6.4), as int8. Code bit 3 is the sign;
# 0b1000 is E2M1's -0, which becomes the integer 0, so ggml decodes it to +0.0.
KVALUES_MXFP4 = (element_table(E2M1) * 2).astype(np.int8)
_KF = KVALUES_MXFP4.astype(F32)

# ggml-impl.h `ggml_e8m0_to_fp32_half(e)`: bits 0x00200000 << e for e < 2 (2^-128, 2^-127: subnormal),
# (e - 1) << 23 otherwise: 2^(e - 128), half the E8M0 value (FE-5.3), exact; 0xFF, NaN in E8M0, reads as 2^127.
E8M0_HALF = np.where(np.arange(256) == 0xFF, F32(2.0 ** 127), element_table(E8M0) * F32(0.5)).astype(F32)


def e8m0(e: np.ndarray) -> np.ndarray:
    """The OCP E8M0 value 2^(e - 127) as float32 (FE-5.3), NaN for e == 0xFF (MX-1.4); e == 0 is 2^-127, finite."""
    return decode_element(e, E8M0)


# qs[16] (MX-1.1): qs[j] = code(j) | code(j + 16) << 4 — low nibbles are elements 0..15, high 16..31:
#
#   byte 1 + j:  [ c(j+16) 7:4 | c(j) 3:0 ]      j = 0..15


def unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(nb, 16) uint8 -> (nb, 32) codes in element order."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


_DECODE_BLOCKS = 8192
_V16 = np.dtype("V16")
_NIBBLE_SHIFTS = np.array([0, 4], np.uint8)[:, None]


def _decode(blk: np.ndarray) -> np.ndarray:
    """``kvalues_mxfp4[c] * ggml_e8m0_to_fp32_half(e)``: the code's value as a small integer (int8, exact),
    widened and multiplied once by the block's float32 scale, over chunks of whole contiguous blocks."""
    blk = np.ascontiguousarray(blk)
    nb = blk.shape[0]
    out = np.empty((nb, QK), F32)
    if nb == 0:
        return out
    d = E8M0_HALF[blk[:, 0]][:, None]
    size = 1 + QK // 2
    chunk = min(nb, _DECODE_BLOCKS)
    c_buf = np.empty(2 * chunk * size, np.uint8)           # nibble codes, then kvalues (int8)
    s_buf = np.empty(2 * chunk * size, np.uint8)           # sign bit
    t_buf = np.empty(2 * chunk * size, np.uint8)
    u_buf = np.empty(2 * chunk * size, np.uint8)
    w_buf = np.empty((chunk, QK), np.int8)
    for s in range(0, nb, chunk):
        n = min(chunk, nb - s)
        c, sg, t, u = (b[:2 * n * size].reshape(2, n * size) for b in (c_buf, s_buf, t_buf, u_buf))
        np.right_shift(blk[s:s + n].reshape(1, -1), _NIBBLE_SHIFTS, out=c)   # low nibble row, high nibble row
        np.bitwise_and(c, 15, out=c)
        np.right_shift(c, 3, out=sg)                        # code bit 3: the sign
        np.bitwise_and(c, 7, out=c)                         # m: 0 1 2 3 4 5 6 7
        np.greater(c, 4, out=t.view(np.bool_))
        np.subtract(c, 4, out=u)
        np.multiply(t, u, out=t)                            # m > 4: m - 4, else 0
        np.add(c, t, out=c)                                 #        0 1 2 3 4 6 8 10
        np.greater(c, 9, out=t.view(np.bool_))
        np.add(c, t, out=c)
        np.add(c, t, out=c)                                 # |kvalue|: 0 1 2 3 4 6 8 12
        np.negative(sg.view(np.int8), out=t.view(np.int8))  # 0 or -1
        np.bitwise_xor(c, t, out=c)
        np.add(c, sg, out=c)                                # two's complement negation where the sign is set
        w = w_buf[:n]
        np.copyto(w.view(_V16), c.reshape(2, n, size)[:, :, 1:].view(_V16).reshape(2, n).T)
        np.multiply(w, d[s:s + n], out=out[s:s + n])        # x0 * d: int8 widened to float, one rounding
    return out


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


def _encode_by_search(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_mxfp4_ref`` transcribed: running amax, then the 16-way search for every element."""
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


# The search as a table (MX-1.5). In a block with finite amax >= 2^-100 and e <= 252, d = 2^(e - 128) is a
# normal power of two with amax < 16 d (floor(log2f(amax)) is E or E + 1 for amax in [2^E, 2^(E+1))) and
# every kvalues[i] * d is exact and finite. For x >= 0 between grid points v_i <= x <= v_(i+1) of
# 0, 1, 2, 3, 4, 6, 8, 12 (times d), both differences are exact (Sterbenz: v_(i+1) <= 2 v_i for i >= 1;
# d - x is exact for x >= d/2, and for x < d/2 code 0's error x is below RN(d - x) >= d/2); every other
# grid point is at least d farther, far more than the rounding of values below 32 d can close. So the
# first minimum is i + 1 exactly when x > (v_i + v_(i+1)) / 2, ties keeping the lower code: the code is
# the count of midpoints 0.5, 1.5, 2.5, 3.5, 5, 7, 10 (times d) below x. Negative codes mirror the
# errors exactly (RN(-a) = -RN(a)), positive codes are then strictly worse except code 0, whose error
# |x| equals code 8's and wins the tie; NaN elements make every error NaN: code 0.
#
# y = x * 2^(128 - e) = x / d exactly (a power-of-two scaling; underflow only below 2^-126, far from the
# midpoints), and "y > m" for the midpoints m, all multiples of 2^21 as float32 bit patterns, is a test
# on (bits(y) - 1) >> 21 (uint32, wrapping): an 11-bit index into _CODE_OF: 0..1023 positive y (+0 wraps
# to 2047), 1023..2047 negative y; NaN and both zeros land on entries 1020..1023 / 2044..2047, code 0.

def _code_table() -> np.ndarray:
    mids = np.array([0.5, 1.5, 2.5, 3.5, 5, 7, 10], F32).view(np.uint32)
    assert not (mids & 0x1FFFFF).any()
    j = np.arange(1024)
    count = (j[:, None] >= (mids >> 21)[None, :]).sum(axis=1)
    count[j >= 0x7F800000 >> 21] = 0                       # |y| bits - 1 >= 0x7F800000: NaN
    return np.concatenate([count, np.where(count > 0, count + 8, 0)]).astype(np.uint8)


_CODE_OF = _code_table()
_INV_HALF = np.ldexp(1.0, np.minimum(128 - np.arange(256), 127)).astype(F32)   # 1 / E8M0_HALF[e] for e >= 1


def _encode(xb: np.ndarray) -> np.ndarray:
    nb = xb.shape[0]
    m = np.abs(xb).reshape(-1)
    for _ in range(5):                                      # pairwise max of 32: NaN propagates
        m = np.maximum(m[0::2], m[1::2])
    with np.errstate(invalid="ignore"):
        e = mxfp4_exponent(m)                               # m = the running amax unless the row has a NaN
        fast = np.isfinite(m) & (m >= F32(2.0 ** -100)) & (e <= 252)
    y = np.multiply(xb, _INV_HALF[e][:, None]).view(np.uint32)
    np.subtract(y, np.uint32(1), out=y)
    np.right_shift(y, np.uint32(21), out=y)
    codes = np.take(_CODE_OF, y)                            # (nb, 32) uint8
    words = codes.view(np.uint64)                           # (nb, 4): elements 0..15 | 16..31
    np.left_shift(words[:, 2:], np.uint64(4), out=words[:, 2:])
    np.bitwise_or(words[:, :2], words[:, 2:], out=words[:, :2])
    out = np.empty((nb, 1 + QK // 2), np.uint8)
    out[:, 0] = e
    out[:, 1:].view(_V16)[:, 0] = words[:, :2].view(_V16)[:, 0]
    if not fast.all():
        slow = ~fast
        out[slow] = _encode_by_search(xb[slow])
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
