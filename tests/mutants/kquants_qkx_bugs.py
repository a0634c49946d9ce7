"""Deliberately wrong q2_K and q5_K decoders, each imitating a real bug class (tests/mutants/README.md).

Each is ggml's decode (spec/ggml_kquants.md KQ-2.2, KQ-5.2) with one thing wrong; ``MUTANTS`` rows are
(entry, format, op, imitates, killer-case regex) for the catalogue.
"""

from __future__ import annotations

import numpy as np

from qformats.formats.ggml.base import fp16_field
from qformats.formats.ggml.kquants_qkx import q2k_unpack_codes, q5k_unpack_codes
from qformats.formats.q4_k.codec import unpack_codes, unpack_scales

F32 = np.float32


def _affine(q, sc, m, d, dmin, rows, *, plus_min=False):
    """(nb, k, per) codes with (nb, k) scale/min codes -> (rows, n) ``(d*sc)*q - dmin*m`` (or ``+``)."""
    with np.errstate(invalid="ignore", over="ignore"):     # inf * 0 in invalid blocks, as in C
        dj = (d * sc.astype(F32))[:, :, None]
        mj = (dmin * m.astype(F32))[:, :, None]
        y = dj * q.astype(F32) + mj if plus_min else dj * q.astype(F32) - mj
    return y.reshape(rows, -1)


# --- q2_K: scales[16] | qs[64] | d | dmin --------------------------------------------------------


def _q2k(blocks):
    blk = np.asarray(blocks, np.uint8).reshape(-1, 84)
    return blk, blk[:, 0:16], fp16_field(blk, 80), fp16_field(blk, 82)


def q2k_scale_min_nibbles_swapped(*, blocks, rows, n):
    """sc from the high nibble and m from the low one: the reverse of ggml's ``sc & 0xF`` / ``sc >> 4`` (KQ-2.1)."""
    blk, s, d, dmin = _q2k(blocks)
    q = q2k_unpack_codes(blk[:, 16:80]).reshape(-1, 16, 16)
    return _affine(q, s >> 4, s & 15, d, dmin, rows)


def q2k_plus_min(*, blocks, rows, n):
    """``d*sc*q + dmin*m``: the sign of the min flipped, as torchao's prototype K-quant reader did for q4_K."""
    blk, s, d, dmin = _q2k(blocks)
    q = q2k_unpack_codes(blk[:, 16:80]).reshape(-1, 16, 16)
    return _affine(q, s & 15, s >> 4, d, dmin, rows, plus_min=True)


def q2k_codes_consecutive(*, blocks, rows, n):
    """Code i = bits 2(i % 4) of qs[i // 4]: four neighbouring weights per byte, not ggml's 32-apart order (KQ-2.1)."""
    blk, s, d, dmin = _q2k(blocks)
    qs = blk[:, 16:80]
    q = np.stack([(qs >> k) & 3 for k in (0, 2, 4, 6)], axis=2).reshape(-1, 16, 16)
    return _affine(q, s & 15, s >> 4, d, dmin, rows)


def q2k_d_dmin_at_front(*, blocks, rows, n):
    """d and dmin read from bytes 0..3 as in q4_K/q5_K (struct field order assumed, not checked: KQ-2.1)."""
    blk = np.asarray(blocks, np.uint8).reshape(-1, 84)
    s = blk[:, 4:20]
    q = q2k_unpack_codes(blk[:, 20:84]).reshape(-1, 16, 16)
    return _affine(q, s & 15, s >> 4, fp16_field(blk, 0), fp16_field(blk, 2), rows)


# --- q5_K: d | dmin | scales[12] | qh[32] | qs[128] ----------------------------------------------


def _q5k(blocks):
    blk = np.asarray(blocks, np.uint8).reshape(-1, 176)
    sc, m = unpack_scales(blk[:, 4:16])
    return blk, sc, m, fp16_field(blk, 0), fp16_field(blk, 2)


