"""q4_K in the family: its decode and its two encoders on the affine K-quant machinery (spec/q4_k.md).

q4_K keeps its spec chapter and its room (``qformats.formats.q4_k``: the tensor model, the
``q4k.*`` checks, the cases and the ``q4_k.quantize`` / ``q4_k.dequantize`` contract of DESIGN.md
§3); its codec lives here, beside q5_K and q2_K, on the machinery they share
(:mod:`.kmachinery_qkx`). ``dequantize_row_q4_K`` (Q4K-3), ``quantize_row_q4_K_ref`` (Q4K-4.3) and
``quantize_row_q4_K_impl`` (Q4K-4.6) are from ggml 0.10.1 ``src/ggml-quants.c``; the code is ours.

    offset  size  field
    0       2     d        fp16 LE  super-block scale of the 6-bit sub-block scales
    2       2     dmin     fp16 LE  super-block scale of the 6-bit sub-block mins
    4       12    scales   8 x (6-bit sc, 6-bit m), packed (Q4K-1.4, KQ-1.5)
    16      128   qs       256 x 4-bit codes, chunk c = bytes 32c..32c+31:
                           low nibbles = weights 64c..64c+31, high nibbles = 64c+32..64c+63
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import QK_K
from .base import F32, BlockType, fp16_field
from .kmachinery_qkx import (K_SCALE_SIZE, affine_decode, affine_search, block_field, bounded_passes, clamp_codes,
                             encode_chunks, make_qp_quants, nibble_codes, pack_codes, pack_scales, seq_sum,
                             six_bit_ref_codes, six_bit_scales, sub_block_columns, unpack_scales,
                             unshift_high_nibbles)

__all__ = ["TYPES", "decode", "quantize_ref", "quantize_impl", "Q4K_BYTES"]

Q4K_D, Q4K_DMIN, Q4K_SCALES = 0, 2, 4
Q4K_QS = Q4K_SCALES + K_SCALE_SIZE
Q4K_BYTES = Q4K_QS + QK_K // 2
assert Q4K_BYTES == 144    # noqa: S101 - static_assert(sizeof(block_q4_K) == 2*2 + K_SCALE_SIZE + QK_K/2)
N_SUB = QK_K // 32         # eight sub-blocks of 32 weights


@bounded_passes
def decode(blk: np.ndarray) -> np.ndarray:
    """``dequantize_row_q4_K`` on (nb, 144) blocks: ``y = (fp32(d) * sc) * q - fp32(dmin) * m`` (Q4K-3.1).

    ``d * sc`` is exact (11 x 6 bits) and so is its product with ``q`` (4 more bits): the only
    rounding is the subtraction, as in C. The high nibbles stay in place as ``16 q`` against
    ``(d * sc) / 16`` (a power of two, and ``d * sc`` is 0 or at least 2^-24), the same exact
    product, infinities, NaNs and signed zeros included.
    """
    def codes(part: slice, dj: np.ndarray) -> np.ndarray:
        unshift_high_nibbles(dj)
        return nibble_codes(blk[part, Q4K_QS:])

    return affine_decode(blk.shape[0], lambda part: six_bit_scales(block_field(blk[part], Q4K_D, Q4K_QS)), codes)


def _scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, Q4K_D), "dmin": fp16_field(blk, Q4K_DMIN)}


# ---------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------


def _finish(x, L, ls, lm, d, dmin) -> np.ndarray:
    """Pack scales, recompute codes from the stored scales and assemble (B, 144) blocks.

    ``x``: (32, B*8) inputs; ``L``: (32, B*8) search codes; ``ls``/``lm``: (B, 8) integer
    6-bit scale/min codes; ``d``/``dmin``: (B,) float32 to be rounded to fp16 (Q4K-4.3 4-6).
    """
    nblk = ls.shape[0]
    packed = pack_scales(ls, lm)
    d16 = d.astype("<f2")
    dmin16 = dmin.astype("<f2")
    sc, m = unpack_scales(packed)
    dj = (d16.astype(F32)[:, None] * sc.astype(F32)).reshape(-1)        # (S,)
    dmj = (dmin16.astype(F32)[:, None] * m.astype(F32)).reshape(-1)
    requant = clamp_codes((x + dmj) / dj, 15)
    L = np.where(dj == 0, L, requant)                                    # `if (!d) continue;`
    codes = L.T.reshape(nblk, QK_K)
    out = np.empty((nblk, Q4K_BYTES), np.uint8)
    out[:, Q4K_D:Q4K_DMIN] = d16.reshape(-1, 1).view(np.uint8)
    out[:, Q4K_DMIN:Q4K_SCALES] = dmin16.reshape(-1, 1).view(np.uint8)
    out[:, Q4K_SCALES:Q4K_QS] = packed
    out[:, Q4K_QS:] = pack_codes(codes)
    return out


def _ref_chunk(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q4_K_ref`` on (B, 256) float32 -> (B, 144) uint8 (Q4K-4.3)."""
    nblk = xb.shape[0]
    x = sub_block_columns(xb)
    sum_x2 = seq_sum(x * x)
    av_x = np.sqrt(sum_x2 / F32(32))
    w = av_x + np.abs(x)
    scales, mins, L = affine_search(x, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20, degenerate_le=False)
    return _finish(x, L, *six_bit_ref_codes(scales.reshape(nblk, N_SUB), mins.reshape(nblk, N_SUB)))


