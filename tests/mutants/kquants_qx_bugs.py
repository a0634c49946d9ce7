"""Deliberately wrong q3_K and q6_K decoders, each imitating a real bug class (tests/mutants/README.md).

Each is called as a conformance subject ``fn(blocks=, rows=, n=)`` and must fail the case named in
``MUTANTS`` (spec/ggml_kquants.md KQ-3.1, KQ-3.2, KQ-6.1, KQ-6.2).
"""

from __future__ import annotations

import numpy as np

from qformats.formats.ggml.kquants_qx import (Q3K_BYTES, Q3K_D, Q3K_HMASK, Q3K_QS, Q3K_SCALES, Q6K_BYTES, Q6K_D,
                                              Q6K_QH, Q6K_QL, Q6K_SCALES, q3k_codes, q6k_codes, unpack_q3_scales)

F32 = np.float32


def _blocks(blocks, size):
    return np.asarray(blocks, np.uint8).reshape(-1, size)


def _d(blk, offset):
    return np.ascontiguousarray(blk[:, offset:offset + 2]).view("<f2").astype(F32)      # (nb, 1)


def _assemble(d, sc, q, rows):
    """``(d * sc[j]) * q`` for (nb, 1) d, (nb, 16) sc, (nb, 256) q -> (rows, n)."""
    with np.errstate(all="ignore"):
        y = (d * sc.astype(F32))[:, :, None] * q.astype(F32).reshape(-1, 16, 16)
    return y.reshape(rows, -1)


def _q6k_parts(blocks):
    blk = _blocks(blocks, Q6K_BYTES)
    sc = np.ascontiguousarray(blk[:, Q6K_SCALES:Q6K_D]).view(np.int8)
    return blk, sc


def _q3k_parts(blocks):
    blk = _blocks(blocks, Q3K_BYTES)
    return blk, unpack_q3_scales(blk[:, Q3K_SCALES:Q3K_D]) - 32


# ---------------------------------------------------------------------------------------------- q6_K


def q6k_scales_unsigned(*, blocks, rows, n):
    """q6_K's ``int8_t scales[16]`` read as uint8: a scale of -3 becomes 253 (KQ-6.1)."""
    blk, sc = _q6k_parts(blocks)
    q = q6k_codes(blk[:, Q6K_QL:Q6K_QH], blk[:, Q6K_QH:Q6K_SCALES])
    return _assemble(_d(blk, Q6K_D), sc.view(np.uint8), q, rows)


def q6k_nibbles_in_q4k_order(*, blocks, rows, n):
    """q6_K low nibbles in q4_K's order: ql[64c + l] holds weights 128c + l (low) and 128c + 32 + l
    (high), ql[64c + 32 + l] weights 128c + 64 + l and 128c + 96 + l, instead of ggml's l / l + 64
    and l + 32 / l + 96 (KQ-6.1); qh read correctly."""
    blk, sc = _q6k_parts(blocks)
    nb = blk.shape[0]
    ql = blk[:, Q6K_QL:Q6K_QH].reshape(nb, 2, 2, 1, 32)                  # (nb, c, half, 1, l)
    low = np.concatenate([ql & 15, ql >> 4], axis=3).reshape(nb, 2, 4, 32)  # k = 2*half + nibble
    qh = blk[:, Q6K_QH:Q6K_SCALES].reshape(nb, 2, 1, 32)
    high = (qh >> (np.arange(4, dtype=np.uint8) * 2)[:, None]) & 3
    q = (low | (high << 4)).astype(np.int16).reshape(nb, 256) - 32
    return _assemble(_d(blk, Q6K_D), sc, q, rows)


def q6k_d_first(*, blocks, rows, n):
    """q6_K's float16 ``d`` read from the block's first two bytes, where q4_K and q2_K keep theirs;
    ggml's ``block_q6_K`` stores it last, at byte 208 (KQ-6.1)."""
    blk, sc = _q6k_parts(blocks)
    q = q6k_codes(blk[:, Q6K_QL:Q6K_QH], blk[:, Q6K_QH:Q6K_SCALES])
    return _assemble(_d(blk, 0), sc, q, rows)


