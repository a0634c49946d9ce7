"""The legacy 32-weight block types q4_0, q4_1, q5_0, q5_1, q8_0 and q8_1 (spec/ggml_legacy.md, LEG-1 .. LEG-7).

Decoders reproduce ggml ``dequantize_row_q4_0`` .. ``dequantize_row_q8_0`` bit for bit; encoders reproduce
``quantize_q4_0`` .. ``quantize_q8_0`` byte for byte: the reference path (``quantize_row_*_ref``) without an
importance vector, the importance path (``quantize_row_*_impl``) with one. Facts (struct layouts, formulas,
operation order) are from ggml 0.10.1 (llama.cpp sync 3142f1db) ``src/ggml-common.h`` and
``src/ggml-quants.c``; the code is qformats' own, vectorized over blocks.

Float32 discipline (as in ``qformats.formats.q4_k.codec``): every C expression is evaluated with exactly
its float32 rounding steps, in source order, without contraction; C's in-order loops over the 32 weights of
a block are loops over the in-block axis here (``seq_sum``, running maxima), each step one NumPy operation on
every block at once. Conversions from float to a small integer type are modelled as the x86-64 build
compiles them (LEG-1.4): truncate to int32, NaN and out-of-range giving 0x80000000, keep the low byte.
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import GGML_TYPES
from ...numerics import nearest_int
from ..q4_k.codec import affine_search, seq_sum
from .base import F32, BlockType, fp16_field

__all__ = ["TYPES", "unpack_nibbles", "pack_nibbles", "unpack_fifth_bits", "pack_fifth_bits", "c_int8", "roundf",
           "fp16_bits_ggml", "make_qx_quants"]

QK = 32                 # weights per block, QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK8_1
HALF = QK // 2
_CHUNK = 8192           # blocks per encoder pass: the (32, S) work arrays stay in cache

# bytes per block, from the one geometry table; the struct arithmetic is checked against it (LEG-2.1 ..)
SIZE = {t.name.lower(): t.type_size for t in GGML_TYPES.values() if t.block_size == QK}
assert (SIZE["q4_0"], SIZE["q4_1"], SIZE["q5_0"], SIZE["q5_1"], SIZE["q8_0"], SIZE["q8_1"]) == (
    2 + QK // 2, 2 + 2 + QK // 2, 2 + 4 + QK // 2, 2 + 2 + 4 + QK // 2, 2 + QK, 2 + 2 + QK)

# ---------------------------------------------------------------------------------------------
# bit fields (LEG-1.2, LEG-1.3)
# ---------------------------------------------------------------------------------------------
#
# qs[16], byte j = 0..15: element j in the low nibble, element j + 16 in the high nibble
#
#     qs[j] = [ q[j+16] bits 3:0 | q[j] bits 3:0 ]
#               7            4     3          0
#
# qh (q5_0, q5_1): one little-endian u32, bit e = bit 4 of element e (e = 0..31)
#
#     qh byte 0 = bits 7:0 = elements 7..0     ...     qh byte 3 = bits 31:24 = elements 31..24


def unpack_nibbles(qs: np.ndarray) -> np.ndarray:
    """(nb, 16) uint8 -> (nb, 32) uint8 codes 0..15 in element order (LEG-1.2)."""
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def pack_nibbles(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``(uint8)(lo | hi << 4)`` of two (nb, 16) integer arrays (elements 0..15 and 16..31), as C stores it:
    bits of ``lo`` above 3 are not masked (the reference q4_0/q4_1 encoders OR them in unmasked)."""
    return ((lo.astype(np.int32) | (hi.astype(np.int32) << 4)) & 0xFF).astype(np.uint8)


def unpack_fifth_bits(qh: np.ndarray) -> np.ndarray:
    """(nb, 4) uint8 ``qh`` -> (nb, 32) uint8 with 16 where bit e of the little-endian u32 is set (LEG-1.3)."""
    return np.unpackbits(qh, axis=1, bitorder="little") << 4


