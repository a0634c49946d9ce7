"""The legacy 32-weight block types q4_0, q4_1, q5_0, q5_1, q8_0 and q8_1 (spec/ggml_legacy.md, LEG-1 .. LEG-7).

Decoders reproduce ggml ``dequantize_row_q4_0`` .. ``dequantize_row_q8_0`` bit for bit; encoders reproduce
``quantize_q4_0`` .. ``quantize_q8_0`` byte for byte: the reference path (``quantize_row_*_ref``) without an
importance vector, the importance path (``quantize_row_*_impl``) with one. Facts (struct layouts, formulas,
operation order) are from ggml 0.10.1 (llama.cpp sync 3142f1db) ``src/ggml-common.h`` and
``src/ggml-quants.c``; the code is qformats' own, vectorized over blocks.

Float32 discipline (as in ``qformats.formats.ggml.kmachinery_qkx``): every C expression is evaluated with exactly
its float32 rounding steps, in source order, without contraction, each step one NumPy operation on every
block at once. C's in-order float sums stay in order (the K-quant search's row-by-row sums, ``np.add.accumulate``
for a row's sum of squares); its running extrema are exact, so they are reductions, with the few blocks where
the winner of a tie shows in the bits (a zero's sign, +a against -a) redone by the loop's rule. Conversions
from float to a small integer type are modelled as the x86-64 build compiles them (LEG-1.4): truncate to
int32, NaN and out-of-range giving 0x80000000, keep the low byte.

Speed: integer and bit work is done on uint32/uint64 words (several codes a word) and 16-byte items
(NumPy's uint8 shifts and per-block broadcasts over 16-wide views are slow); the reference encoders work on
"stacks" (``_stacked``): the 4-weight groups of every block side by side, so per-block scales repeat over
long contiguous rows instead of broadcasting over 32-wide ones.
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import GGML_TYPES
from .kmachinery_qkx import affine_search, bounded_passes
from .kmachinery_qx import make_qx_quants as _search_qx
from .base import F32, BlockType, fp16_field

__all__ = ["TYPES", "unpack_nibbles", "pack_nibbles", "unpack_fifth_bits", "pack_fifth_bits", "c_int8", "roundf",
           "fp16_bits_ggml", "make_qx_quants"]

QK = 32                 # weights per block, QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK8_1
HALF = QK // 2
_CHUNK = 8192           # blocks per importance-encoder pass: the (32, S) work arrays stay in cache
_REF_CHUNK = 16384      # blocks per reference-encoder pass

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
    step = np.where(np.abs(frac) >= F32(0.5), F32(1), F32(0))
    return t + np.copysign(step, v)              # adding -0 keeps a negative zero's sign, as roundf does


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
    """``GGML_FP32_TO_FP16(v)`` into bytes ``offset``, ``offset + 1`` of every (contiguous) block row."""
    v = np.asarray(v, F32)
    bits = v.astype("<f2").view(np.uint16)
    nan = np.isnan(v)
    if nan.any():
        bits = fp16_bits_ggml(v)
    out[:, offset:offset + 2].view("<u2")[:, 0] = bits


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
    if qs.strides[1] != 1:                                # a column-major input: 16-byte items need contiguous bytes
        qs = np.ascontiguousarray(qs)
    qs = qs.view("V16")                                   # (k, 1): one 16-byte item a block, copied whole
    v = np.empty((qs.shape[0], 2), np.uint64)
    v.view("V16")[...] = qs
    c = np.empty((qs.shape[0], 4), np.uint64)
    wide = c.view("V16")                                  # (k, 2): one 16-byte item per half
    wide[:, :1] = qs
    np.right_shift(v, _U4, out=v)
    wide[:, 1:] = v.view("V16")
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
            np.copyto(y, codes.reshape(y.shape), casting="unsafe")    # the code widens exactly
            # x0*d: one rounding; the block scales repeated per element cost less than NumPy's
            # broadcasting loop over 32 elements (measured, NumPy 2.4)
            np.multiply(y, np.repeat(d[part], QK).reshape(y.shape), out=y)
            if affine:
                np.add(y, np.repeat(m[part], QK).reshape(y.shape), out=y)   # (x0*d) + m
        return out
    return bounded_passes(decode)


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
            y = out[part]
            np.copyto(y, qs[part], casting="unsafe")      # int8 -> float32, exact
            np.multiply(y, d[part], out=y)
        return out
    return bounded_passes(decode)


def _d(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0)}


def _dm(second: str):
    return lambda blk: {"d": fp16_field(blk, 0), second: fp16_field(blk, 2)}


# ---------------------------------------------------------------------------------------------
# block assembly, shared by both encoder paths: d (B,), m (B,) or None, codes (B, 32) integers whose
# low byte is what C stores (uint8 from the reference path, int32 0 .. 2*nmax-1 from the importance path)
# ---------------------------------------------------------------------------------------------


def _code_bytes(q: np.ndarray) -> np.ndarray:
    """The codes' low bytes as a C-contiguous (B, 32) uint8 array (an int -> uint8 cast keeps the low byte)."""
    return np.ascontiguousarray(q if q.dtype == np.uint8 else q.astype(np.uint8))


