"""Deliberately wrong grid i-quant decoders, each imitating a real bug class (tests/mutants/README.md).

Each is the reference decoder of spec/ggml_iquants.md with one realistic slip: a field read from the
wrong bits, a table of a sibling type, a constant of a sibling type, a sign convention inverted.
"""

from __future__ import annotations

import numpy as np

from qformats.formats.ggml.base import fp16_field
from qformats.formats.ggml.iqgrid import (GRIDS, IQ1_GRID_DELTA, SIGNS7, SIGNS8, decode_iq1_m)

F32 = np.float32


def _rows(blocks, size: int) -> np.ndarray:
    return np.ascontiguousarray(blocks, np.uint8).reshape(-1, size)


def _out(y: np.ndarray, rows: int) -> np.ndarray:
    return y.reshape(rows, -1)


def _sign(y: np.ndarray, sign_bits: np.ndarray) -> np.ndarray:
    """The sign bits XOR-ed in (IQ-1.3) -> (nb, 256)."""
    y.view(np.uint32)[...] ^= sign_bits.reshape(y.shape)
    return y.reshape(len(y), 256)


def _iq2_xxs(blocks, *, sign_bytes=False, grid="iq2xxs"):
    blk = _rows(blocks, 66)
    d = fp16_field(blk, 0)
    aux = np.ascontiguousarray(blk[:, 2:66]).view("<u4").reshape(-1, 8, 2)
    ls = (aux[:, :, 1] >> 28).astype(F32)
    db = (d * (F32(0.5) + ls)) * F32(0.25)
    if sign_bytes:      # sign index l taken as byte l of aux1, low 7 bits
        sidx = blk[:, 2:66].reshape(-1, 8, 8)[:, :, 4:8] & 127
    else:
        sidx = (aux[:, :, 1:2] >> np.array([0, 7, 14, 21], np.uint32)) & 127
    idx = blk[:, 2:66].reshape(-1, 8, 8)[:, :, :4]
    y = np.take(GRIDS[grid], idx.ravel(), axis=0).reshape(-1, 8, 32) * db[:, :, None]
    return _sign(y, np.take(SIGNS7, sidx.ravel(), axis=0))


def iq2_xxs_sign_index_per_byte(*, blocks, rows, n):
    """iq2_xxs sign index l read from byte l of aux1 (``aux8[4+l] & 127``) instead of bits 7l..7l+6
    (IQ-4.1): a port that takes the 7-bit fields for bytes."""
    return _out(_iq2_xxs(blocks, sign_bytes=True), rows)


def iq2_xxs_with_iq2xs_grid(*, blocks, rows, n):
    """iq2_xxs decoded through the first 256 entries of iq2xs_grid (IQ-1.2: the grids are different
    tables, not prefixes of each other)."""
    return _out(_iq2_xxs(blocks, grid="iq2xs"), rows)


def iq2_xs_scale_without_half(*, blocks, rows, n):
    """iq2_xs ``db = d * ls * 0.25`` instead of ``d * (0.5f + ls) * 0.25f``: the odd scale 2*ls+1 taken
    as 2*ls (IQ-5.2)."""
    blk = _rows(blocks, 74)
    d = fp16_field(blk, 0)
    qs = np.ascontiguousarray(blk[:, 2:66]).view("<u2")
    ls = np.stack([blk[:, 66:74] & 15, blk[:, 66:74] >> 4], axis=-1).reshape(-1, 16).astype(F32)
    db = (d * ls) * F32(0.25)
    y = np.take(GRIDS["iq2xs"], (qs & 511).ravel(), axis=0).reshape(-1, 16, 16) * db[:, :, None]
    return _out(_sign(y, np.take(SIGNS7, (qs >> 9).ravel(), axis=0)), rows)