def pack_fifth_bits(codes: np.ndarray) -> np.ndarray:
    """(nb, 32) integer codes -> (nb, 4) uint8 ``qh``: bit e = bit 4 of code e."""
    return np.packbits(((codes.astype(np.int32) >> 4) & 1).astype(np.uint8), axis=1, bitorder="little")


# ---------------------------------------------------------------------------------------------
# C conversions (LEG-1.4)
# ---------------------------------------------------------------------------------------------


def c_int8(v: np.ndarray) -> np.ndarray:
    """``(int8_t)v`` for float32 ``v`` as gcc x86-64 compiles it (``cvttss2si``/``cvttps2dq``, low byte), int32.

    Truncation toward zero to int32; NaN and values outside int32 give 0x80000000, whose low byte is 0;
    the low byte is then read as a signed byte. In range of int8 this is plain C truncation.
    """
    t = np.trunc(v)
    inside = (t >= F32(-2.0 ** 31)) & (t < F32(2.0 ** 31))
    low = np.where(inside, t, F32(0)).astype(np.int64) & 0xFF
    return (low - ((low & 0x80) << 1)).astype(np.int32)


def roundf(v: np.ndarray) -> np.ndarray:
    """C ``roundf``: nearest integer, halfway cases away from zero (float32 in, float32 out)."""
    t = np.trunc(v)
    frac = v - t                                 # exact
    return t + np.where(np.abs(frac) >= F32(0.5), np.copysign(F32(1), v), F32(0))


def fp16_bits_ggml(v: np.ndarray) -> np.ndarray:
    """``GGML_FP32_TO_FP16(v)`` as uint16: round to nearest even, overflow to inf; NaN -> sign | 0x7e00.

    NumPy's ``astype(float16)`` rounds identically but keeps NaN payload bits; ggml's
    ``fp32_to_fp16`` writes the one quiet NaN 0x7e00 with the sign of the input.
    """
    v = np.asarray(v, F32)
    bits = v.astype("<f2").view(np.uint16)
    sign = (v.view(np.uint32) >> 16).astype(np.uint16) & np.uint16(0x8000)
    return np.where(np.isnan(v), sign | np.uint16(0x7E00), bits)


def _put_fp16(out: np.ndarray, offset: int, v: np.ndarray) -> None:
    out[:, offset:offset + 2] = fp16_bits_ggml(v).astype("<u2").reshape(-1, 1).view(np.uint8)


def _inverse(d: np.ndarray) -> np.ndarray:
    """``d ? 1.0f/d : 0.0f`` (a NaN ``d`` is true in C)."""
    return np.where(d != 0, F32(1) / d, F32(0))


# ---------------------------------------------------------------------------------------------
# decoders (LEG-2.2 .. LEG-7.2)
# ---------------------------------------------------------------------------------------------
#
# Every decoded value is exact before its last rounding: q - 8 (q4_0), q - 16 (q5_0) and the int8 of q8_0
# are small integers, and their product with the float16 scale d (11 significant bits) has at most 19
# significant bits, so ``x0*d`` is one float32 multiply whatever the order of the integer steps; q4_1 and
# q5_1 multiply then add, two float32 operations in C's order. The integer work is done 8 codes at a time
# on uint64 words (SWAR), the codes written as int8/uint8 and widened by the multiply itself.

_DECODE_CHUNK = 8192     # blocks per pass: the code words and the output slice stay in cache
_LOW4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_U4 = np.uint64(4)


def _fifth_bit_table(set_byte: int, clear_byte: int) -> np.ndarray:
    """byte b of qh (elements 8k .. 8k+7) -> a uint64 whose byte i is ``set_byte`` if bit i of b is set."""
    t = np.zeros((256, 8), np.uint8)
    for i in range(8):
        t[:, i] = np.where((np.arange(256) >> i) & 1, set_byte, clear_byte)
    return t.view("<u8").reshape(256)


_FIFTH = _fifth_bit_table(0x10, 0x00)      # q5_1: code | 16
_FIFTH_SIGNED = _fifth_bit_table(0x00, 0xF0)   # q5_0: (code | bit << 4) - 16 as int8 = nibble | (bit ? 0 : 0xF0)