def _put_nibbles(out: np.ndarray, at: int, q: np.ndarray, mask_low: bool) -> None:
    """``qs[j] = lo | (hi << 4)`` (uint8) with lo = code j (``& 0x0F`` if ``mask_low``), hi = code j + 16,
    8 bytes a uint64 word: the two halves are copied out whole, the shift masked so no bit crosses a byte."""
    w = q.view(np.uint64)                                  # (B, 4): words 0-1 elements 0..15, 2-3 16..31
    halves = w.view("V16")                                 # (B, 2)
    lo = np.empty((q.shape[0], 2), np.uint64)
    hi = np.empty((q.shape[0], 2), np.uint64)
    lo.view("V16")[...] = halves[:, :1]
    hi.view("V16")[...] = halves[:, 1:]
    np.bitwise_and(hi, _LOW4, out=hi)
    np.left_shift(hi, _U4, out=hi)
    if mask_low:
        np.bitwise_and(lo, _LOW4, out=lo)
    np.bitwise_or(lo, hi, out=lo)
    out[:, at:at + HALF].view("V16")[...] = lo.view("V16")


_BIT4 = np.uint64(0x0101010101010101)
_GATHER = np.uint64(0x0102040810204080)     # byte i of the bit-4 word -> bit 56 + i of the product
_U56 = np.uint64(56)


def _put_fifth_bits(out: np.ndarray, at: int, q: np.ndarray) -> None:
    """``qh``: bit e of the little-endian u32 = bit 4 of code e; 8 codes a word gather into one byte."""
    w = np.right_shift(q.view(np.uint64), _U4)
    np.bitwise_and(w, _BIT4, out=w)
    np.multiply(w, _GATHER, out=w)                         # no carries: every partial product is its own bit
    np.right_shift(w, _U56, out=w)
    out[:, at:at + 4] = w


