"""q3_K and q6_K: the symmetric K-quants (spec/ggml_kquants.md KQ-3, KQ-6).

Both are 256-weight super-blocks of 16 sub-blocks of 16 weights, ``y = d * sc[j] * q`` with a signed
code ``q`` and a signed sub-block scale ``sc[j]``, one float16 super-scale ``d`` stored LAST.
Facts (struct layouts, formulas, operation order) are from ggml 0.10.1 ``src/ggml-common.h``
(``block_q3_K``, ``block_q6_K``) and ``src/ggml-quants.c`` (``dequantize_row_q3_K``,
``quantize_row_q3_K_ref``, ``quantize_row_q3_K_impl``, ``dequantize_row_q6_K``,
``quantize_row_q6_K_ref``, ``quantize_row_q6_K_impl``), llama.cpp sync ``3142f1db``; the code is ours.

Decoders are bit-identical to ggml; encoders byte-identical to ``quantize_q3_K`` / ``quantize_q6_K``
with and without an importance vector, under the float32 discipline of ``qformats.formats.q4_k``:
one sub-block per column of a ``(16, S)`` array, C's reductions as in-order loops, no FMA.
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import QK_K
from ...numerics import nearest_int
from .base import F32, BlockType, fp16_field
from .kmachinery_qkx import block_field, bounded_passes
from .kmachinery_qx import GROUP_MAX_EPS, make_q3_quants, make_qx_quants, signed_abs_max, wrap_int8

__all__ = ["TYPES", "Q3K_BYTES", "Q6K_BYTES", "unpack_q3_scales", "pack_q3_scales", "q3k_codes", "q6k_codes",
           "pack_q3k_codes", "pack_q6k_codes"]

SUB = 16                        # weights per sub-block
N_SUB = QK_K // SUB             # 16 sub-blocks per super-block
# super-blocks per encoder pass: make_qx_quants' (19, 4096) trial rows stay in cache; make_q3_quants'
# descent is 16 dependent steps of small ops per pass, cheaper per block on wider arrays
_CHUNK_BLOCKS = 256
_MAGIC = F32(12582912.0)         # 1.5 * 2^23, nearest_int's constant (Q4K-4.4)
_Q3_REF_CHUNK_BLOCKS = 1024

# ---------------------------------------------------------------------------------------------
# q3_K layout: block_q3_K, 110 bytes
# ---------------------------------------------------------------------------------------------
#
#   offset  size  field
#   0       32    hmask   u8[QK_K/8]   high bit of each code (bit set: code >= 4)
#   32      64    qs      u8[QK_K/4]   low 2 bits of each code
#   96      12    scales  u8[12]       16 six-bit scales, stored value = sc + 32
#   108     2     d       fp16         super-block scale
#
# weight w = 128c + 32j + l  (c = 0..1 half, j = 0..3, l = 0..31), sub-block w // 16:
#   low 2 bits  = (qs[32c + l] >> 2j) & 3
#   high bit    = (hmask[l] >> (4c + j)) & 1          bit b of hmask[l] belongs to weight 32b + l
#   q           = low - (high ? 0 : 4)                 in -4..3
#
# scales[12], scale j = 0..15 (6 bits, low bits on the right):
#   byte k      (k = 0..7)  : [s(k+8) bits 3:0][s(k) bits 3:0]
#   byte 8 + k  (k = 0..3)  : [s(k+12) 5:4][s(k+8) 5:4][s(k+4) 5:4][s(k) 5:4]

Q3K_BYTES = QK_K // 8 + QK_K // 4 + 12 + 2
Q3K_HMASK, Q3K_QS, Q3K_SCALES, Q3K_D = 0, QK_K // 8, QK_K // 8 + QK_K // 4, QK_K // 8 + QK_K // 4 + 12

_HIGH_SHIFT = np.repeat(np.arange(4, dtype=np.uint8) * 2, 4)        # scale j: 2 * (j // 4)
_HIGH_BYTE = np.tile(np.arange(4), 4)                                # scale j: byte 8 + j % 4


def unpack_q3_scales(s12: np.ndarray) -> np.ndarray:
    """(..., 12) uint8 -> the 16 stored six-bit values (..., 16) int32, 0..63 (``sc + 32``; KQ-3.1)."""
    s = np.asarray(s12, np.uint8)
    low = np.concatenate([s[..., 0:8] & 0xF, s[..., 0:8] >> 4], axis=-1)
    high = (s[..., 8:12][..., _HIGH_BYTE] >> _HIGH_SHIFT) & 3
    return (low | (high << 4)).astype(np.int32)


def pack_q3_scales(v: np.ndarray) -> np.ndarray:
    """(..., 16) six-bit values 0..63 -> (..., 12) uint8, as the C encoders OR them in."""
    v = np.asarray(v, np.int32)
    out = np.empty(v.shape[:-1] + (12,), np.int32)
    out[..., 0:8] = (v[..., 0:8] & 0xF) | ((v[..., 8:16] & 0xF) << 4)
    hi = (v >> 4).reshape(v.shape[:-1] + (4, 4))                        # [j // 4, j % 4]
    out[..., 8:12] = hi[..., 0, :] | (hi[..., 1, :] << 2) | (hi[..., 2, :] << 4) | (hi[..., 3, :] << 6)
    return (out & 0xFF).astype(np.uint8)


_Q3_LOW_SHIFT = (np.arange(4, dtype=np.uint8) * 2)[:, None]          # (j, 1): 2j
_Q3_HIGH_SHIFT = np.arange(8, dtype=np.uint8).reshape(2, 4, 1)       # (c, j, 1): 4c + j


def q3k_codes(hmask: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """(nb, 32) hmask and (nb, 64) qs -> (nb, 256) signed codes -4..3 as int8, in weight order."""
    nb = qs.shape[0]
    low = (qs.reshape(nb, 2, 1, 32) >> _Q3_LOW_SHIFT) & 3                       # (nb, c, j, l)
    high = (hmask.reshape(nb, 1, 1, 32) >> _Q3_HIGH_SHIFT) & 1
    return (low.astype(np.int8) - np.int8(4) + (high.astype(np.int8) << 2)).reshape(nb, QK_K)


def pack_q3k_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nb, 256) stored codes 0..7 -> (hmask (nb, 32), qs (nb, 64)) uint8."""
    nb = codes.shape[0]
    c = codes.astype(np.uint8)
    high = (c >> 2).reshape(nb, 8, 32)                                          # (nb, b, l): weight 32b + l
    hmask = np.zeros((nb, 32), np.uint8)
    for b in range(8):
        hmask |= high[:, b] << np.uint8(b)
    low = (c & 3).reshape(nb, 2, 4, 32)                                         # (nb, c, j, l)
    qs = low[:, :, 0] | (low[:, :, 1] << 2) | (low[:, :, 2] << 4) | (low[:, :, 3] << 6)
    return hmask, qs.reshape(nb, 64)


