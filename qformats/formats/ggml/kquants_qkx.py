"""K-quants with an affine search: q2_K and q5_K, and q8_K (informative) (spec/ggml_kquants.md KQ-2, KQ-5, KQ-7).

q2_K and q5_K are q4_K's siblings: ``y = d*sc*q - dmin*m`` per sub-block, codes found by ggml's
affine search (``make_qkx2_quants`` on the reference path, ``make_qkx3_quants`` + ``make_qp_quants``
on the importance path), then requantized against the stored scales. The machinery is q4_K's
(spec Q4K-1.4, Q4K-4.2, Q4K-4.6), written once in ``kmachinery_qkx`` for the three of them; what q4_K
hardcodes (15 as the code maximum, 144-byte blocks, squared error) is generalised here.

Same float32 discipline as q4_K: one sub-block per column of a ``(rows_in_sub_block, S)`` float32
array, every C expression evaluated with exactly its float32 rounding steps, in-order loops where C
loops (``seq_sum``), divisions stay divisions, no fused multiply-add.

Facts (layouts, formulas, parameters) are from ggml 0.10.1 (llama.cpp sync ``3142f1db``),
``src/ggml-common.h`` (``block_q2_K``, ``block_q5_K``, ``block_q8_K``) and ``src/ggml-quants.c``
(``quantize_row_q2_K_ref``, ``quantize_row_q2_K_impl``, ``dequantize_row_q2_K``,
``quantize_row_q5_K_ref``, ``quantize_row_q5_K_impl``, ``dequantize_row_q5_K``,
``quantize_row_q8_K_ref``, ``dequantize_row_q8_K``).
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import QK_K
from ...numerics import nearest_int
from .base import F32, BlockType, fp16_field
from .kmachinery_qkx import (DECODE_BLOCKS, affine_decode, affine_search, block_field, bounded_passes, clamp_codes,
                             make_qp_quants, pack_codes, pack_scales, running_max, scaled as _scaled, seq_sum,
                             six_bit_ref_codes, six_bit_scales, sub_block_columns, unpack_codes, unpack_scales)

__all__ = ["TYPES", "q2k_unpack_codes", "q2k_pack_codes", "q5k_unpack_codes",
           "q5k_pack_codes", "Q2K_BYTES", "Q5K_BYTES", "Q8K_BYTES"]

_CHUNK_BLOCKS = 512     # super-blocks per encoder pass: the (rows, S) work arrays stay in cache

# ---------------------------------------------------------------------------------------------
# q2_K (KQ-2): 16 sub-blocks of 16 weights, 4-bit scale and min each, 2-bit codes
# ---------------------------------------------------------------------------------------------
#
#   offset  size  field
#   0       16    scales  u8[16]  byte j = sc[j] | m[j] << 4       (sc low nibble, m high nibble)
#   16      64    qs      u8[64]  2-bit codes, see below
#   80      2     d       fp16    super-block scale of the sc[j]
#   82      2     dmin    fp16    super-block scale of the m[j]
#
# qs: half h = 0..1 of 128 weights uses qs[32h .. 32h+31]; bit pair 2k of byte 32h + l holds weight
# 128h + 32k + l (k = 0..3, l = 0..31):
#
#   qs[32h + l] = [q(128h+96+l)][q(128h+64+l)][q(128h+32+l)][q(128h+l)]      bits 7:6 5:4 3:2 1:0
#
# so sub-block j (weights 16j .. 16j+15) is weight // 16, whatever the byte it came from.

Q2K_SCALES, Q2K_QS, Q2K_D, Q2K_DMIN = 0, QK_K // 16, QK_K // 16 + QK_K // 4, QK_K // 16 + QK_K // 4 + 2
Q2K_BYTES = Q2K_DMIN + 2
assert Q2K_BYTES == 84    # noqa: S101 - static_assert(sizeof(block_q2_K) == 2*2 + QK_K/16 + QK_K/4)
_SHIFT2 = np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)


def q2k_unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(nb, 64) uint8 -> (nb, 256) uint8 codes 0..3 in weight order (KQ-2.1)."""
    q = qs.reshape(-1, 2, 1, 32)
    return ((q >> _SHIFT2) & 3).reshape(-1, QK_K)


