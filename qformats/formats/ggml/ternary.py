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
from .kmachinery_qkx import bounded_passes

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


_POW3 = np.array([1, 3, 9, 27, 81, 243], np.uint16)


def trit(byte: np.ndarray, n) -> np.ndarray:
    """Trit ``n`` of a packed byte, ggml's way: ``q = (uint8)(byte * 3^n); t = (q * 3) >> 8`` (TQ-1.2)."""
    q = (byte.astype(np.uint16) * _POW3[n]) & 0xFF      # the uint8 store drops the digits above trit n
    return (q * 3) >> 8                                  # the top digit of the fraction q / 256


# Decoders. Both run over chunks of _DECODE_BLOCKS blocks with preallocated buffers; every step before the
# one float32 multiply is integer work on whole contiguous chunks (flat bytes, d bytes included and ignored),
# and the reordering of trits into weight order moves 32/16/4-byte runs as opaque void items.

_DECODE_BLOCKS = 2048
_V32, _V16, _V4 = np.dtype("V32"), np.dtype("V16"), np.dtype("V4")
_TQ1_MULS = np.array([1, 3, 9, 27, 81], np.uint8)[:, None]    # 3^n: the uint8 product wraps as ggml's store


def _times_d(codes: np.ndarray, d: np.ndarray, out: np.ndarray) -> None:
    """``out = (float)codes * d`` for (n, 256) int8 codes and (n, 1) float32 d: one exact widening, then one
    float32 multiply over contiguous arrays (d repeated per weight costs less than NumPy's mixed-type,
    broadcasting multiply; measured, NumPy 2.4)."""
    np.copyto(out, codes, casting="unsafe")
    np.multiply(out, np.repeat(d, QK_K).reshape(out.shape), out=out)


@bounded_passes
def _decode_tq1_0(blk: np.ndarray) -> np.ndarray:
    blk = np.ascontiguousarray(blk)
    nb = blk.shape[0]
    out = np.empty((nb, QK_K), F32)
    if nb == 0:
        return out
    d = fp16_field(blk, TQ1_D)
    size = 54
    chunk = min(nb, _DECODE_BLOCKS)
    q_buf = np.empty(5 * chunk * size, np.uint8)
    t_buf = np.empty(5 * chunk * size, np.int8)
    w_buf = np.empty((chunk, QK_K), np.int8)
    for s in range(0, nb, chunk):
        n = min(chunk, nb - s)
        q = q_buf[:5 * n * size].reshape(5, n * size)
        t = t_buf[:5 * n * size].reshape(5, n * size)
        np.multiply(blk[s:s + n].reshape(1, -1), _TQ1_MULS, out=q)     # q = (uint8)(byte * 3^n)
        # trit (q * 3) >> 8 is 0 for q <= 85, 1 for 86..170, 2 for q >= 171: t - 1 = [q >= 171] - [q < 86]
        np.greater_equal(q, 171, out=t.view(np.bool_))
        np.less(q, 86, out=q.view(np.bool_))
        np.subtract(t, q.view(np.int8), out=t)
        r = t.reshape(5, n, size)                                       # (trit n, block, byte)
        w = w_buf[:n]
        np.copyto(w[:, :160].view(_V32), r[:, :, 0:32].view(_V32).reshape(5, n).T)   # weight 32n + m
        np.copyto(w[:, 160:240].view(_V16), r[:, :, 32:48].view(_V16).reshape(5, n).T)  # 160 + 16n + m
        np.copyto(w[:, 240:256].view(_V4), r[:4, :, 48:52].view(_V4).reshape(4, n).T)    # 240 + 4n + j
        _times_d(w, d[s:s + n], out[s:s + n])                           # (float)(t - 1) * d
    return out


# tq2_0 (TQ-2.1): qs[64], weight 128h + 32l + m in bits 2l+1:2l of qs[32h + m] (h = 0..1, l = 0..3, m = 0..31)
#
#   qs[32h + m] = [ w(128h+96+m) | w(128h+64+m) | w(128h+32+m) | w(128h+m) ]   (2 bits each, low bits right)


_TQ2_SHIFTS = np.array([0, 2, 4, 6], np.uint8)[:, None]
_LOW2 = np.uint64(0x0303030303030303)


@bounded_passes
def _decode_tq2_0(blk: np.ndarray) -> np.ndarray:
    blk = np.ascontiguousarray(blk)
    nb = blk.shape[0]
    out = np.empty((nb, QK_K), F32)
    if nb == 0:
        return out
    d = fp16_field(blk, TQ2_D)
    size = 66
    chunk = min(nb, _DECODE_BLOCKS)
    s_buf = np.empty(4 * chunk * size, np.uint8)
    w_buf = np.empty((chunk, QK_K), np.uint8)
    for s in range(0, nb, chunk):
        n = min(chunk, nb - s)
        sh = s_buf[:4 * n * size].reshape(4, n * size)
        np.right_shift(blk[s:s + n].reshape(1, -1), _TQ2_SHIFTS, out=sh)        # (l, block bytes) = byte >> 2l
        w = w_buf[:n]                                                           # (block, h, l, m) order
        np.copyto(w.view(_V32).reshape(n, 2, 4), sh.reshape(4, n, size)[:, :, :TQ2_QS].view(_V32).transpose(1, 2, 0))
        words = w.reshape(-1).view(np.uint64)
        np.bitwise_and(words, _LOW2, out=words)                                 # the 2-bit codes
        wi = w.view(np.int8)
        np.subtract(wi, np.int8(1), out=wi)                                     # code 3 decodes to +2 (TQ-2.3)
        _times_d(wi, d[s:s + n], out[s:s + n])
    return out