# decode: super-blocks per pass, so the uint8 and float32 work arrays of one pass stay in cache.
# Shifts left are multiplications: NumPy's uint8 left_shift loop is not vectorised (about 10x slower)
_DECODE_CHUNK = 2048
# (256,) per weight w = 128c + 32j + l: x * _Q3_LOW_MUL moves bit pair 2j of its qs byte to bits 7:6,
# x * _Q3_HIGH_MUL bit 4c + j = w // 32 of its hmask byte to bit 7
_Q3_LOW_MUL = np.tile(np.repeat(np.array([64, 16, 4, 1], np.uint8), 32), 2)
_Q3_HIGH_MUL = np.repeat((1 << (7 - np.arange(8))).astype(np.uint8), 32)


def _q3k_scales_i8(s12: np.ndarray) -> np.ndarray:
    """(nb, 12) uint8 -> the 16 signed scales ``s - 32`` as (nb, 16) int8, four per 32-bit word operation."""
    w = np.ascontiguousarray(s12).view("<u4")                                  # (nb, 3)
    w0, w1, w2 = w[:, 0], w[:, 1], w[:, 2]
    out = np.empty((w.shape[0], 4), "<u4")
    out[:, 0] = (w0 & 0x0F0F0F0F) | ((w2 << 4) & 0x30303030)                 # s0..3:   high bits 1:0
    out[:, 1] = (w1 & 0x0F0F0F0F) | ((w2 << 2) & 0x30303030)                 # s4..7:   high bits 3:2
    out[:, 2] = ((w0 >> 4) & 0x0F0F0F0F) | (w2 & 0x30303030)                 # s8..11:  high bits 5:4
    out[:, 3] = ((w1 >> 4) & 0x0F0F0F0F) | ((w2 >> 2) & 0x30303030)          # s12..15: high bits 7:6
    v = out.view(np.uint8)
    np.subtract(v, 32, out=v)                                                  # mod 256: int8 s - 32
    return v.view(np.int8)


