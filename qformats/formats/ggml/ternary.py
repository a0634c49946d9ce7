"""tq1_0 and tq2_0: ternary weights {-d, 0, +d} of BitNet b1.58 / TriLM models (spec/ggml_ternary_fp4.md, TQ).

Both types are 256-weight blocks of trits with one float16 ``d`` (the block's absolute maximum, as
the reference encoder writes it) and decode ``y = (float)(t - 1) * d``. tq2_0 stores each trit in
two bits; tq1_0 packs five trits per byte as a base-3 fixed-point fraction that a multiply by 3
unpacks (TQ-1.2). Decode and the reference encoders ``quantize_row_tq{1,2}_0_ref`` are bit- and
byte-identical to ggml 0.10.1 ``ggml-quants.c``; neither type has an importance path (``quantize_tq*``
ignores ``quant_weights``).
"""

from __future__ import annotations

import numpy as np

from .base import F32, BlockType, fp16_field

__all__ = ["TYPES", "tq1_0_layout", "trit", "lround_low_byte", "ggml_max_abs"]

QK_K = 256
TQ1_QS, TQ1_QH, TQ1_D = 48, 4, 52          # qs[48] | qh[4] | d: 48 + 4 + 2 = 54 = 2 + 4 * 13
TQ2_QS, TQ2_D = 64, 64                     # qs[64] | d:      64 + 2 = 66 = 2 + QK_K / 4
_CHUNK = 4096                              # blocks per encoder pass: the (B, 256) temporaries stay small


# ---------------------------------------------------------------------------------------------
# tq1_0 layout (TQ-1.1): which byte and which trit each of the 256 weights comes from
# ---------------------------------------------------------------------------------------------
#
#   weights   0..159 : qs[m]      trit n, weight      32n + m     n = 0..4, m = 0..31
#   weights 160..239 : qs[32 + m] trit n, weight 160 + 16n + m    n = 0..4, m = 0..15
#   weights 240..255 : qh[j]      trit n, weight 240 +  4n + j    n = 0..3, j = 0..3   (byte 48 + j)
#
# trit n = 0 is the most significant base-3 digit of the byte's fraction (TQ-1.2).


def tq1_0_layout() -> tuple[np.ndarray, np.ndarray]:
    """(byte index, trit position n) of each weight 0..255 of a tq1_0 block, both (256,) int."""
    byte = np.empty(QK_K, np.intp)
    pos = np.empty(QK_K, np.intp)
    for n in range(5):
        byte[32 * n:32 * n + 32], pos[32 * n:32 * n + 32] = np.arange(32), n
        byte[160 + 16 * n:176 + 16 * n], pos[160 + 16 * n:176 + 16 * n] = 32 + np.arange(16), n
    for n in range(4):
        byte[240 + 4 * n:244 + 4 * n], pos[240 + 4 * n:244 + 4 * n] = TQ1_QS + np.arange(4), n
    return byte, pos


_TQ1_BYTE, _TQ1_POS = tq1_0_layout()
_POW3 = np.array([1, 3, 9, 27, 81, 243], np.uint16)


def trit(byte: np.ndarray, n) -> np.ndarray:
    """Trit ``n`` of a packed byte, ggml's way: ``q = (uint8)(byte * 3^n); t = (q * 3) >> 8`` (TQ-1.2)."""
    q = (byte.astype(np.uint16) * _POW3[n]) & 0xFF      # the uint8 store drops the digits above trit n
    return (q * 3) >> 8                                  # the top digit of the fraction q / 256


def _decode_tq1_0(blk: np.ndarray) -> np.ndarray:
    t = trit(blk[:, _TQ1_BYTE], _TQ1_POS)                            # (nb, 256) in 0..2
    return (t.astype(np.int8) - np.int8(1)).astype(F32) * fp16_field(blk, TQ1_D)   # (float)(t - 1) * d


# tq2_0 (TQ-2.1): qs[64], weight 128h + 32l + m in bits 2l+1:2l of qs[32h + m] (h = 0..1, l = 0..3, m = 0..31)
#
#   qs[32h + m] = [ w(128h+96+m) | w(128h+64+m) | w(128h+32+m) | w(128h+m) ]   (2 bits each, low bits right)


def _tq2_0_codes(blk: np.ndarray) -> np.ndarray:
    qs = blk[:, :TQ2_QS].reshape(-1, 2, 1, 32)
    return ((qs >> np.array([0, 2, 4, 6], np.uint8)[:, None]) & 3).reshape(-1, QK_K)


def _decode_tq2_0(blk: np.ndarray) -> np.ndarray:
    q = _tq2_0_codes(blk).astype(np.int8) - np.int8(1)              # code 3 decodes to +2 (TQ-2.3)
    return q.astype(F32) * fp16_field(blk, TQ2_D)


def _scales(offset: int):
    return lambda blk: {"d": fp16_field(blk, offset)}