# ---------------------------------------------------------------------------------------------- q3_K


def q3k_hmask_inverted(*, blocks, rows, n):
    """q3_K's hmask read with the opposite sense: a set bit subtracts 4. ggml subtracts 4 where the
    bit is clear (``(hm[l] & m) ? 0 : 4``), so every code is off by +-4 (KQ-3.1, KQ-3.2)."""
    blk, sc = _q3k_parts(blocks)
    q = q3k_codes(blk[:, Q3K_HMASK:Q3K_QS], blk[:, Q3K_QS:Q3K_SCALES]).astype(np.int16)
    q = np.where(q >= 0, q - 4, q + 4)          # high bit set (q = low) <-> clear (q = low - 4)
    return _assemble(_d(blk, Q3K_D), sc, q, rows)


def q3k_scale_high_bits_transposed(*, blocks, rows, n):
    """q3_K's upper two scale bits taken from byte 8 + j // 4 at shift 2 * (j % 4), the transpose of
    ggml's byte 8 + j % 4 at shift 2 * (j // 4) (``kmask1`` shifts in dequantize_row_q3_K; KQ-3.1)."""
    blk = _blocks(blocks, Q3K_BYTES)
    s = blk[:, Q3K_SCALES:Q3K_D]
    j = np.arange(16)
    low = np.concatenate([s[:, 0:8] & 15, s[:, 0:8] >> 4], axis=1)
    high = (s[:, 8 + j // 4] >> (2 * (j % 4)).astype(np.uint8)) & 3
    sc = (low | (high << 4)).astype(np.int16) - 32
    q = q3k_codes(blk[:, Q3K_HMASK:Q3K_QS], blk[:, Q3K_QS:Q3K_SCALES])
    return _assemble(_d(blk, Q3K_D), sc, q, rows)


def q3k_scales_without_offset(*, blocks, rows, n):
    """q3_K's six-bit scales used as stored, 0..63, without ggml's ``- 32`` (KQ-3.2)."""
    blk = _blocks(blocks, Q3K_BYTES)
    sc = unpack_q3_scales(blk[:, Q3K_SCALES:Q3K_D])
    q = q3k_codes(blk[:, Q3K_HMASK:Q3K_QS], blk[:, Q3K_QS:Q3K_SCALES])
    return _assemble(_d(blk, Q3K_D), sc, q, rows)


MUTANTS = [
    ("kquants_qx_bugs:q6k_scales_unsigned", "q6_k", "dequantize",
     "q6_K int8 sub-block scales read as uint8", r"q6_k/read/random_bits_0"),
    ("kquants_qx_bugs:q6k_nibbles_in_q4k_order", "q6_k", "dequantize",
     "q6_K ql nibbles in q4_K's chunk order (weights l / l+32 in one byte instead of l / l+64)",
     r"q6_k/read/random_bits_0"),
    ("kquants_qx_bugs:q6k_d_first", "q6_k", "dequantize",
     "q6_K super-scale d read at byte 0 (q4_K/q2_K position) instead of last", r"q6_k/read/random_bits_0"),
    ("kquants_qx_bugs:q3k_hmask_inverted", "q3_k", "dequantize",
     "q3_K hmask sense inverted: a set bit subtracts 4 instead of a clear one", r"q3_k/read/random_bits_0"),
    ("kquants_qx_bugs:q3k_scale_high_bits_transposed", "q3_k", "dequantize",
     "q3_K upper scale bits from byte 8 + j//4, shift 2*(j%4) (transposed kmask1 unpacking)",
     r"q3_k/read/random_bits_0"),
    ("kquants_qx_bugs:q3k_scales_without_offset", "q3_k", "dequantize",
     "q3_K six-bit scales used without the -32 offset", r"q3_k/read/random_bits_0"),
]