def q2k_pack_codes(codes: np.ndarray) -> np.ndarray:
    """(nb, 256) codes 0..3 in weight order -> (nb, 64) uint8 in ggml's bit-pair order."""
    c = codes.astype(np.uint8).reshape(-1, 2, 4, 32)
    return (c[:, :, 0] | (c[:, :, 1] << 2) | (c[:, :, 2] << 4) | (c[:, :, 3] << 6)).reshape(-1, QK_K // 4)


# (256,) per weight (h, k, l) of a block: x & _Q2K_MASK keeps bit pair 2k of its byte, i.e. 4^k q;
# (16,) per sub-block 8h + 2k + l // 16: the 4^-k that _q2k_decode folds into d * sc
_Q2K_MASK = np.tile(np.repeat((3 << 2 * np.arange(4)).astype(np.uint8), 32), 2)
_Q2K_UNSHIFT = np.tile(np.repeat(F32(4.0) ** -np.arange(4, dtype=F32), 2), (DECODE_BLOCKS, 2))   # one pass


@bounded_passes
def _q2k_decode(blk: np.ndarray) -> np.ndarray:
    """``dequantize_row_q2_K``: ``y = (d * (s & 15)) * q - dmin * (s >> 4)`` (KQ-2.2).

    ``d * sc`` and ``(d * sc) * q`` are exact (11 x 4 x 2 bits), so the only rounding is the
    subtraction (``affine_decode``, shared with q4_K and q5_K): the codes are unpacked with uint8
    operations on a copy of each 32-byte run per bit pair.
    A code is left in place as ``4^k q`` (one mask) against ``(d * sc) * 4^-k``: powers of two, and
    ``d * sc`` is 0 or at least 2^-24, so ``((d * sc) * 4^-k) * (4^k q)`` is the same exact product,
    infinities and NaNs included.
    """
    def scales(part: slice) -> tuple[np.ndarray, np.ndarray]:
        dm = block_field(blk[part], Q2K_D, 4).view("<f2").astype(F32)        # (B, 2): d, dmin
        s = block_field(blk[part], Q2K_SCALES, QK_K // 16)
        return _scaled(s & 15, dm[:, 0]), _scaled(s >> 4, dm[:, 1])          # exact: 11 x 4 bits

    def codes(part: slice, dl: np.ndarray) -> np.ndarray:
        dl *= _Q2K_UNSHIFT[:dl.shape[0]]                                    # exact: powers of two
        qs = blk[part, Q2K_QS:Q2K_D].reshape(-1, 2, 1, 32)
        code = np.repeat(qs, 4, axis=2).reshape(-1, QK_K)                    # (B, 256): weight's byte
        return np.bitwise_and(code, _Q2K_MASK, out=code)                     # its bit pair: 4^k q

    return affine_decode(blk.shape[0], scales, codes)


def _q2k_scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, Q2K_D), "dmin": fp16_field(blk, Q2K_DMIN)}


def _requantize(x: np.ndarray, L: np.ndarray, dj: np.ndarray, mj: np.ndarray, nmax: int) -> np.ndarray:
    """Codes against the stored scales: ``clamp(nearest_int((x + mj) / dj), 0, nmax)``; a sub-block
    with ``dj == 0`` keeps its search codes (C: ``if (!d) continue;``). ``x``, ``L``: (n, S); ``dj``, ``mj``: (S,)."""
    return np.where(dj == 0, L, clamp_codes((x + mj) / dj, nmax))