def iq2_s_signs_through_ksigns(*, blocks, rows, n):
    """iq2_s sign bytes read as 7-bit indices through ksigns_iq2xs (the iq2_xs scheme), where iq2_s
    stores the sign byte whole (IQ-1.3, IQ-6.1)."""
    blk = _rows(blocks, 82)
    d = fp16_field(blk, 0)
    qh = blk[:, 66:74].astype(np.uint16)[:, :, None]
    idx = blk[:, 2:34].reshape(-1, 8, 4) | (((qh >> (2 * np.arange(4, dtype=np.uint16))) & 3) << 8)
    ls = np.stack([blk[:, 74:82] & 15, blk[:, 74:82] >> 4], axis=-1).reshape(-1, 16).astype(F32)
    db = (d * (F32(0.5) + ls)) * F32(0.25)
    y = np.take(GRIDS["iq2s"], idx.ravel(), axis=0).reshape(-1, 16, 16) * db[:, :, None]
    return _out(_sign(y, np.take(SIGNS7, (blk[:, 34:66] & 127).ravel(), axis=0)), rows)


def iq3_xxs_quarter_scale(*, blocks, rows, n):
    """iq3_xxs ``db = d * (0.5f + ls) * 0.25f``, the iq2_xxs constant, instead of ``* 0.5f`` (IQ-7.2):
    a decoder copied from its sibling."""
    blk = _rows(blocks, 98)
    d = fp16_field(blk, 0)
    aux = np.ascontiguousarray(blk[:, 66:98]).view("<u4")
    db = (d * (F32(0.5) + (aux >> 28).astype(F32))) * F32(0.25)
    sidx = (aux[:, :, None] >> np.array([0, 7, 14, 21], np.uint32)) & 127
    y = np.take(GRIDS["iq3xxs"], blk[:, 2:66].ravel(), axis=0).reshape(-1, 8, 32) * db[:, :, None]
    return _out(_sign(y, np.take(SIGNS7, sidx.ravel(), axis=0)), rows)


def iq3_s_index_without_qh(*, blocks, rows, n):
    """iq3_s grid index ``qs[k]`` without bit 8 from ``qh`` (IQ-8.1): only the first half of the
    512-entry grid is ever reached."""
    blk = _rows(blocks, 110)
    d = fp16_field(blk, 0)
    ls = np.stack([blk[:, 106:110] & 15, blk[:, 106:110] >> 4], axis=-1).reshape(-1, 8).astype(F32)
    db = d * (F32(1.0) + F32(2.0) * ls)
    y = np.take(GRIDS["iq3s"], blk[:, 2:66].ravel(), axis=0).reshape(-1, 8, 32) * db[:, :, None]
    return _out(_sign(y, np.take(SIGNS8, blk[:, 74:106].ravel(), axis=0)), rows)


def iq1_s_delta_sign_inverted(*, blocks, rows, n):
    """iq1_s shift ``+0.125`` where bit 15 of qh is set and ``-0.125`` where clear (IQ-9.2 inverted)."""
    blk = _rows(blocks, 50)
    d = fp16_field(blk, 0)
    qh = np.ascontiguousarray(blk[:, 34:50]).view("<u2")
    dl = d * (F32(2.0) * ((qh >> 12) & 7).astype(F32) + F32(1.0))
    hi = (qh[:, :, None] >> (3 * np.arange(4, dtype=np.uint16))) & 7
    idx = (blk[:, 2:34].reshape(-1, 8, 4) | (hi << 8)).astype(np.intp)
    neg = 1 - (qh >> 15).astype(np.intp)[:, :, None]
    y = np.take(IQ1_GRID_DELTA, (idx | (neg << 11)).ravel(), axis=0).reshape(-1, 8, 32) * dl[:, :, None]
    return _out(y, rows)


def iq1_m_scale_nibbles_reversed(*, blocks, rows, n):
    """iq1_m float16 scale assembled with the nibbles in reverse word order (``sc[3] >> 12`` lowest),
    not ``sc[0] >> 12 | ... | sc[3] & 0xf000`` (IQ-10.1)."""
    blk = _rows(blocks, 56).copy()
    top = np.ascontiguousarray(blk[:, 48:56]).view("<u2") >> 12
    wrong = top[:, 3] | (top[:, 2] << 4) | (top[:, 1] << 8) | (top[:, 0] << 12)
    fixed = np.ascontiguousarray(blk[:, 48:56]).view("<u2") & 0x0FFF
    for w in range(4):                              # re-spread `wrong` so that the right assembly finds it
        fixed[:, w] |= ((wrong >> (4 * w)) & 15) << 12
    blk[:, 48:56] = fixed.view(np.uint8)
    return _out(decode_iq1_m(blk), rows)