def q5k_high_bit_flat_mask(*, blocks, rows, n):
    """Fifth bit of weight i = bit i % 8 of qh[i // 8]: a flat 256-bit mask, as q5_0/q5_1 keep theirs, not ggml's
    bit j of qh[l] for weight 32j + l (KQ-5.1)."""
    blk, sc, m, d, dmin = _q5k(blocks)
    hi = np.unpackbits(blk[:, 16:48], axis=1, bitorder="little")
    q = (unpack_codes(blk[:, 48:]) | (hi << 4)).reshape(-1, 8, 32)
    return _affine(q, sc, m, d, dmin, rows)


def q5k_high_bit_masks_shift_one(*, blocks, rows, n):
    """ggml's masks ``u1 <<= 2; u2 <<= 2`` ported as ``<<= 1``: chunk c reads bits c and c+1 of qh (KQ-5.1)."""
    blk, sc, m, d, dmin = _q5k(blocks)
    qh = blk[:, 16:48]
    bit = np.array([c + p for c in range(4) for p in range(2)], np.uint8)        # sub-block 2c+p -> bit c+p
    hi = (qh[:, None, :] >> bit[None, :, None]) & 1
    q = unpack_codes(blk[:, 48:]).reshape(-1, 8, 32) | (hi << 4)
    return _affine(q, sc, m, d, dmin, rows)


def q5k_scales_4_to_7_high_bits_swapped(*, blocks, rows, n):
    """For sub-blocks 4..7, sc's top bits from scales[j] and m's from scales[j-4]: ``get_scale_min_k4`` with
    ``q[j-4]`` and ``q[j-0]`` exchanged (Q4K-1.4, KQ-1.5)."""
    blk, sc, m, d, dmin = _q5k(blocks)
    s = blk[:, 4:16]
    sc, m = sc.copy(), m.copy()
    sc[:, 4:] = (s[:, 8:12] & 15) | ((s[:, 4:8] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 0:4] >> 6) << 4)
    q = q5k_unpack_codes(blk[:, 16:48], blk[:, 48:]).reshape(-1, 8, 32)
    return _affine(q, sc, m, d, dmin, rows)


def q5k_fifth_bit_ignored(*, blocks, rows, n):
    """qh never read: q5_K decoded as q4_K at offset 48 (a q4_K kernel reused for q5_K)."""
    blk, sc, m, d, dmin = _q5k(blocks)
    q = unpack_codes(blk[:, 48:]).reshape(-1, 8, 32)
    return _affine(q, sc, m, d, dmin, rows)


MUTANTS = [
    ("kquants_qkx_bugs:q2k_scale_min_nibbles_swapped", "q2_k", "dequantize",
     "q2_K scale and min nibbles swapped (sc = byte >> 4, m = byte & 15)", r"q2_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q2k_plus_min", "q2_k", "dequantize",
     "q2_K d*sc*q + dmin*m: the min's sign flipped (torchao prototype reader's q4_K bug)",
     r"q2_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q2k_codes_consecutive", "q2_k", "dequantize",
     "q2_K codes read as four neighbouring weights per byte, not ggml's 32-apart bit pairs",
     r"q2_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q2k_d_dmin_at_front", "q2_k", "dequantize",
     "q2_K d/dmin read from the front of the block as in q4_K (block_q2_K keeps them last)",
     r"q2_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q5k_high_bit_flat_mask", "q5_k", "dequantize",
     "q5_K fifth bit from the wrong qh byte/bit: a flat 256-bit mask as in q5_0/q5_1", r"q5_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q5k_high_bit_masks_shift_one", "q5_k", "dequantize",
     "q5_K qh masks advanced by one bit per 64-weight chunk instead of two", r"q5_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q5k_scales_4_to_7_high_bits_swapped", "q5_k", "dequantize",
     "q5_K get_scale_min_k4 with q[j-4] and q[j] exchanged: sc/m top bits of sub-blocks 4..7 swapped",
     r"q5_k/read/random_bits_0"),
    ("kquants_qkx_bugs:q5k_fifth_bit_ignored", "q5_k", "dequantize",
     "q5_K decoded by a q4_K kernel at the qs offset: the qh plane never read", r"q5_k/read/random_bits_0"),
]