def _q2k_finish(x, L, sc_byte, d, dmin) -> np.ndarray:
    """(B, 84) blocks from (16, B*16) inputs and search codes, (B, 16) int scale bytes and (B,) d, dmin."""
    nblk = sc_byte.shape[0]
    byte = (sc_byte & 0xFF).astype(np.uint8)                        # the uint8 store
    d16, dmin16 = d.astype("<f2"), dmin.astype("<f2")
    dj = (d16.astype(F32)[:, None] * (byte & 15).astype(F32)).reshape(-1)
    mj = (dmin16.astype(F32)[:, None] * (byte >> 4).astype(F32)).reshape(-1)
    codes = _requantize(x, L, dj, mj, 3).T.reshape(nblk, QK_K)
    out = np.empty((nblk, Q2K_BYTES), np.uint8)
    out[:, Q2K_SCALES:Q2K_QS] = byte
    out[:, Q2K_QS:Q2K_D] = q2k_pack_codes(codes)
    out[:, Q2K_D:Q2K_DMIN] = d16.reshape(-1, 1).view(np.uint8)
    out[:, Q2K_DMIN:] = dmin16.reshape(-1, 1).view(np.uint8)
    return out


def _q2k_ref_chunk(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q2_K_ref`` on (B, 256) float32 (KQ-2.4)."""
    x = sub_block_columns(xb, 16)
    scales, mins, L = affine_search(x, np.abs(x), nmax=3, rmin=-0.5, rdelta=0.1, nstep=15, degenerate_le=False,
                                    mad=True)
    scales, mins = scales.reshape(-1, 16), mins.reshape(-1, 16)
    max_scale, max_min = running_max(scales), running_max(mins)
    has_scale, has_min = (max_scale > 0)[:, None], (max_min > 0)[:, None]
    q4scale = F32(15)
    ls = np.where(has_scale, nearest_int((q4scale / max_scale)[:, None] * scales), 0)
    lm = np.where(has_min, nearest_int((q4scale / max_min)[:, None] * mins), 0)
    d = np.where(has_scale[:, 0], max_scale / q4scale, F32(0))
    dmin = np.where(has_min[:, 0], max_min / q4scale, F32(0))
    return _q2k_finish(x, L, (ls & 0xFF) | (lm << 4), d, dmin)   # `scales[j] = l; scales[j] |= (l << 4)`


def _q2k_impl_chunk(xb: np.ndarray, qwb: np.ndarray) -> np.ndarray:
    """``quantize_row_q2_K_impl`` on (B, 256) inputs with their (B, 256) importance (KQ-2.5)."""
    x, qw = sub_block_columns(xb, 16), sub_block_columns(qwb, 16)
    xt = np.ascontiguousarray(xb.T)
    sigma2 = seq_sum(xt * xt) / F32(QK_K)                                  # no factor 2, unlike q4_K/q5_K
    w = qw * np.sqrt(np.repeat(sigma2, 16) + x * x)
    sw = seq_sum(w)
    scales, mins, L = affine_search(x, w, nmax=3, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
    sw_t = sw.reshape(-1, 16).T
    dm, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(-1, 16).T), sw_t, nmax=15)
    mm, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(-1, 16).T), sw_t, nmax=15)
    return _q2k_finish(x, L, ls.T | (lm.T << 4), dm, mm)                   # `Ls[j] | (Lm[j] << 4)`, no clamp


# ---------------------------------------------------------------------------------------------
# q5_K (KQ-5): q4_K's layout plus one high bit per code
# ---------------------------------------------------------------------------------------------
#
#   offset  size  field
#   0       2     d       fp16
#   2       2     dmin    fp16
#   4       12    scales  8 x (6-bit sc, 6-bit m), packed as q4_K's (Q4K-1.4, KQ-1.5)
#   16      32    qh      bit j of qh[l] = bit 4 of the code of weight 32j + l       (j = 0..7)
#   48      128   qs      low 4 bits, in q4_K's order (Q4K-1.5): qs[32c + l] = lo(64c+l) | lo(64c+32+l) << 4

Q5K_D, Q5K_DMIN, Q5K_SCALES, Q5K_QH = 0, 2, 4, 4 + 12
Q5K_QS = Q5K_QH + QK_K // 8
Q5K_BYTES = Q5K_QS + QK_K // 2
assert Q5K_BYTES == 176    # noqa: S101 - static_assert(sizeof(block_q5_K) == 2*2 + K_SCALE_SIZE + QK_K/2 + QK_K/8)
_BIT = np.arange(8, dtype=np.uint8).reshape(1, 8, 1)


def q5k_unpack_codes(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """(nb, 32) qh and (nb, 128) qs -> (nb, 256) uint8 codes 0..31 in weight order (KQ-5.1)."""
    hi = (qh[:, None, :] >> _BIT) & 1                                       # (nb, sub-block j, l)
    return unpack_codes(qs) | (hi.reshape(-1, QK_K) << 4)


def q5k_pack_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nb, 256) codes 0..31 -> ((nb, 32) qh, (nb, 128) qs)."""
    c = codes.astype(np.uint8)
    hi = ((c >> 4) & 1).reshape(-1, 8, 32)
    qh = np.packbits(hi, axis=1, bitorder="little").reshape(-1, 32)      # sub-block j -> bit j
    return qh, pack_codes(c & 15)


# (256,) per weight: sub-block j = w // 32 takes the low nibble (j even: x * 16 keeps it, as bits 7:4)
# or the high nibble (j odd: x * 1) of its byte, and bit j of its qh byte (x * 2^(7-j): bit j to bit 7)
_Q5K_NIB = np.tile(np.repeat(np.array([16, 1], np.uint8), 32), 4)
_Q5K_BIT = np.repeat((1 << (7 - np.arange(8))).astype(np.uint8), 32)


@bounded_passes
def _q5k_decode(blk: np.ndarray) -> np.ndarray:
    """``dequantize_row_q5_K``: ``y = (d * sc) * q - dmin * m`` with 5-bit q (KQ-5.2).

    ``(d * sc) * q`` is exact (11 x 6 x 5 bits): one rounding, the subtraction, in q4_K's decode tail
    (``affine_decode``) on q4_K's scale unpacking.
    """
    def codes(part: slice, _dj: np.ndarray) -> np.ndarray:
        qs = blk[part, Q5K_QS:].reshape(-1, 4, 1, 32)
        code = np.repeat(qs, 2, axis=2).reshape(-1, QK_K)                    # (B, 256): weight's qs byte
        np.multiply(code, _Q5K_NIB, out=code)
        np.right_shift(code, 4, out=code)                                    # its nibble
        qh = blk[part, Q5K_QH:Q5K_QS].reshape(-1, 1, 32)
        high = np.repeat(qh, 8, axis=1).reshape(-1, QK_K)                    # weight's qh byte
        np.multiply(high, _Q5K_BIT, out=high)
        np.bitwise_and(high, 0x80, out=high)
        np.right_shift(high, 3, out=high)                                    # its bit j as 16
        return np.bitwise_or(code, high, out=code)

    return affine_decode(blk.shape[0], lambda part: six_bit_scales(block_field(blk[part], Q5K_D, Q5K_QH)), codes)


def _q5k_scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, Q5K_D), "dmin": fp16_field(blk, Q5K_DMIN)}