@bounded_passes
def _q3k_decode(blk: np.ndarray) -> np.ndarray:
    """``y = (d * (s[j] - 32)) * q``: ggml ``dequantize_row_q3_K`` (KQ-3.2).

    ``d * sc`` is exact (11 x 6 bits): one rounding, the product with ``q``, on full contiguous arrays.
    The codes are assembled as the int8 ``32 q`` (bits 6:5 the low bits, bit 7 the inverted high bit,
    i.e. ``- 128`` where the high bit is clear) against ``(d / 32) * sc``: a power of two, so
    ``((d / 32) * sc) * (32 q)`` is the same exact product, signed zeros, infinities and NaNs included.
    """
    nb = blk.shape[0]
    dl = _q3k_scales_i8(block_field(blk, Q3K_SCALES, 12)).astype(F32)
    np.multiply(dl, block_field(blk, Q3K_D, 2).view("<f2").astype(F32) * F32(1 / 32), out=dl)   # exact
    hm = np.invert(block_field(blk, Q3K_HMASK, 32)).reshape(nb, 1, 32)       # inverted high bits
    qs = blk[:, Q3K_QS:Q3K_SCALES].reshape(nb, 2, 1, 32)
    out = np.empty((nb, QK_K), F32)
    for start in range(0, nb, _DECODE_CHUNK):
        part = slice(start, start + _DECODE_CHUNK)
        code = np.repeat(qs[part], 4, axis=2).reshape(-1, QK_K)                # weight's qs byte
        np.multiply(code, _Q3_LOW_MUL, out=code)
        np.right_shift(code, 6, out=code)
        np.multiply(code, 32, out=code)                                        # its low 2 bits as bits 6:5
        high = np.repeat(hm[part], 8, axis=1).reshape(-1, QK_K)                # weight's inverted hmask byte
        np.multiply(high, _Q3_HIGH_MUL, out=high)
        np.bitwise_and(high, 0x80, out=high)                                   # its inverted high bit as bit 7
        np.bitwise_or(code, high, out=code)                                    # int8 32 q
        o = out[part]
        np.copyto(o, code.view(np.int8), casting="unsafe")
        np.multiply(o, np.repeat(dl[part], SUB).reshape(-1, QK_K), out=o)      # the one rounding
    return out


# ---------------------------------------------------------------------------------------------
# q6_K layout: block_q6_K, 210 bytes
# ---------------------------------------------------------------------------------------------
#
#   offset  size  field
#   0       128   ql      u8[QK_K/2]   low 4 bits of each code
#   128     64    qh      u8[QK_K/4]   high 2 bits of each code
#   192     16    scales  i8[QK_K/16]  signed 8-bit sub-block scales
#   208     2     d       fp16         super-block scale
#
# weight w = 128c + 32k + l  (c = 0..1, k = 0..3, l = 0..31), sub-block w // 16:
#   low 4 bits  = ql[64c + 32(k % 2) + l] >> 4(k // 2) & 15     k = 0, 1: low nibbles; k = 2, 3: high
#   high 2 bits = (qh[32c + l] >> 2k) & 3
#   q           = (low | high << 4) - 32                          in -32..31

Q6K_BYTES = QK_K // 2 + QK_K // 4 + QK_K // 16 + 2
Q6K_QL, Q6K_QH, Q6K_SCALES, Q6K_D = 0, QK_K // 2, QK_K // 2 + QK_K // 4, QK_K // 2 + QK_K // 4 + QK_K // 16