def iq1_m_one_scale_per_sub_block(*, blocks, rows, n):
    """iq1_m with one 3-bit scale for all 32 weights of a sub-block (the iq1_s habit): the second half's
    scale at bits 6*(ib%2) + 3 ignored (IQ-10.2)."""
    blk = _rows(blocks, 56).copy()
    sc = np.ascontiguousarray(blk[:, 48:56]).view("<u2").copy()
    for i in (0, 1):                                # copy ls(ib, 0) over ls(ib, 1)
        low = (sc >> (6 * i)) & 7
        sc = (sc & ~np.uint16(7 << (6 * i + 3))) | (low << (6 * i + 3)).astype(np.uint16)
    blk[:, 48:56] = sc.view(np.uint8)
    return _out(decode_iq1_m(blk), rows)


def iq2_xs_matmul_w_float16(*, blocks, rows, n, x):
    """A GEMV that dequantizes iq2_xs to float16 without a range check: with d near 65504 a weight
    ``d * (ls + 1/2) / 4 * 43`` overflows to inf (IQ-1.6 bounds it below 2^25, not 2^16)."""
    from qformats.formats import ggml

    w = ggml.dequantize("iq2_xs", blocks).astype(np.float16)
    return np.asarray(x, np.float32) @ w.astype(np.float32).T


MUTANTS = [
    ("iqgrid_bugs:iq2_xxs_sign_index_per_byte", "iq2_xxs", "dequantize",
     "iq2_xxs 7-bit sign indices read as the bytes of aux1 (sign bits from the wrong place)",
     r"iq2_xxs/read/random_bits_0"),
    ("iqgrid_bugs:iq2_xxs_with_iq2xs_grid", "iq2_xxs", "dequantize",
     "iq2_xxs decoded with the iq2_xs grid (the 8-weight grids are distinct tables)", r"iq2_xxs/read/random_bits_0"),
    ("iqgrid_bugs:iq2_xs_scale_without_half", "iq2_xs", "dequantize",
     "iq2_xs sub-block scale 2*ls+1 taken as 2*ls (d * ls / 4)", r"iq2_xs/read/random_bits_0"),
    ("iqgrid_bugs:iq2_s_signs_through_ksigns", "iq2_s", "dequantize",
     "iq2_s whole sign bytes read as 7-bit ksigns indices (iq2_xs sign scheme)", r"iq2_s/read/random_bits_0"),
    ("iqgrid_bugs:iq3_xxs_quarter_scale", "iq3_xxs", "dequantize",
     "iq3_xxs scale with iq2_xxs's 0.25f instead of 0.5f (decoder copied from its sibling)",
     r"iq3_xxs/read/random_bits_0"),
    ("iqgrid_bugs:iq3_s_index_without_qh", "iq3_s", "dequantize",
     "iq3_s grid index missing its high bit from qh", r"iq3_s/read/random_bits_0"),
    ("iqgrid_bugs:iq1_s_delta_sign_inverted", "iq1_s", "dequantize",
     "iq1_s shift sign inverted (+0.125 where qh bit 15 is set)", r"iq1_s/read/random_bits_0"),
    ("iqgrid_bugs:iq1_m_scale_nibbles_reversed", "iq1_m", "dequantize",
     "iq1_m float16 scale nibbles assembled in the wrong order", r"iq1_m/read/random_bits_0"),
    ("iqgrid_bugs:iq1_m_one_scale_per_sub_block", "iq1_m", "dequantize",
     "iq1_m second-half 3-bit scales ignored (one scale per 32 weights, as iq1_s)", r"iq1_m/read/random_bits_0"),
    ("iqgrid_bugs:iq2_xs_matmul_w_float16", "iq2_xs", "matmul",
     "iq2_xs weights dequantized to float16 without a range check (overflow to inf)", r"iq2_xs/read/max_0"),
]