# ---------------------------------------------------------------------------------------------
# reference encoders (TQ-1.4, TQ-2.4)
# ---------------------------------------------------------------------------------------------


def ggml_max_abs(x: np.ndarray) -> np.ndarray:
    """``amax = 0; for j: amax = MAX(amax, fabsf(x[j]))`` with ggml's ``MAX(a, b) = a > b ? a : b``.

    A NaN element makes ``amax`` NaN, and the next element replaces it (``NaN > b`` is false).
    """
    a = np.abs(x)
    amax = np.zeros(x.shape[0], F32)
    for j in range(x.shape[1]):
        amax = np.where(amax > a[:, j], amax, a[:, j])
    return amax


def lround_low_byte(v: np.ndarray) -> np.ndarray:
    """The low byte of glibc ``lroundf(v)`` (a long) as int16: half away from zero; NaN, +-inf and
    ``|v| >= 2^63`` give LONG_MIN, whose low byte is 0 (TQ-1.4 step 3)."""
    w = v.astype(np.float64)                              # w + 0.5 is exact in float64 for float32 w
    ok = np.isfinite(w) & (np.abs(w) < 2.0 ** 63)
    r = np.trunc(np.where(ok, w + np.copysign(0.5, w), 0.0))
    return (r.astype(np.int64) & 0xFF).astype(np.int16)


def _d_and_trits(xb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(fp16 bits of d, (B, 256) int16 ``xi = lroundf(x * id) + 1`` mod 256)."""
    d = ggml_max_abs(xb)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, F32(1) / d, F32(0))            # `d ? 1.0f/d : 0.0f`: NaN is true
    xi = (lround_low_byte(xb * inv[:, None]) + 1) & 0xFF
    # GGML_FP32_TO_FP16: round to nearest even; ggml writes NaN as 0x7E00 (d = fabsf(...) has no sign)
    d16 = np.where(np.isnan(d), np.uint16(0x7E00), d.astype("<f2").view(np.uint16))
    return d16.astype("<u2"), xi


def _ceil_256_243(q: np.ndarray) -> np.ndarray:
    """``(uint8)(((uint16_t)q * 256 + 242) / 243)``: trits to the fixed-point fraction q / 243 (TQ-1.2)."""
    return (((q.astype(np.int32) * 256 + 242) // 243) & 0xFF).astype(np.uint8)


def _encode_tq1_0(xb: np.ndarray) -> np.ndarray:
    d16, xi = _d_and_trits(xb)
    out = np.empty((xb.shape[0], 54), np.uint8)
    for lo, width, digits in ((0, 32, 5), (160, 16, 5), (240, 4, 4)):
        q = np.zeros((xb.shape[0], width), np.int16)
        for n in range(digits):                               # first trit ends up most significant
            q = (q * 3 + xi[:, lo + width * n:lo + width * (n + 1)]) & 0xFF     # uint8 q: wraps
        if digits == 4:
            q = (q * 3) & 0xFF                                # qh: shift to the top trit of five
        first = {0: 0, 160: 32, 240: TQ1_QS}[lo]
        out[:, first:first + width] = _ceil_256_243(q)
    out[:, TQ1_D:] = d16.reshape(-1, 1).view(np.uint8)
    return out


def _encode_tq2_0(xb: np.ndarray) -> np.ndarray:
    d16, xi = _d_and_trits(xb)
    codes = (xi & 3).astype(np.uint8).reshape(-1, 2, 4, 32)            # (block, h, l, m)
    out = np.empty((xb.shape[0], 66), np.uint8)
    qs = codes[:, :, 0] | (codes[:, :, 1] << 2) | (codes[:, :, 2] << 4) | (codes[:, :, 3] << 6)
    out[:, :TQ2_QS] = qs.reshape(-1, TQ2_QS)
    out[:, TQ2_D:] = d16.reshape(-1, 1).view(np.uint8)
    return out


def _rows(encode, size: int):
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        xb = x.reshape(-1, QK_K)
        out = np.empty((xb.shape[0], size), np.uint8)
        for start in range(0, xb.shape[0], _CHUNK):
            out[start:start + _CHUNK] = encode(xb[start:start + _CHUNK])
        return out.reshape(rows, n // QK_K * size)
    return quantize


# d = amax >= 0 or NaN, rounded to float16: never negative (TQ-1.5, TQ-2.5)
TYPES = (
    BlockType("tq1_0", "TQ-1", _decode_tq1_0, _scales(TQ1_D), never_negative=("d",), fp16_offsets={"d": TQ1_D},
              quantize=_rows(_encode_tq1_0, 54), group=256),
    BlockType("tq2_0", "TQ-2", _decode_tq2_0, _scales(TQ2_D), never_negative=("d",), fp16_offsets={"d": TQ2_D},
              quantize=_rows(_encode_tq2_0, 66), bits=2, group=256),
)