_Q6_NIBBLE = np.array([0, 0, 4, 4], np.uint8)[:, None]          # (k, 1)
_Q6_HALF = np.array([0, 1, 0, 1])                               # k -> 32-byte half of the 64 ql bytes
_Q6_HIGH = (np.arange(4, dtype=np.uint8) * 2)[:, None]


def q6k_codes(ql: np.ndarray, qh: np.ndarray) -> np.ndarray:
    """(nb, 128) ql and (nb, 64) qh -> (nb, 256) signed codes -32..31 as int8, in weight order."""
    nb = ql.shape[0]
    low = (ql.reshape(nb, 2, 2, 32)[:, :, _Q6_HALF] >> _Q6_NIBBLE) & 15         # (nb, c, k, l)
    high = (qh.reshape(nb, 2, 1, 32) >> _Q6_HIGH) & 3
    return ((low | (high << 4)).astype(np.int8) - np.int8(32)).reshape(nb, QK_K)


def pack_q6k_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nb, 256) stored codes 0..63 -> (ql (nb, 128), qh (nb, 64)) uint8."""
    nb = codes.shape[0]
    c = codes.astype(np.uint8).reshape(nb, 2, 4, 32)                            # (nb, c, k, l)
    lo = c & 15
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=-1)
    hi = c >> 4
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)
    return ql.reshape(nb, 128), qh.reshape(nb, 64)


# (256,) per weight w = 128c + 32k + l: x * _Q6_LOW_MUL keeps the low nibble of its ql byte as bits 7:4
# (k = 0, 1) or the high nibble (k = 2, 3); x * _Q6_HIGH_MUL moves bit pair 2k of its qh byte to bits 7:6
_Q6_LOW_MUL = np.tile(np.repeat(np.array([16, 1], np.uint8), 64), 2)
_Q6_HIGH_MUL = np.tile(np.repeat(np.array([64, 16, 4, 1], np.uint8), 32), 2)


@bounded_passes
def _q6k_decode(blk: np.ndarray) -> np.ndarray:
    """``y = (d * sc[j]) * q``: ggml ``dequantize_row_q6_K`` (KQ-6.2).

    ``d * sc`` is exact (11 x 8 bits): one rounding, the product with ``q``, on full contiguous arrays.
    The codes are assembled as the int8 ``4 q = 4 code - 128`` (``4 code`` with bit 7 flipped: the qh
    bytes are read XOR 0xAA) against ``(d / 4) * sc``: a power of two, so ``((d / 4) * sc) * (4 q)`` is
    the same exact product, signed zeros, infinities and NaNs included.
    """
    nb = blk.shape[0]
    dsc = block_field(blk, Q6K_SCALES, N_SUB).view(np.int8).astype(F32)
    np.multiply(dsc, block_field(blk, Q6K_D, 2).view("<f2").astype(F32) * F32(0.25), out=dsc)   # exact
    ql = blk[:, Q6K_QL:Q6K_QH].reshape(nb, 2, 1, 64)
    qh = np.bitwise_xor(block_field(blk, Q6K_QH, 64), 0xAA).reshape(nb, 2, 1, 32)   # high bit of each pair flipped
    out = np.empty((nb, QK_K), F32)
    for start in range(0, nb, _DECODE_CHUNK):
        part = slice(start, start + _DECODE_CHUNK)
        code = np.repeat(ql[part], 2, axis=2).reshape(-1, QK_K)                # weight's ql byte
        np.multiply(code, _Q6_LOW_MUL, out=code)
        np.right_shift(code, 4, out=code)
        np.multiply(code, 4, out=code)                                         # its nibble as bits 5:2
        high = np.repeat(qh[part], 4, axis=2).reshape(-1, QK_K)                # weight's qh byte
        np.multiply(high, _Q6_HIGH_MUL, out=high)
        np.bitwise_and(high, 0xC0, out=high)                                   # its bit pair as bits 7:6
        np.bitwise_or(code, high, out=code)                                    # int8 4 q
        o = out[part]
        np.copyto(o, code.view(np.int8), casting="unsafe")
        np.multiply(o, np.repeat(dsc[part], SUB).reshape(-1, QK_K), out=o)     # the one rounding
    return out


# ---------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------


def _columns(xb: np.ndarray) -> np.ndarray:
    """(B, 256) super-blocks -> (16, B*16), one sub-block per column."""
    return np.ascontiguousarray(xb.reshape(-1, SUB).T)


def _requantize(x: np.ndarray, L: np.ndarray, dj: np.ndarray, nmax: int) -> np.ndarray:
    """Codes against the stored scales: ``if (!d) continue;`` keeps the search's codes ``L``,
    otherwise ``MAX(-nmax, MIN(nmax-1, nearest_int(x / d))) + nmax``. ``dj``: (S,) float32.

    nearest_int's bit trick in place on the one (16, S) temporary, with the ``+ nmax`` folded into
    its offset: ``(bits & 0x7fffff) - 0x400000 + nmax``, clamped to ``[0, 2*nmax - 1]``.
    """
    v = x / dj
    v += _MAGIC
    q = v.view(np.int32)
    q &= 0x007FFFFF
    q -= 0x00400000 - nmax
    np.clip(q, 0, 2 * nmax - 1, out=q)
    keep = dj == 0
    if keep.any():
        q[:, keep] = L[:, keep]
    return q


def _q3k_blocks(x: np.ndarray, L: np.ndarray, stored: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Assemble (B, 110) q3_K blocks from the search codes ``L`` (16, S), the stored six-bit scales
    (B, 16) and the float32 super-scale ``d`` (B,) before fp16 rounding (KQ-3.4 steps 4-6)."""
    nblk = stored.shape[0]
    packed = pack_q3_scales(stored)
    d16 = d.astype("<f2")
    dj = (d16.astype(F32)[:, None] * (unpack_q3_scales(packed) - 32).astype(F32)).reshape(-1)
    codes = _requantize(x, L, dj, 4).T.reshape(nblk, QK_K)
    hmask, qs = pack_q3k_codes(codes)
    out = np.empty((nblk, Q3K_BYTES), np.uint8)
    out[:, Q3K_HMASK:Q3K_QS] = hmask
    out[:, Q3K_QS:Q3K_SCALES] = qs
    out[:, Q3K_SCALES:Q3K_D] = packed
    out[:, Q3K_D:] = d16.reshape(-1, 1).view(np.uint8)
    return out