def _scales(offset: int):
    return lambda blk: {"d": fp16_field(blk, offset)}


# ---------------------------------------------------------------------------------------------
# reference encoders (TQ-1.4, TQ-2.4)
# ---------------------------------------------------------------------------------------------


def _max_abs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``ggml_max_abs(x)``, rows holding a NaN). Without a NaN the running MAX is the plain maximum."""
    a = np.abs(x)
    amax = a.max(axis=1)                                  # NaN propagates: exactly the rows with a NaN
    nan = np.isnan(amax)
    if nan.any():
        part = a[nan]
        run = np.zeros(part.shape[0], F32)
        for j in range(part.shape[1]):
            run = np.where(run > part[:, j], run, part[:, j])
        amax[nan] = run
    return amax, nan


def ggml_max_abs(x: np.ndarray) -> np.ndarray:
    """``amax = 0; for j: amax = MAX(amax, fabsf(x[j]))`` with ggml's ``MAX(a, b) = a > b ? a : b``.

    A NaN element makes ``amax`` NaN, and the next element replaces it (``NaN > b`` is false).
    """
    return _max_abs(x)[0]


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


def _encode_tq1_0_general(xb: np.ndarray) -> np.ndarray:
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


def _encode_tq2_0_general(xb: np.ndarray) -> np.ndarray:
    d16, xi = _d_and_trits(xb)
    codes = (xi & 3).astype(np.uint8).reshape(-1, 2, 4, 32)            # (block, h, l, m)
    out = np.empty((xb.shape[0], 66), np.uint8)
    qs = codes[:, :, 0] | (codes[:, :, 1] << 2) | (codes[:, :, 2] << 4) | (codes[:, :, 3] << 6)
    out[:, :TQ2_QS] = qs.reshape(-1, TQ2_QS)
    out[:, TQ2_D:] = d16.reshape(-1, 1).view(np.uint8)
    return out


# Fast path (TQ-1.4, TQ-2.4). In a block with no NaN, a finite d = amax and a finite 1/d, every
# |x * id| <= RN(d * RN(1/d)) < 1.5, so lroundf (half away from zero) is -1, 0 or +1 and
# xi = 1 + [x * id >= 0.5] - [x * id <= -0.5] is 0, 1 or 2: no wrap in any later uint8 step, so the
# packing runs bytewise inside uint64 words (8 lanes that never carry). Other blocks go the general way.

def _fast_trits(xb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fp16 bits of d, (B, 256) uint8 xi in 0..2 for the fast blocks, mask of the other blocks)."""
    d, nan = _max_abs(xb)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(d != 0, F32(1) / d, F32(0))
        slow = nan | ~np.isfinite(d) | ~np.isfinite(inv)
    v = np.multiply(xb, inv[:, None])
    xi = np.empty(v.shape, np.uint8)
    le = np.empty(v.shape, np.bool_)
    np.greater_equal(v, F32(0.5), out=xi.view(np.bool_))
    np.less_equal(v, F32(-0.5), out=le)
    np.add(xi, np.uint8(1), out=xi)
    np.subtract(xi, le.view(np.uint8), out=xi)
    d16 = d.astype("<f2").view("<u2")                     # NaN d: general path
    return d16, xi, slow


_CEIL_256_243 = _ceil_256_243(np.arange(256))


def _encode_tq1_0(xb: np.ndarray) -> np.ndarray:
    nb = xb.shape[0]
    d16, xi, slow = _fast_trits(xb)
    w = xi.view(np.uint64)                                # (B, 32): 8 weights a word
    q = np.empty((nb, 52), np.uint8)
    # Horner over the trits, first trit most significant: acc = acc * 3 + xi, every lane <= 242
    for words, dst in ((w[:, :20].reshape(nb, 5, 4), q[:, :32].view(np.uint64)),
                       (w[:, 20:30].reshape(nb, 5, 2), q[:, 32:48].view(np.uint64)),
                       (xi[:, 240:].view(np.uint32).reshape(nb, 4, 1), q[:, 48:52].view(np.uint32))):
        acc = words[:, 0].copy()
        for n in range(1, words.shape[1]):
            np.multiply(acc, acc.dtype.type(3), out=acc)
            np.add(acc, words[:, n], out=acc)
        if words.shape[1] == 4:
            np.multiply(acc, acc.dtype.type(3), out=acc)     # qh: shift to the top trit of five
        dst[...] = acc
    out = np.empty((nb, 54), np.uint8)
    out[:, :TQ1_D] = np.take(_CEIL_256_243, q)
    out[:, TQ1_D:] = d16.reshape(-1, 1).view(np.uint8)
    if slow.any():
        out[slow] = _encode_tq1_0_general(xb[slow])
    return out


def _encode_tq2_0(xb: np.ndarray) -> np.ndarray:
    nb = xb.shape[0]
    d16, xi, slow = _fast_trits(xb)
    w = xi.view(np.uint64).reshape(nb, 2, 4, 4)          # (block, h, l, word of 8 m)
    acc = np.left_shift(w[:, :, 3], np.uint64(6))
    for l in (2, 1):
        np.bitwise_or(acc, np.left_shift(w[:, :, l], np.uint64(2 * l)), out=acc)
    np.bitwise_or(acc, w[:, :, 0], out=acc)              # qs[32h + m]: lanes of <= 2 bits never spill
    out = np.empty((nb, 66), np.uint8)
    out[:, :TQ2_QS].view(_V32)[...] = acc.view(_V32)[:, :, 0]
    out[:, TQ2_D:] = d16.reshape(-1, 1).view(np.uint8)
    if slow.any():
        out[slow] = _encode_tq2_0_general(xb[slow])
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