def _q5k_finish(x, L, ls, lm, d, dmin) -> np.ndarray:
    """(B, 176) blocks from (32, B*8) inputs and search codes, (B, 8) 6-bit ls/lm and (B,) d, dmin."""
    nblk = ls.shape[0]
    packed = pack_scales(ls, lm)
    d16, dmin16 = d.astype("<f2"), dmin.astype("<f2")
    sc, m = unpack_scales(packed)                                          # requantize against what is stored
    dj = (d16.astype(F32)[:, None] * sc.astype(F32)).reshape(-1)
    mj = (dmin16.astype(F32)[:, None] * m.astype(F32)).reshape(-1)
    codes = _requantize(x, L, dj, mj, 31).T.reshape(nblk, QK_K)
    out = np.empty((nblk, Q5K_BYTES), np.uint8)
    out[:, Q5K_D:Q5K_DMIN] = d16.reshape(-1, 1).view(np.uint8)
    out[:, Q5K_DMIN:Q5K_SCALES] = dmin16.reshape(-1, 1).view(np.uint8)
    out[:, Q5K_SCALES:Q5K_QH] = packed
    out[:, Q5K_QH:Q5K_QS], out[:, Q5K_QS:] = q5k_pack_codes(codes)
    return out


def _q5k_ref_chunk(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q5_K_ref`` on (B, 256) float32 (KQ-5.4)."""
    x = sub_block_columns(xb, 32)
    av_x = np.sqrt(seq_sum(x * x) / F32(32))
    scales, mins, L = affine_search(x, av_x + np.abs(x), nmax=31, rmin=-0.5, rdelta=0.1, nstep=15,
                                    degenerate_le=False)
    return _q5k_finish(x, L, *six_bit_ref_codes(scales.reshape(-1, 8), mins.reshape(-1, 8)))


def _q5k_impl_chunk(xb: np.ndarray, qwb: np.ndarray) -> np.ndarray:
    """``quantize_row_q5_K_impl`` on (B, 256) inputs with their (B, 256) importance (KQ-5.5)."""
    x, qw = sub_block_columns(xb, 32), sub_block_columns(qwb, 32)
    xt = np.ascontiguousarray(xb.T)
    sigma2 = (F32(2) * seq_sum(xt * xt)) / F32(QK_K)
    w = qw * np.sqrt(np.repeat(sigma2, 8) + x * x)
    sw = seq_sum(w)
    scales, mins, L = affine_search(x, w, nmax=31, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
    sw_t = sw.reshape(-1, 8).T
    d_block, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(-1, 8).T), sw_t, nmax=63)
    m_block, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(-1, 8).T), sw_t, nmax=63)
    # q5_K clamps `MIN(63, Ls[j])` here; q4_K's _impl does not (Q4K-4.6)
    return _q5k_finish(x, L, np.minimum(63, ls.T), np.minimum(63, lm.T), d_block, m_block)


# ---------------------------------------------------------------------------------------------
# q8_K (KQ-7, informative): the activation type of the K-quant dot products
# ---------------------------------------------------------------------------------------------
#
#   offset  size  field
#   0       4     d       fp32 LE
#   4       256   qs      int8[256]
#   260     32    bsums   int16[16] LE, bsums[j] = sum of qs[16j .. 16j+15]

Q8K_D, Q8K_QS, Q8K_BSUMS = 0, 4, 4 + QK_K
Q8K_BYTES = Q8K_BSUMS + QK_K // 16 * 2
assert Q8K_BYTES == 292    # noqa: S101 - static_assert(sizeof(block_q8_K) == 4 + QK_K + QK_K/16*2)


def _q8k_d(blk: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(blk[:, Q8K_D:Q8K_QS]).view("<f4").astype(F32)   # (nb, 1)


def _q8k_decode(blk: np.ndarray) -> np.ndarray:
    """``dequantize_row_q8_K``: ``y = d * qs`` (KQ-7.2)."""
    qs = np.ascontiguousarray(blk[:, Q8K_QS:Q8K_BSUMS]).view(np.int8)
    out = qs.astype(F32)
    np.multiply(out, _q8k_d(blk), out=out)
    return out


def _q8k_scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": _q8k_d(blk)}


def _q8k_chunk(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q8_K_ref`` on (B, 256) float32 (KQ-7.3)."""
    # `if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }` from amax = 0: the first element of
    # largest magnitude wins; a NaN never does (as |x| it compares like 0, which cannot beat amax >= 0).
    ax = np.abs(xb)
    ax[np.isnan(ax)] = 0
    first = np.argmax(ax, axis=1)[:, None]
    amax = np.take_along_axis(ax, first, axis=1)[:, 0]
    mx = np.take_along_axis(xb, first, axis=1)[:, 0]
    zero = amax == 0
    iscale = F32(-127) / np.where(zero, F32(1), mx)
    v = nearest_int(iscale[:, None] * xb)
    qs = np.minimum(v, 127, out=v).astype(np.uint8)                          # int8 store of MIN(127, v): mod 256
    qs[zero] = 0
    # C sums the 16 int8 codes in an int; in float32 every partial sum is an integer below 2^11, so exact in
    # any order, and a matrix-vector product is ten times faster than a 16-wide integer reduction
    bsums = qs.view(np.int8).astype(F32).reshape(-1, 16) @ np.ones(16, F32)
    out = np.empty((xb.shape[0], Q8K_BYTES), np.uint8)
    out[:, Q8K_D:Q8K_QS] = np.where(zero, F32(0), F32(1) / iscale).astype("<f4").reshape(-1, 1).view(np.uint8)
    out[:, Q8K_QS:Q8K_BSUMS] = qs
    # an all-zero block: ggml writes d = 0 and qs = 0 and leaves bsums as they were; qformats writes 0
    out[:, Q8K_BSUMS:] = bsums.astype("<i2").reshape(-1, 16).view(np.uint8)
    return out


# ---------------------------------------------------------------------------------------------
# row-level encoders
# ---------------------------------------------------------------------------------------------


def _chunks(xb: np.ndarray, type_size: int, encode) -> np.ndarray:
    """``(len(xb), type_size)`` blocks from ``encode(slice)`` run on cache-sized slices of super-blocks."""
    out = np.empty((xb.shape[0], type_size), np.uint8)
    for start in range(0, xb.shape[0], _CHUNK_BLOCKS):
        part = slice(start, start + _CHUNK_BLOCKS)
        out[part] = encode(part)
    return out


def _encoder(type_size: int, ref_chunk, impl_chunk=None):
    """``quantize(x, importance)`` of one type: the reference path treats the rows as one run of
    super-blocks; the importance path gives super-block ``i`` of a row the weights ``w[256i .. 256i+255]``."""
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        xb = x.reshape(-1, QK_K)
        if importance is None:
            out = _chunks(xb, type_size, lambda part: ref_chunk(xb[part]))
        else:
            qw = importance.reshape(-1, QK_K)
            per_row = qw.shape[0]
            out = _chunks(xb, type_size, lambda part: impl_chunk(
                xb[part], qw[np.arange(part.start, min(part.stop, xb.shape[0])) % per_row]))
        return out.reshape(rows, n // QK_K * type_size)
    return quantize


# d, dmin: the reference paths divide maxima that start at 0; make_qp_quants returns sumlx / suml2 >= 0
# or 0 for a non-negative importance vector (KQ-2.3, KQ-5.3). q8_K's d = -max/127 takes either sign.
TYPES = (
    BlockType("q2_k", "KQ-2", _q2k_decode, _q2k_scales, never_negative=("d", "dmin"),
              fp16_offsets={"d": Q2K_D, "dmin": Q2K_DMIN},
              quantize=_encoder(Q2K_BYTES, _q2k_ref_chunk, _q2k_impl_chunk), importance=True, bits=2, group=16),
    BlockType("q5_k", "KQ-5", _q5k_decode, _q5k_scales, never_negative=("d", "dmin"),
              fp16_offsets={"d": Q5K_D, "dmin": Q5K_DMIN},
              quantize=_encoder(Q5K_BYTES, _q5k_ref_chunk, _q5k_impl_chunk), importance=True, bits=5, group=32),
    BlockType("q8_k", "KQ-7", _q8k_decode, _q8k_scales, quantize=_encoder(Q8K_BYTES, _q8k_chunk), informative=True, bits=8, group=256),
)