def _q3k_ref(xb: np.ndarray, qwb: None = None) -> np.ndarray:
    """``quantize_row_q3_K_ref`` on (B, 256) -> (B, 110) (KQ-3.4)."""
    nblk = xb.shape[0]
    x = _columns(xb)
    scales, L = make_q3_quants(x, 4)
    scales = scales.reshape(nblk, N_SUB)
    _, max_scale = signed_abs_max(scales.T)
    iscale = F32(-32) / max_scale
    # `int8_t l = nearest_int(iscale*scales[j]); l = MAX(-32, MIN(31, l)) + 32;`
    stored = np.clip(wrap_int8(nearest_int(iscale[:, None] * scales)), -32, 31) + 32
    nonzero = max_scale != 0                                                    # `if (max_scale)`
    stored = np.where(nonzero[:, None], stored, 0)                              # memset(scales, 0, 12)
    d = np.where(nonzero, F32(1) / iscale, F32(0))
    return _q3k_blocks(x, L, stored, d)


def _q3k_impl(xb: np.ndarray, qwb: np.ndarray) -> np.ndarray:
    """``quantize_row_q3_K_impl`` with quant_weights on (B, 256) and their (B, 256) importance (KQ-3.5)."""
    nblk = xb.shape[0]
    x = _columns(xb)
    xt = np.ascontiguousarray(xb.T)
    sumx2 = F32(0) + xt[0] * xt[0]
    for j in range(1, QK_K):
        sumx2 = sumx2 + xt[j] * xt[j]
    sigma2 = (F32(2) * sumx2) / F32(QK_K)
    weight = _columns(qwb) * np.sqrt(np.repeat(sigma2, N_SUB) + x * x)
    sw = F32(0) + weight[0]
    for l in range(1, SUB):
        sw = sw + weight[l]
    scales, L = make_qx_quants(x, 4, weight)
    per_block = lambda v: np.ascontiguousarray(v.reshape(nblk, N_SUB).T)      # noqa: E731  (16, B)
    d_block, Ls = make_qx_quants(per_block(scales), 32, per_block(sw))
    return _q3k_blocks(x, L, Ls.T, d_block)


