"""Deliberately wrong iq4_nl / iq4_xs decoders, each imitating a real bug class (tests/mutants/README.md).

Each one differs from spec/ggml_iquants.md in one place; the catalogue rows are ``MUTANTS`` below.
"""

from __future__ import annotations

import numpy as np

from qformats.formats.ggml.iq4 import KVALUES_IQ4NL, xs_sub_scales

F32 = np.float32
KV = KVALUES_IQ4NL.astype(F32)


def _d(blk):
    return np.ascontiguousarray(blk[:, 0:2]).view("<f2").astype(F32)          # (nb, 1)


def _codes(qs):
    """IQ-2.1: low nibbles are weights 0..15, high nibbles 16..31."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def _pairs(qs):
    """The q4_0-style misreading: byte j holds weights 2j and 2j + 1."""
    return np.stack([qs & 15, qs >> 4], axis=-1).reshape(qs.shape[:-1] + (2 * qs.shape[-1],))


def _nl(blocks, rows, *, codes=_codes, value=lambda q: KV[q]):
    blk = np.asarray(blocks, np.uint8).reshape(-1, 18)
    with np.errstate(invalid="ignore", over="ignore"):
        return (_d(blk) * value(codes(blk[:, 2:]))).reshape(rows, -1)


def _xs(blocks, rows, *, codes=_codes, sub_scale=lambda blk: xs_sub_scales(blk) - 32):
    blk = np.asarray(blocks, np.uint8).reshape(-1, 136)
    nb = blk.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        dl = _d(blk) * sub_scale(blk).astype(F32)
        y = dl[:, :, None] * KV[codes(blk[:, 8:].reshape(nb, 8, 16))]
    return y.reshape(rows, -1)


def iq4_nl_table_off_by_one(*, blocks, rows, n):
    """kv[(q + 1) % 16]: ``kvalues_iq4nl`` indexed off by one, i.e. transcribed rotated (-104 first) (IQ-1.1)."""
    return _nl(blocks, rows, value=lambda q: KV[(q.astype(np.intp) + 1) % 16])


def iq4_nl_nibbles_as_consecutive_pairs(*, blocks, rows, n):
    """q[2j] = qs[j] & 15, q[2j+1] = qs[j] >> 4: neighbouring weights per byte, not j and j + 16 (IQ-2.1)."""
    return _nl(blocks, rows, codes=_pairs)


def iq4_nl_read_as_q4_0(*, blocks, rows, n):
    """d * (q - 8): iq4_nl's 18-byte blocks decoded with q4_0's linear codes (same size and nibble order)."""
    return _nl(blocks, rows, value=lambda q: q.astype(F32) - F32(8))


def iq4_xs_scales_h_bits_misplaced(*, blocks, rows, n):
    """(scales_h >> ib) & 3: the 2-bit high parts read at bit ib instead of bit 2 ib (IQ-3.2)."""
    def sub_scale(blk):
        h = np.ascontiguousarray(blk[:, 2:4]).view("<u2").astype(np.int32)
        low = xs_sub_scales(blk) & 15
        return (low | (((h >> np.arange(8)) & 3) << 4)) - 32
    return _xs(blocks, rows, sub_scale=sub_scale)


def iq4_xs_sub_scale_without_minus_32(*, blocks, rows, n):
    """dl = d * ls: the 6-bit sub-scale read as unsigned, ``- 32`` forgotten (IQ-3.3)."""
    return _xs(blocks, rows, sub_scale=xs_sub_scales)


def iq4_xs_scales_l_nibbles_swapped(*, blocks, rows, n):
    """Group 2k in the high nibble of scales_l[k] and 2k + 1 in the low one (IQ-3.2 swapped)."""
    def sub_scale(blk):
        ls = xs_sub_scales(blk)
        low = ls & 15
        swapped = low.reshape(-1, 4, 2)[:, :, ::-1].reshape(-1, 8)
        return ((ls & 48) | swapped) - 32
    return _xs(blocks, rows, sub_scale=sub_scale)


def iq4_xs_nibbles_as_consecutive_pairs(*, blocks, rows, n):
    """Within each 32-weight group, byte j read as weights 2j and 2j + 1 (IQ-3.1 / IQ-2.1 order)."""
    return _xs(blocks, rows, codes=_pairs)


MUTANTS = [
    ("iq4_bugs:iq4_nl_table_off_by_one", "iq4_nl", "dequantize",
     "kvalues_iq4nl indexed off by one (the table transcribed rotated by one entry)", r"iq4_nl/read/random_bits_0"),
    ("iq4_bugs:iq4_nl_nibbles_as_consecutive_pairs", "iq4_nl", "dequantize",
     "iq4_nl nibbles read as neighbouring pairs (2j, 2j + 1) instead of (j, j + 16)", r"iq4_nl/read/random_bits_0"),
    ("iq4_bugs:iq4_nl_read_as_q4_0", "iq4_nl", "dequantize",
     "iq4_nl blocks decoded as q4_0 (same 18-byte layout): linear d * (q - 8) instead of the table",
     r"iq4_nl/read/random_bits_0"),
    ("iq4_bugs:iq4_xs_scales_h_bits_misplaced", "iq4_xs", "dequantize",
     "iq4_xs scales_h high bits taken at bit ib instead of 2 ib", r"iq4_xs/read/random_bits_0"),
    ("iq4_bugs:iq4_xs_sub_scale_without_minus_32", "iq4_xs", "dequantize",
     "iq4_xs 6-bit sub-scale used unsigned (ls instead of ls - 32)", r"iq4_xs/read/random_bits_0"),
    ("iq4_bugs:iq4_xs_scales_l_nibbles_swapped", "iq4_xs", "dequantize",
     "iq4_xs scales_l nibbles swapped (even group in the high nibble)", r"iq4_xs/read/random_bits_0"),
    ("iq4_bugs:iq4_xs_nibbles_as_consecutive_pairs", "iq4_xs", "dequantize",
     "iq4_xs codes read as neighbouring pairs within a group", r"iq4_xs/read/random_bits_0"),
]