def _impl_chunk(xb: np.ndarray, qwb: np.ndarray) -> np.ndarray:
    """``quantize_row_q4_K_impl`` on (B, 256) inputs with their (B, 256) importance (Q4K-4.6).

    Per sub-block ``make_qkx3_quants`` with weights ``qw * sqrt(sigma2 + x^2)``, then the eight
    scales and the eight mins are each quantized to 6 bits by ``make_qp_quants``, packed unclamped.
    """
    x = sub_block_columns(xb)
    qw = sub_block_columns(qwb)
    xt = np.ascontiguousarray(xb.T)
    sum_x2 = seq_sum(xt * xt)                                           # per super-block, in order
    sigma2 = (F32(2) * sum_x2) / F32(QK_K)
    w = qw * np.sqrt(np.repeat(sigma2, N_SUB) + x * x)
    sw = seq_sum(w)
    scales, mins, L = affine_search(x, w, nmax=15, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
    per_block = (-1, N_SUB)
    sw_t = sw.reshape(per_block).T
    d_block, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(per_block).T), sw_t)
    m_block, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(per_block).T), sw_t)
    return _finish(x, L, ls.T, lm.T, d_block, m_block)


def quantize_ref(x: np.ndarray) -> np.ndarray:
    """float32 (rows, n) -> (rows, n // 256 * 144) uint8 by ``quantize_row_q4_K_ref`` (Q4K-4.3)."""
    rows, n = x.shape
    xb = x.reshape(-1, QK_K)
    out = encode_chunks(xb.shape[0], Q4K_BYTES, lambda part: _ref_chunk(xb[part]))
    return out.reshape(rows, n // QK_K * Q4K_BYTES)


def quantize_impl(x: np.ndarray, importance: np.ndarray) -> np.ndarray:
    """float32 (rows, n) and float32 (n,) importance -> uint8 by ``quantize_row_q4_K_impl`` (Q4K-4.6)."""
    rows, n = x.shape
    qw_row = importance.reshape(-1, QK_K)                               # (nb, 256)
    nb = qw_row.shape[0]
    xb = x.reshape(-1, QK_K)
    # super-block i of the flattened rows is block i % nb of its row: same importance in every row
    out = encode_chunks(xb.shape[0], Q4K_BYTES,
                        lambda part: _impl_chunk(xb[part], qw_row[np.arange(part.start, part.stop) % nb]))
    return out.reshape(rows, nb * Q4K_BYTES)


def _encode(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
    return quantize_ref(x) if importance is None else quantize_impl(x, importance)


# d = max_scale / 63 and dmin = max_min / 63 with both maxima starting at 0 (Q4K-4.3, Q4K-4.6)
TYPES = (BlockType("q4_k", "Q4K-1", decode, _scales, never_negative=("d", "dmin"),
                   fp16_offsets={"d": Q4K_D, "dmin": Q4K_DMIN}, quantize=_encode, importance=True, bits=4, group=32),)