def _f16_column(blk: np.ndarray, offset: int) -> np.ndarray:
    """The float16 at byte ``offset`` of every block, as float32 (nb, 1): a strided view, no gather copy."""
    field = blk[:, offset:offset + 2]
    if field.strides[1] != 1:
        field = np.ascontiguousarray(field)
    return field.view("<f2").astype(F32)


def _nibble_words(blk: np.ndarray, qs_at: int, part: slice) -> np.ndarray:
    """The 32 nibble codes of blocks ``part`` in element order as (k, 4) uint64 (8 uint8 codes a word):
    words 0-1 the low nibbles of qs (elements 0..15), words 2-3 the high ones (elements 16..31)."""
    qs = blk[part, qs_at:qs_at + HALF]
    k = qs.shape[0]
    v = np.empty((k, 2), np.uint64)
    v.view(np.uint8)[...] = qs
    c = np.empty((k, 4), np.uint64)
    wide = c.view("V16")                                  # (k, 2): one 16-byte item per half
    wide[:, 0] = v.view("V16")[:, 0]
    np.right_shift(v, _U4, out=v)
    wide[:, 1] = v.view("V16")[:, 0]
    np.bitwise_and(c, _LOW4, out=c)
    return c


def _decode_nibbles(qs_at: int, qh_at: int | None, signed: bool, affine: bool):
    """q4_0 / q4_1 / q5_0 / q5_1 decode: codes (signed: minus 8 or 16, as int8), ``x*d`` or ``x*d + m``."""
    def decode(blk: np.ndarray) -> np.ndarray:
        nb = blk.shape[0]
        out = np.empty((nb, QK), F32)
        d = _f16_column(blk, 0)
        m = _f16_column(blk, 2) if affine else None
        for start in range(0, nb, _DECODE_CHUNK):
            part = slice(start, min(start + _DECODE_CHUNK, nb))
            c = _nibble_words(blk, qs_at, part)
            if qh_at is not None:
                high = (_FIFTH_SIGNED if signed else _FIFTH)[blk[part, qh_at:qh_at + 4]]
                np.bitwise_or(c, high, out=c)
            elif signed:                                  # q - 8 per byte: (q + 120) ^ 128, no carries
                np.add(c, np.uint64(0x7878787878787878), out=c)
                np.bitwise_xor(c, np.uint64(0x8080808080808080), out=c)
            codes = c.view(np.int8 if signed else np.uint8)
            y = out[part]
            np.multiply(codes, d[part], out=y)            # x0*d: the code widens exactly, one rounding
            if affine:
                np.add(y, m[part], out=y)                 # (x0*d) + m
        return out
    return decode


_decode_q4_0 = _decode_nibbles(2, None, signed=True, affine=False)
_decode_q4_1 = _decode_nibbles(4, None, signed=False, affine=True)
_decode_q5_0 = _decode_nibbles(6, 2, signed=True, affine=False)
_decode_q5_1 = _decode_nibbles(8, 4, signed=False, affine=True)


def _decode_q8(qs_at: int):
    def decode(blk: np.ndarray) -> np.ndarray:
        nb = blk.shape[0]
        out = np.empty((nb, QK), F32)
        d = _f16_column(blk, 0)
        qs = blk[:, qs_at:qs_at + QK].view(np.int8)
        for start in range(0, nb, _DECODE_CHUNK):
            part = slice(start, min(start + _DECODE_CHUNK, nb))
            np.multiply(qs[part], d[part], out=out[part])
        return out
    return decode


def _d(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0)}


def _dm(second: str):
    return lambda blk: {"d": fp16_field(blk, 0), second: fp16_field(blk, 2)}


# ---------------------------------------------------------------------------------------------
# block assembly, shared by both encoder paths: d (B,), m (B,) or None, codes (B, 32) int
# ---------------------------------------------------------------------------------------------