def _assemble_q4_0(d, _m, q):
    out = np.empty((q.shape[0], 2 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_nibbles(out, 2, _code_bytes(q), mask_low=False)
    return out


def _assemble_q5_0(d, _m, q):
    q = _code_bytes(q)
    out = np.empty((q.shape[0], 2 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fifth_bits(out, 2, q)
    _put_nibbles(out, 6, q, mask_low=True)
    return out


def _assemble_q4_1(d, m, q):
    out = np.empty((q.shape[0], 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, m)
    _put_nibbles(out, 4, _code_bytes(q), mask_low=False)
    return out


def _assemble_q5_1(d, m, q):
    q = _code_bytes(q)
    out = np.empty((q.shape[0], 4 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, m)
    _put_fifth_bits(out, 4, q)
    _put_nibbles(out, 8, q, mask_low=True)
    return out


# ---------------------------------------------------------------------------------------------
# reference encoders, quantize_row_*_ref (LEG-2.4 .. LEG-7.3); x is (B, 32) float32
# ---------------------------------------------------------------------------------------------
#
# C's in-order loops over a block keep running extrema; their values are order-free (a maximum is exact),
# only which element wins a tie is not, and a tie only changes the result's bits between +0 and -0 or
# between +a and -a. So the extrema are NumPy reductions, and the few blocks where a tie could matter are
# redone by the element loop's rule. The reductions propagate NaN, which marks the blocks holding one;
# those are redone with fmin/fmax (a NaN never wins a C comparison).
#
# The codes' conversion (int8_t)v is NumPy's float -> int8 cast where every v of the chunk lies strictly
# inside (-129, 128): plain truncation, defined. That holds without looking at v when the chunk holds no
# NaN and every block's scale and inverse scale are finite, since |x| is bounded by the block's extrema
# (|x*id| <= nmax up to a few roundings); any other chunk (NaN, inf, huge, subnormal scales) checks v and,
# where needed, takes c_int8's full model (LEG-1.4).

_FLT_MAX = np.finfo(F32).max


def _trunc_int8(v: np.ndarray, cap: int | None, bounded: bool) -> np.ndarray:
    """``(int8_t)v`` for float32 ``v`` (``MIN(cap, (int8_t)v)`` with ``cap``), as int8 (LEG-1.4).

    Where every v lies in (-129, 128) the cast is plain truncation. ``bounded`` promises that, and more:
    ``0 <= trunc(v) <= cap + 1`` (``cap + 1`` a power of two), so MIN only turns cap + 1 into cap (the
    reference encoders' v lie within a few roundings of [0.5, 2*nmax + 0.5] or [0.5, nmax + 0.5]).
    """
    if bounded:
        q = v.astype(np.int8)
        if cap is not None:                     # here 0 <= trunc(v) <= cap + 1 = 2^k: q - (q >> k), per byte
            u = q.view(np.uint32)               # 4 codes a word: each byte's bit k, no borrows
            top = np.right_shift(u, np.uint32(cap.bit_length()))
            np.bitwise_and(top, np.uint32(0x01010101), out=top)
            np.subtract(u, top, out=u)
        return q
    if v.min() > F32(-129) and v.max() < F32(128):     # NaN fails both tests
        q = v.astype(np.int8)
    else:
        q = c_int8(v).astype(np.int8)
    return q if cap is None else np.minimum(q, np.int8(cap), out=q)


def _finite(*arrays: np.ndarray) -> bool:
    return all(bool(np.isfinite(a).all()) for a in arrays)


def _stacked(x: np.ndarray) -> np.ndarray:
    """(B, 32) float32 -> (8, 4B) float32 with ``g[s, 4b + t] = x[b, 4s + t]``: the 4-weight groups of every
    block stacked by position (one strided copy of 16-byte items). Element-wise work on ``g`` with
    per-block values repeated 4 times runs on long contiguous rows."""
    stacks = np.empty((QK // 4, x.shape[0]), "V16")
    stacks[...] = np.ascontiguousarray(x).view("V16").T
    return stacks.view(x.dtype).reshape(QK // 4, x.shape[0] * 4)


def _stack_reduce(g: np.ndarray, f) -> np.ndarray:
    """Per-block ``f.reduce`` over the 32 weights, from the stacks, for order-free ``f`` (maximum, minimum):
    element-wise halvings across the stacks, then the 4 lanes of each block pairwise."""
    r = f(g[:4], g[4:])
    f(r[:2], r[2:], out=r[:2])
    r = f(r[0], r[1])
    for _ in range(2):
        r = f(r[0::2], r[1::2])
    return r


def _block_reduce(x: np.ndarray, *ufuncs) -> list[np.ndarray]:
    """Per-block ``ufunc.reduce`` over the 32 weights of (B, 32) float32 ``x`` (order-free ufuncs)."""
    g = _stacked(x)
    return [_stack_reduce(g, f) for f in ufuncs]


def _first_equal(x: np.ndarray, rows: np.ndarray, value: np.ndarray) -> np.ndarray:
    """For each row in ``rows``, the first x[row, j] with ``x == value``."""
    sub = x[rows]
    return sub[np.arange(rows.size), (sub == value[:, None]).argmax(axis=1)]


def _extrema(x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Each block's largest and smallest non-NaN weight (NaN where all are NaN), and whether no NaN
    was seen; ``g`` is ``_stacked(x)``."""
    top, bottom = _stack_reduce(g, np.maximum), _stack_reduce(g, np.minimum)
    nan = np.flatnonzero(np.isnan(top))         # maximum/minimum propagate NaN: the blocks holding one
    if nan.size:
        sub = x[nan]
        top[nan] = np.fmax.reduce(sub, axis=1)
        bottom[nan] = np.fmin.reduce(sub, axis=1)
    return top, bottom, nan.size == 0


def _signed_absmax(x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, bool]:
    """``amax = 0; max = 0; for j: if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }`` -> max,
    and whether the chunk is free of NaN."""
    top, bottom, clean = _extrema(x, g)
    neg = -bottom
    mx = np.where(neg > top, bottom, top)       # the one of larger magnitude
    amax = np.fmax(top, neg)
    mx[~(amax > 0)] = 0                         # no |x[j]| above +0: max stays +0 (all NaN included)
    tie = np.flatnonzero((neg == top) & (amax > 0))
    if tie.size:                                # +a and -a both present: the first one wins
        sub = x[tie]
        mx[tie] = sub[np.arange(tie.size), (np.abs(sub) == amax[tie, None]).argmax(axis=1)]
    return mx, clean


def _min_max(x: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``min = FLT_MAX; max = -FLT_MAX; for j: if (v < min) min = v; if (v > max) max = v;``, and whether
    the chunk is free of NaN."""
    mx, mn, clean = _extrema(x, g)
    if not clean:
        np.fmin(mn, _FLT_MAX, out=mn)           # the starting values: what all-NaN blocks keep
        np.fmax(mx, -_FLT_MAX, out=mx)
    for v in (mn, mx):                          # a zero extremum: the first zero's sign
        z = np.flatnonzero(v == 0)
        if z.size:
            v[z] = _first_equal(x, z, v[z])
    return mn, mx, clean


def _per_lane(v: np.ndarray) -> np.ndarray:
    """A per-block (B,) value repeated for the 4 lanes of each stack row: (1, 4B)."""
    return np.repeat(v, 4)[None, :]


def _ref_symmetric(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """q4_0 (nmax 8) / q5_0 (nmax 16): ``d = max / -nmax``; code ``MIN(2nmax-1, (int8_t)(x*id + nmax+0.5f))``
    as a uint8 (a negative int8 wraps). Returns (d, codes (8, 4B) uint8 in the stacked layout)."""
    g = _stacked(x)
    mx, clean = _signed_absmax(x, g)
    d = mx / F32(-nmax)
    idv = _inverse(d)
    np.multiply(g, _per_lane(idv), out=g)
    np.add(g, F32(nmax + 0.5), out=g)
    return d, _trunc_int8(g, 2 * nmax - 1, clean and _finite(mx, idv)).view(np.uint8)


def _ref_affine(x: np.ndarray, nmax: int, cap: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q4_1 (nmax 15) / q5_1 (nmax 31): ``d = (max - min) / nmax``; codes ``(int8_t)((x - min)*id + 0.5f)``.
    Returns (d, min, codes (8, 4B) uint8 in the stacked layout)."""
    g = _stacked(x)
    mn, mx, clean = _min_max(x, g)
    d = (mx - mn) / F32(nmax)
    idv = _inverse(d)
    np.subtract(g, _per_lane(mn), out=g)
    np.multiply(g, _per_lane(idv), out=g)
    np.add(g, F32(0.5), out=g)
    return d, mn, _trunc_int8(g, cap, clean and _finite(mn, d, idv)).view(np.uint8)


def _stacked_nibbles(out: np.ndarray, at: int, c: np.ndarray, mask_low: bool) -> None:
    """qs from stacked codes (8, 4B) uint8: ``qs[j] = lo | (hi << 4)``, code j (stack j // 4) low and code
    j + 16 (stack j // 4 + 4) high; 4 bytes of qs a stack row, written as uint32 items."""
    c = c.view(np.uint32)                       # 4 codes a word (NumPy's uint8 shifts are slow)
    words = np.left_shift(c[4:], np.uint32(4))
    np.bitwise_and(words, np.uint32(0xF0F0F0F0), out=words)
    np.bitwise_or(words, np.bitwise_and(c[:4], np.uint32(0x0F0F0F0F)) if mask_low else c[:4], out=words)
    qs = out[:, at:at + HALF].view(np.uint32)
    for s in range(4):                          # one long strided copy a stack row (not B short ones)
        qs[:, s] = words[s]


def _stacked_fifth_bits(out: np.ndarray, at: int, c: np.ndarray) -> None:
    """qh from stacked codes: bit e = bit 4 of code e; stack s holds codes 4s .. 4s+3, one uint32 each."""
    w = np.right_shift(c.view(np.uint32), np.uint32(4))          # (8, B)
    np.bitwise_and(w, np.uint32(0x01010101), out=w)
    np.multiply(w, np.uint32(0x01020408), out=w)                 # byte t's bit -> bit 24 + t, no carries
    np.right_shift(w, np.uint32(24), out=w)
    qh = w[0].copy()
    for s in range(1, QK // 4):
        np.bitwise_or(qh, np.left_shift(w[s], np.uint32(4 * s)), out=qh)
    out[:, at:at + 4].view(np.uint32)[:, 0] = qh


def _ref_q4_0(x: np.ndarray) -> np.ndarray:
    d, c = _ref_symmetric(x, 8)
    out = np.empty((x.shape[0], 2 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _stacked_nibbles(out, 2, c, mask_low=False)
    return out


def _ref_q5_0(x: np.ndarray) -> np.ndarray:
    d, c = _ref_symmetric(x, 16)
    out = np.empty((x.shape[0], 2 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _stacked_fifth_bits(out, 2, c)
    _stacked_nibbles(out, 6, c, mask_low=True)
    return out


def _ref_q4_1(x: np.ndarray) -> np.ndarray:
    d, mn, c = _ref_affine(x, 15, 15)                             # uint8_t xi = MIN(15, (int8_t)(...))
    out = np.empty((x.shape[0], 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, mn)
    _stacked_nibbles(out, 4, c, mask_low=False)
    return out


def _ref_q5_1(x: np.ndarray) -> np.ndarray:
    d, mn, c = _ref_affine(x, 31, None)                           # uint8_t xi = (uint8_t)(...): no MIN here
    out = np.empty((x.shape[0], 4 + 4 + HALF), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, mn)
    _stacked_fifth_bits(out, 4, c)
    _stacked_nibbles(out, 8, c, mask_low=True)
    return out


_HALF_DOWN = np.nextafter(F32(0.5), F32(0))    # 0.49999997f


def _q8_scale(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``amax = 0; for j: amax = MAX(amax, fabsf(x[j]))`` (``MAX(a, b) = a > b ? a : b``: a NaN ``|x[j]|``
    replaces amax, and the next element replaces the NaN); ``d = amax / 127``; codes ``roundf(x*id)``.
    Returns (d, codes (B, 32) int8)."""
    amax, = _block_reduce(np.abs(x), np.maximum)  # NaN-free blocks: the running MAX is the maximum
    nan = np.flatnonzero(np.isnan(amax))
    if nan.size:                                # a NaN restarts the running MAX: the C loop, on those blocks
        a = np.abs(x[nan])
        run = np.zeros(nan.size, F32)
        for j in range(QK):
            aj = a[:, j]
            run = np.where(run > aj, run, aj)
        amax[nan] = run
    d = amax / F32(127)
    idv = _inverse(d)
    v = x * idv[:, None]
    # |v| <= 127 up to roundings where nothing is NaN and amax, id are finite; else look
    if (nan.size == 0 and _finite(amax, idv)) or (v.min() > F32(-128) and v.max() < F32(127.5)):
        # roundf(v) = trunc(v + copysign(0.49999997f, v)) for |v| < 2^23: the sum rounds to at most
        # the next integer exactly when |frac(v)| >= 0.5 (0.49999997 itself stays below 1)
        h = np.bitwise_and(v.view(np.uint32), np.uint32(0x80000000))      # copysign(0.49999997f, v)
        np.bitwise_or(h, _HALF_DOWN.view(np.uint32), out=h)
        np.add(v, h.view(F32), out=v)
        return d, v.astype(np.int8)
    return d, c_int8(roundf(v)).astype(np.int8)


def _ref_q8_0(x: np.ndarray) -> np.ndarray:
    d, q = _q8_scale(x)
    out = np.empty((x.shape[0], 2 + QK), np.uint8)
    _put_fp16(out, 0, d)
    out[:, 2:].view("V32")[...] = q.view("V32")
    return out


def _ref_q8_1(x: np.ndarray) -> np.ndarray:
    d, q = _q8_scale(x)
    s = q.sum(axis=1, dtype=np.int32).astype(F32) * d     # int sum (exact), then (float)sum * d
    out = np.empty((x.shape[0], 4 + QK), np.uint8)
    _put_fp16(out, 0, d)
    _put_fp16(out, 2, s)
    out[:, 4:].view("V32")[...] = q.view("V32")
    return out


# ---------------------------------------------------------------------------------------------
# importance encoders, quantize_row_*_impl (LEG-1.5, LEG-2.5 .. LEG-5.5)
# ---------------------------------------------------------------------------------------------


def make_qx_quants(x: np.ndarray, w: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_qx_quants(32, nmax, x, L, rmse_type = 1, qw = w)`` on (32, S) columns (LEG-1.5).

    Returns ``(scale (S,), L (32, S) int32 codes in 0 .. 2*nmax-1)``. The search is the K-quants' one
    (``kmachinery_qx.make_qx_quants``, the same C function): its 19 trials run side by side, each sum
    accumulated in C's order over the 32 weights.
    """
    with np.errstate(all="ignore"):
        return _search_qx(x, nmax, w)


def _transposed(a: np.ndarray) -> np.ndarray:
    """(B, 32) -> its (32, B) transpose, C-contiguous. float32 goes in two strided copies (16-byte groups of
    four weights, then the four within each group), cheaper than one element-wise transposing copy."""
    if a.dtype != F32:
        return np.ascontiguousarray(a.T)
    b = a.shape[0]
    groups = np.empty((QK // 4, b), "V16")
    groups[...] = np.ascontiguousarray(a).view("V16").T
    out = np.empty((QK // 4, 4, b), F32)
    out[...] = groups.view(F32).reshape(QK // 4, b, 4).transpose(0, 2, 1)
    return out.reshape(QK, b)


def _row_weights(x: np.ndarray, qw: np.ndarray) -> np.ndarray:
    """``sigma2 = sum_x2 / n`` over each whole row (in order), then ``qw[j] * sqrtf(sigma2 + x[j]*x[j])``.

    ``x``: (rows, n) float32; ``qw``: (n,) float32. Returns (rows, n) float32. ``sum_x2 += x[j]*x[j]``
    is ``np.add.accumulate``: sequential by definition (r[j] = r[j-1] + t[j]), C's order and roundings.
    """
    n = x.shape[1]
    x2 = x * x
    sum_x2 = np.add.accumulate(x2, axis=1, dtype=F32)[:, -1]
    sigma2 = (sum_x2 / F32(n))[:, None]
    np.add(x2, sigma2, out=x2)
    np.sqrt(x2, out=x2)
    return np.multiply(x2, qw[None, :], out=x2)


def _codes_by_block(L: np.ndarray) -> np.ndarray:
    """(32, S) integer codes 0..255 (int or exact float) -> (S, 32) uint8."""
    return _transposed(L.astype(np.uint8))


def _impl_symmetric(nmax: int, assemble):
    """q4_0 / q5_0 ``_impl``: ``d = make_qx_quants(32, nmax, ...)``; codes are the search's L, not requantized."""
    def encode(xc: np.ndarray, wc: np.ndarray) -> np.ndarray:     # (32, S) columns
        d, L = _search_qx(xc, nmax, wc)
        return assemble(d, None, _codes_by_block(L))
    return encode


def _impl_affine(nmax: int, assemble):
    """q4_1 / q5_1 ``_impl``: ``make_qkx3_quants(32, nmax, x, w, L, &min, Laux, -0.9f, 0.05f, 36, false)``;
    ``d = fp16(scale)``, ``m = fp16(-the_min)``."""
    def encode(xc: np.ndarray, wc: np.ndarray) -> np.ndarray:
        scale, the_min, L = affine_search(xc, wc, nmax=nmax, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
        return assemble(scale, -the_min, _codes_by_block(L))
    return encode


# ---------------------------------------------------------------------------------------------
# row-level encoders (the BlockType.quantize contract)
# ---------------------------------------------------------------------------------------------


def _chunked(nblocks: int, size: int, encode, chunk: int) -> np.ndarray:
    if nblocks <= chunk:
        return encode(slice(0, nblocks))
    out = np.empty((nblocks, size), np.uint8)
    for start in range(0, nblocks, chunk):
        part = slice(start, min(start + chunk, nblocks))
        out[part] = encode(part)
    return out


def _encoder(size: int, ref, impl=None):
    """``quantize_<type>(x, y, rows, n, importance)``: without importance the reference path on the input as
    one flat sequence of blocks; with it the importance path, row by row with the same vector."""
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        xb = x.reshape(-1, QK)
        if importance is None:
            out = _chunked(xb.shape[0], size, lambda part: ref(xb[part]), _REF_CHUNK)
        else:
            wb = _row_weights(x, importance).reshape(-1, QK)
            out = _chunked(xb.shape[0], size, lambda part: impl(_transposed(xb[part]), _transposed(wb[part])),
                           _CHUNK)
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