def _q6k(xb: np.ndarray, qwb: np.ndarray | None) -> np.ndarray:
    """``quantize_row_q6_K_ref`` (``qwb`` None) / ``quantize_row_q6_K_impl`` on (B, 256) -> (B, 210)
    (KQ-6.4, KQ-6.5): the paths differ only in the weights of the sub-block search."""
    nblk = xb.shape[0]
    x = _columns(xb)
    scales, L = make_qx_quants(x, 32, None if qwb is None else _columns(qwb))
    scales = scales.reshape(nblk, N_SUB)
    max_abs, max_scale = signed_abs_max(scales.T)
    iscale = F32(-128) / max_scale
    d16 = (F32(1) / iscale).astype("<f2")
    sc8 = wrap_int8(np.minimum(127, nearest_int(iscale[:, None] * scales)))    # int8_t store
    dj = (d16.astype(F32)[:, None] * sc8.astype(F32)).reshape(-1)
    codes = _requantize(x, L, dj, 32).T.reshape(nblk, QK_K)
    ql, qh = pack_q6k_codes(codes)
    out = np.empty((nblk, Q6K_BYTES), np.uint8)
    out[:, Q6K_QL:Q6K_QH] = ql
    out[:, Q6K_QH:Q6K_SCALES] = qh
    out[:, Q6K_SCALES:Q6K_D] = sc8.astype(np.int8).view(np.uint8)
    out[:, Q6K_D:] = d16.reshape(-1, 1).view(np.uint8)
    out[max_abs < GROUP_MAX_EPS] = 0                                            # memset(&y[i], 0, ...)
    return out


def _encoder(chunk, ref_chunk, type_size: int, ref_blocks: int = _CHUNK_BLOCKS):
    """``quantize(x, importance)`` from per-chunk block encoders: the reference path on the flat
    sequence of blocks, the importance path with block ``i`` of a row weighted by ``w[256i ...]``."""
    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        nb = n // QK_K
        xb = x.reshape(-1, QK_K)
        qw = None if importance is None else importance.reshape(nb, QK_K)
        out = np.empty((xb.shape[0], type_size), np.uint8)
        step = ref_blocks if qw is None else _CHUNK_BLOCKS
        for start in range(0, xb.shape[0], step):
            part = slice(start, min(start + step, xb.shape[0]))
            if qw is None:
                out[part] = ref_chunk(xb[part], None)
            else:
                out[part] = chunk(xb[part], qw[np.arange(part.start, part.stop) % nb])
        return out.reshape(rows, nb * type_size)
    return quantize


def _d_field(offset: int):
    return lambda blk: {"d": fp16_field(blk, offset)}


# d = 1/iscale with iscale = -32/max_scale (q3_K) or -128/max_scale (q6_K), max_scale the signed scale
# of largest magnitude, itself of either sign: both encoders write negative d (KQ-3.3, KQ-6.3).
TYPES = (
    BlockType("q3_k", "KQ-3", _q3k_decode, _d_field(Q3K_D), never_negative=(), fp16_offsets={"d": Q3K_D},
              quantize=_encoder(_q3k_impl, _q3k_ref, Q3K_BYTES, _Q3_REF_CHUNK_BLOCKS), importance=True, bits=3, group=16),
    BlockType("q6_k", "KQ-6", _q6k_decode, _d_field(Q6K_D), never_negative=(), fp16_offsets={"d": Q6K_D},
              quantize=_encoder(_q6k, _q6k, Q6K_BYTES), importance=True, bits=6, group=16),
)