def _assemble_q4_0(d, _m, q):
    out = np.empty((q.shape[0], 2 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    out[:, 2:] = pack_nibbles(q[:, :HALF], q[:, HALF:])
    return out


def _assemble_q5_0(d, _m, q):
    out = np.empty((q.shape[0], 2 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    out[:, 2:6] = pack_fifth_bits(q)
    out[:, 6:] = pack_nibbles(q[:, :HALF] & 15, q[:, HALF:] & 15)
    return out


def _assemble_q4_1(d, m, q):
    out = np.empty((q.shape[0], 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, m)
    out[:, 4:] = pack_nibbles(q[:, :HALF], q[:, HALF:])
    return out


def _assemble_q5_1(d, m, q):
    out = np.empty((q.shape[0], 4 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, m)
    out[:, 4:8] = pack_fifth_bits(q)
    out[:, 8:] = pack_nibbles(q[:, :HALF] & 15, q[:, HALF:] & 15)
    return out


# ---------------------------------------------------------------------------------------------
# reference encoders, quantize_row_*_ref (LEG-2.4 .. LEG-7.3); x is (B, 32) float32
# ---------------------------------------------------------------------------------------------


def _signed_absmax(x: np.ndarray) -> np.ndarray:
    """``amax = 0; max = 0; for j: if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }`` -> max."""
    amax = np.zeros(x.shape[0], F32)
    mx = np.zeros(x.shape[0], F32)
    for j in range(QK):
        a = np.abs(x[:, j])
        take = amax < a                 # strict: the first of equal magnitudes wins; NaN never does
        amax = np.where(take, a, amax)
        mx = np.where(take, x[:, j], mx)
    return mx


def _min_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``min = FLT_MAX; max = -FLT_MAX; for j: if (v < min) min = v; if (v > max) max = v;``"""
    flt_max = np.finfo(F32).max
    mn = np.full(x.shape[0], flt_max, F32)
    mx = np.full(x.shape[0], -flt_max, F32)
    for j in range(QK):
        mn = np.where(x[:, j] < mn, x[:, j], mn)
        mx = np.where(x[:, j] > mx, x[:, j], mx)
    return mn, mx


def _ref_symmetric(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """q4_0 (nmax 8) / q5_0 (nmax 16): ``d = max / -nmax``; code ``MIN(2nmax-1, (int8_t)(x*id + nmax+0.5f))``
    as a uint8 (a negative int8 wraps). Returns (d, codes (B, 32) int32 in 0..255)."""
    d = _signed_absmax(x) / F32(-nmax)
    idv = _inverse(d)[:, None]
    q = np.minimum(2 * nmax - 1, c_int8(x * idv + F32(nmax + 0.5)))
    return d, q & 0xFF


def _ref_affine(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q4_1 (nmax 15) / q5_1 (nmax 31): ``d = (max - min) / nmax``; codes ``(int8_t)((x - min)*id + 0.5f)``.
    Returns (d, min, codes (B, 32) int32)."""
    mn, mx = _min_max(x)
    d = (mx - mn) / F32(nmax)
    idv = _inverse(d)[:, None]
    return d, mn, c_int8((x - mn[:, None]) * idv + F32(0.5))


def _ref_q4_0(x: np.ndarray) -> np.ndarray:
    d, q = _ref_symmetric(x, 8)
    return _assemble_q4_0(d, None, q)


def _ref_q5_0(x: np.ndarray) -> np.ndarray:
    d, q = _ref_symmetric(x, 16)
    return _assemble_q5_0(d, None, q)


def _ref_q4_1(x: np.ndarray) -> np.ndarray:
    d, mn, q = _ref_affine(x, 15)
    return _assemble_q4_1(d, mn, np.minimum(15, q) & 0xFF)       # uint8_t xi = MIN(15, (int8_t)(...))


def _ref_q5_1(x: np.ndarray) -> np.ndarray:
    d, mn, q = _ref_affine(x, 31)
    return _assemble_q5_1(d, mn, q & 0xFF)                        # uint8_t xi = (uint8_t)(...): no MIN here


def _q8_scale(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``amax = 0; for j: amax = MAX(amax, fabsf(x[j]))`` (``MAX(a, b) = a > b ? a : b``: a NaN ``|x[j]|``
    replaces amax, and the next element replaces the NaN); ``d = amax / 127``; codes ``roundf(x*id)``."""
    amax = np.zeros(x.shape[0], F32)
    for j in range(QK):
        a = np.abs(x[:, j])
        amax = np.where(amax > a, amax, a)
    d = amax / F32(127)
    return d, c_int8(roundf(x * _inverse(d)[:, None]))


def _ref_q8_0(x: np.ndarray) -> np.ndarray:
    d, q = _q8_scale(x)
    out = np.empty((x.shape[0], 2 + QK), np.uint8)
    _put_fp16(out, 0, d)
    out[:, 2:] = q.astype(np.int8).view(np.uint8)
    return out


def _ref_q8_1(x: np.ndarray) -> np.ndarray:
    d, q = _q8_scale(x)
    s = q.sum(axis=1, dtype=np.int64).astype(F32) * d     # int sum (exact), then (float)sum * d
    out = np.empty((x.shape[0], 4 + QK), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, s)
    out[:, 4:] = q.astype(np.int8).view(np.uint8)
    return out


# ---------------------------------------------------------------------------------------------
# importance encoders, quantize_row_*_impl (LEG-1.5, LEG-2.5 .. LEG-5.5)
# ---------------------------------------------------------------------------------------------


def make_qx_quants(x: np.ndarray, w: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_qx_quants(32, nmax, x, L, rmse_type = 1, qw = w)`` on (32, S) columns (LEG-1.5).

    Returns ``(scale (S,), L (32, S) int32 codes in 0 .. 2*nmax-1)``.
    """
    amax = np.zeros(x.shape[1], F32)
    mx = np.zeros(x.shape[1], F32)
    for i in range(x.shape[0]):
        ax = np.abs(x[i])
        take = ax > amax
        amax = np.where(take, ax, amax)
        mx = np.where(take, x[i], mx)
    all_zero = amax < F32(1e-15)                   # GROUP_MAX_EPS

    wx = w * x

    def trial(iscale):
        lv = np.clip(nearest_int(iscale * x), -nmax, nmax - 1)
        lf = lv.astype(F32)
        return lv, seq_sum(wx * lf), seq_sum((w * lf) * lf)          # (w*x[i])*l, (w*l)*l

    lv, sumlx, suml2 = trial(F32(-nmax) / mx)
    L = lv + nmax
    scale = np.where(suml2 != 0, sumlx / suml2, F32(0))
    best = scale * sumlx
    for step in (*range(-9, 0), *range(1, 10)):
        lv, sumlx, suml2 = trial(-(F32(nmax) + F32(0.1) * F32(step)) / mx)
        better = (suml2 > 0) & (sumlx * sumlx > best * suml2)
        L = np.where(better, lv + nmax, L)
        scale = np.where(better, sumlx / suml2, scale)
        best = np.where(better, scale * sumlx, best)
    return np.where(all_zero, F32(0), scale), np.where(all_zero, 0, L)


def _row_weights(x: np.ndarray, qw: np.ndarray) -> np.ndarray:
    """``sigma2 = sum_x2 / n`` over each whole row (in order), then ``qw[j] * sqrtf(sigma2 + x[j]*x[j])``.

    ``x``: (rows, n) float32; ``qw``: (n,) float32. Returns (rows, n) float32.
    """
    n = x.shape[1]
    sum_x2 = seq_sum(x[:, j] * x[:, j] for j in range(n))
    sigma2 = (sum_x2 / F32(n))[:, None]
    return qw[None, :] * np.sqrt(sigma2 + x * x)


def _impl_symmetric(nmax: int, assemble):
    """q4_0 / q5_0 ``_impl``: ``d = make_qx_quants(32, nmax, ...)``; codes are the search's L, not requantized."""
    def encode(xc: np.ndarray, wc: np.ndarray) -> np.ndarray:     # (32, S) columns
        d, L = make_qx_quants(xc, wc, nmax)
        return assemble(d, None, L.T)
    return encode


def _impl_affine(nmax: int, assemble):
    """q4_1 / q5_1 ``_impl``: ``make_qkx3_quants(32, nmax, x, w, L, &min, Laux, -0.9f, 0.05f, 36, false)``;
    ``d = fp16(scale)``, ``m = fp16(-the_min)``."""
    def encode(xc: np.ndarray, wc: np.ndarray) -> np.ndarray:
        scale, the_min, L = affine_search(xc, wc, nmax=nmax, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
        return assemble(scale, -the_min, L.T.astype(np.int32))
    return encode


# ---------------------------------------------------------------------------------------------
# row-level encoders (the BlockType.quantize contract)
# ---------------------------------------------------------------------------------------------


def _chunked(nblocks: int, size: int, encode) -> np.ndarray:
    out = np.empty((nblocks, size), np.uint8)
    for start in range(0, nblocks, _CHUNK):
        part = slice(start, min(start + _CHUNK, nblocks))
        out[part] = encode(part)
    return out


def _encoder(size: int, ref, impl=None):
    """``quantize_<type>(x, y, rows, n, importance)``: without importance the reference path on the input as
    one flat sequence of blocks; with it the importance path, row by row with the same vector."""
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        xb = x.reshape(-1, QK)
        if importance is None:
            out = _chunked(xb.shape[0], size, lambda part: ref(xb[part]))
        else:
            wb = _row_weights(x, importance).reshape(-1, QK)
            out = _chunked(xb.shape[0], size, lambda part: impl(np.ascontiguousarray(xb[part].T),
                                                                np.ascontiguousarray(wb[part].T)))
        return out.reshape(rows, n // QK * size)
    return quantize


TYPES = (
    # q4_0: d = max / -8 with max the signed value of largest magnitude: either sign (LEG-2.3)
    BlockType("q4_0", "LEG-2", _decode_q4_0, _d, fp16_offsets={"d": 0},
              quantize=_encoder(SIZE["q4_0"], _ref_q4_0, _impl_symmetric(8, _assemble_q4_0)), importance=True, bits=4, group=32),
    # q4_1: m is the block minimum (either sign); d = (max - min) / 15 >= 0 on the reference path only,
    # the importance path writes d < 0 where its search clamps a positive intercept (LEG-3.5)
    BlockType("q4_1", "LEG-3", _decode_q4_1, _dm("m"), fp16_offsets={"d": 0, "m": 2},
              quantize=_encoder(SIZE["q4_1"], _ref_q4_1, _impl_affine(15, _assemble_q4_1)), importance=True, bits=4, group=32),
    BlockType("q5_0", "LEG-4", _decode_q5_0, _d, fp16_offsets={"d": 0},
              quantize=_encoder(SIZE["q5_0"], _ref_q5_0, _impl_symmetric(16, _assemble_q5_0)), importance=True, bits=5, group=32),
    BlockType("q5_1", "LEG-5", _decode_q5_1, _dm("m"), fp16_offsets={"d": 0, "m": 2},
              quantize=_encoder(SIZE["q5_1"], _ref_q5_1, _impl_affine(31, _assemble_q5_1)), importance=True, bits=5, group=32),
    # q8_0: d = amax / 127 with amax starting at +0 (LEG-6.3); quantize_q8_0 ignores an importance vector,
    # so qformats refuses one rather than pretend to use it (LEG-6.5)
    BlockType("q8_0", "LEG-6", _decode_q8(2), _d, never_negative=("d",), fp16_offsets={"d": 0},
              quantize=_encoder(SIZE["q8_0"], _ref_q8_0), bits=8, group=32),
    # q8_1: the dot-product intermediate, never a weight type in model files (LEG-7)
    BlockType("q8_1", "LEG-7", _decode_q8(4), _dm("s"), never_negative=("d",), fp16_offsets={"d": 0, "s": 2},
              quantize=_encoder(SIZE["q8_1"], _ref_q8_1), informative=True, bits=8, group=32),
)
