"""The grid i-quants: iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m (spec/ggml_iquants.md IQ-4 .. IQ-10).

Each 256-weight block is 8 sub-blocks of 32 weights; a sub-block is 4 groups of 8 weights (two grid
entries of 4 for the iq3 types). A group stores an index into a fixed grid of magnitude vectors
(``iq_tables.py``, IQ-1.2) and, for the iq2/iq3 types, a sign byte (IQ-1.3); iq1_s/iq1_m grids hold
signed values {-1, 0, 1} and a per-group shift of +-0.125 (IQ-1.4). Decoding is a table gather and
two float32 multiplications per weight, in ggml's order:

    iq2_*, iq3_xxs:  y = s(db * float(g))         db = (d * (0.5 + ls)) * 0.25 (0.5 for iq3_xxs)
    iq3_s:           y = s(db * float(g))         db = d * float(1 + 2*ls)
    iq1_s, iq1_m:    y = dl * (float(g) + delta)    dl = d * float(2*ls + 1)

C writes the sign as ``* (signs & kmask ? -1.f : 1.f)``; GCC compiles that to a flip of the sign bit
(``xorps``), which differs from a multiplication only for NaN (IQ-1.3), so ``s`` is applied here as
an XOR of the float32 sign bit. ``g + delta`` is exact, so it is tabulated.

ggml's grid encoders (``quantize_iq2_xxs`` ... ``quantize_iq1_m``) are informative here (IQ-4.4 and
the like): they search neighbour tables built at run time by ``ggml_quantize_init`` and iq2_xxs,
iq2_xs and iq1_s refuse to run without an importance matrix.
"""

from __future__ import annotations

import numpy as np

from . import iq_tables as T
from .base import F32, BlockType, fp16_field

__all__ = ["TYPES", "GRIDS", "SIGNS8", "SIGNS7", "IQ1_GRID_DELTA", "iq1m_scale_bits",
           "decode_iq2_xxs", "decode_iq2_xs", "decode_iq2_s", "decode_iq3_xxs", "decode_iq3_s",
           "decode_iq1_s", "decode_iq1_m"]


def _grid(table: tuple[int, ...], width: int, signed: bool = False) -> np.ndarray:
    """(entries, width) float32: byte j of each little-endian entry, as ``(const uint8_t *)(grid + i)``."""
    raw = np.array(table, dtype=np.uint64).astype(f"<u{width}").view(np.int8 if signed else np.uint8)
    return raw.reshape(len(table), width).astype(F32)


GRIDS = {
    "iq2xxs": _grid(T.IQ2XXS_GRID, 8), "iq2xs": _grid(T.IQ2XS_GRID, 8), "iq2s": _grid(T.IQ2S_GRID, 8),
    "iq3xxs": _grid(T.IQ3XXS_GRID, 4), "iq3s": _grid(T.IQ3S_GRID, 4), "iq1s": _grid(T.IQ1S_GRID, 8, signed=True),
}
for _g in GRIDS.values():
    _g.flags.writeable = False

# SIGNS8[b, j] = the float32 sign bit 0x80000000 where bit j of sign byte b is set (kmask_iq2xs[j] = 1 << j),
# else 0: XOR-ed into the bits of db * g (IQ-1.3).
_KMASK = np.array(T.KMASK_IQ2XS, np.uint8)
SIGNS8 = np.where(np.arange(256, dtype=np.uint8)[:, None] & _KMASK, np.uint32(0x80000000), np.uint32(0))
SIGNS8 = SIGNS8.astype(np.uint32)
# SIGNS7[i] = SIGNS8[ksigns_iq2xs[i]]: a 7-bit sign index, its eighth sign the parity (IQ-1.3).
SIGNS7 = SIGNS8[np.array(T.KSIGNS_IQ2XS, np.uint8)]
# IQ1_GRID_DELTA[i | neg << 11, j] = float(iq1s_grid[i][j]) + (neg ? -0.125f : 0.125f), exact (IQ-1.4).
IQ1_GRID_DELTA = np.concatenate([GRIDS["iq1s"] + F32(T.IQ1S_DELTA), GRIDS["iq1s"] - F32(T.IQ1S_DELTA)])
for _t in (SIGNS8, SIGNS7, IQ1_GRID_DELTA):
    _t.flags.writeable = False

_SHIFT7 = np.array([0, 7, 14, 21], np.uint32)       # sign index l of a 32-bit word: bits 7l .. 7l+6
# iq1_m: the 3-bit scale of half h of sub-block ib is bits 6*(ib%2) + 3h of scale word ib/2
_IQ1M_WORD = np.arange(8) // 2
_IQ1M_SHIFT = (6 * (np.arange(8) % 2)[:, None] + 3 * np.arange(2)[None, :]).astype(np.uint16)


def _rows(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``table[idx]`` as one flat gather (np.take is many times faster than fancy indexing here)."""
    return np.take(table, idx.ravel(), axis=0)


def _u16(blk: np.ndarray, start: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(blk[:, start:start + 2 * count]).view("<u2")


def _u32(blk: np.ndarray, start: int, count: int) -> np.ndarray:
    return np.ascontiguousarray(blk[:, start:start + 4 * count]).view("<u4")


def _nibble_scales(scales: np.ndarray) -> np.ndarray:
    """(nb, 8) scale bytes -> (nb, 8, 2) float32 ``ls``: low nibble, high nibble."""
    return np.stack([scales & 15, scales >> 4], axis=-1).astype(F32)


def _quarter_scale(d: np.ndarray, ls: np.ndarray, last: F32) -> np.ndarray:
    """``d * (0.5f + ls) * last``: three float32 ops in C order; ``d`` (nb, 1), ``ls`` (nb, ...)."""
    t = F32(0.5) + ls.astype(F32)
    d = d.reshape(d.shape[:1] + (1,) * (ls.ndim - 1))
    return (d * t) * last


def _signed_grid(db: np.ndarray, grid: np.ndarray, idx: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """``s(db * g)``: db (nb, k) per run of 256/k weights, grid indices ``idx`` and sign bits in weight
    order -> (nb, 256) float32."""
    y = _rows(grid, idx).reshape(len(db), db.shape[1], -1)
    y *= db[:, :, None]
    y.view(np.uint32)[...] ^= signs.reshape(y.shape)    # the sign bit flipped, NaN included (IQ-1.3)
    return y.reshape(len(db), 256)


# ---------------------------------------------------------------------------------------------
# iq2_xxs: 66 bytes = 2 + QK_K/8 * 2                                          (IQ-4.1)
#   d fp16 | 8 x (aux0 u32, aux1 u32)
#   aux0: [idx3 8][idx2 8][idx1 8][idx0 8]          grid indices of groups 0..3 (bytes 0..3)
#   aux1: [ls 4][sgn3 7][sgn2 7][sgn1 7][sgn0 7]    bit 28..31 scale, bits 7l..7l+6 sign index l
# ---------------------------------------------------------------------------------------------


def decode_iq2_xxs(blk: np.ndarray) -> np.ndarray:
    """IQ-4.2: ``db = d * (0.5f + (aux1 >> 28)) * 0.25f``; ``y = s_j(db * grid[j])`` (IQ-1.3)."""
    d = fp16_field(blk, 0)
    words = _u32(blk, 2, 16).reshape(-1, 8, 2)
    idx = blk[:, 2:66].reshape(-1, 8, 8)[:, :, :4]
    aux1 = words[:, :, 1]
    db = _quarter_scale(d, aux1 >> 28, F32(0.25))
    signs = _rows(SIGNS7, (aux1[:, :, None] >> _SHIFT7) & 127)
    return _signed_grid(db, GRIDS["iq2xxs"], idx, signs)


# ---------------------------------------------------------------------------------------------
# iq2_xs: 74 bytes = 2 + QK_K/8 * 2 + QK_K/32                                  (IQ-5.1)
#   d fp16 | qs u16[32] | scales u8[8]
#   qs[4ib + l]:  [sgn 7][idx 9]        grid index (0..511) and 7-bit sign index of group l
#   scales[ib]:   [ls_hi 4][ls_lo 4]    groups 0, 1 use ls_lo, groups 2, 3 ls_hi
# ---------------------------------------------------------------------------------------------


def decode_iq2_xs(blk: np.ndarray) -> np.ndarray:
    """IQ-5.2: ``db[h] = d * (0.5f + ls_h) * 0.25f``; ``y = s_j(db[l/2] * grid[j])`` (IQ-1.3)."""
    d = fp16_field(blk, 0)
    qs = _u16(blk, 2, 32).reshape(-1, 8, 4)
    db = _quarter_scale(d, _nibble_scales(blk[:, 66:74]), F32(0.25)).reshape(-1, 16)
    return _signed_grid(db, GRIDS["iq2xs"], qs & 511, _rows(SIGNS7, qs >> 9))


# ---------------------------------------------------------------------------------------------
# iq2_s: 82 bytes = 2 + QK_K/4 + QK_K/16                                        (IQ-6.1)
#   d fp16 | qs u8[32] | signs u8[32] | qh u8[8] | scales u8[8]
#   index of group l of sub-block ib = qs[4ib + l] | ((qh[ib] >> 2l) & 3) << 8    (0..1023)
#   qh[ib]: [hi3 2][hi2 2][hi1 2][hi0 2]       sign byte signs[4ib + l], bit j = weight j
# ---------------------------------------------------------------------------------------------


def decode_iq2_s(blk: np.ndarray) -> np.ndarray:
    """IQ-6.2: ``db[h] = d * (0.5f + ls_h) * 0.25f``; ``y = s_j(db[l/2] * grid[j])`` (IQ-1.3)."""
    d = fp16_field(blk, 0)
    qh = blk[:, 66:74].astype(np.uint16)[:, :, None]
    idx = blk[:, 2:34].reshape(-1, 8, 4) | (((qh >> (2 * np.arange(4, dtype=np.uint16))) & 3) << 8)
    db = _quarter_scale(d, _nibble_scales(blk[:, 74:82]), F32(0.25)).reshape(-1, 16)
    return _signed_grid(db, GRIDS["iq2s"], idx, _rows(SIGNS8, blk[:, 34:66]))


# ---------------------------------------------------------------------------------------------
# iq3_xxs: 98 bytes = 2 + 3 * QK_K/8                                           (IQ-7.1)
#   d fp16 | qs u8[64] | scales_and_signs u32[8]
#   qs[8ib + 2l], qs[8ib + 2l + 1]: grid indices (0..255) of weights 0..3, 4..7 of group l
#   scales_and_signs[ib]: [ls 4][sgn3 7][sgn2 7][sgn1 7][sgn0 7]
# ---------------------------------------------------------------------------------------------


def decode_iq3_xxs(blk: np.ndarray) -> np.ndarray:
    """IQ-7.2: ``db = d * (0.5f + (aux >> 28)) * 0.5f``; ``y = s_j(db * grid[j])`` (IQ-1.3)."""
    d = fp16_field(blk, 0)
    aux = _u32(blk, 66, 8)
    db = _quarter_scale(d, aux >> 28, F32(0.5))
    signs = _rows(SIGNS7, (aux[:, :, None] >> _SHIFT7) & 127)
    idx = blk[:, 2:66].reshape(-1, 8, 4, 2)
    return _signed_grid(db, GRIDS["iq3xxs"], idx, signs)


# ---------------------------------------------------------------------------------------------
# iq3_s: 110 bytes = 2 + 13 * QK_K/32 + QK_K/64                                (IQ-8.1)
#   d fp16 | qs u8[64] | qh u8[8] | signs u8[32] | scales u8[4]
#   index k (0..7) of sub-block ib = qs[8ib + k] | ((qh[ib] >> k) & 1) << 8     (0..511)
#   sign byte signs[4ib + l]; scales[ib/2]: [ls of ib odd 4][ls of ib even 4]
# ---------------------------------------------------------------------------------------------


def decode_iq3_s(blk: np.ndarray) -> np.ndarray:
    """IQ-8.2: ``db = d * (1 + 2*ls)`` (the int converted to float); ``y = s_j(db * grid[j])`` (IQ-1.3)."""
    d = fp16_field(blk, 0)
    qh = blk[:, 66:74].astype(np.uint16)[:, :, None]
    idx = blk[:, 2:66].reshape(-1, 8, 8) | (((qh >> np.arange(8, dtype=np.uint16)) & 1) << 8)
    ls = _nibble_scales(blk[:, 106:110]).reshape(-1, 8)
    db = d * (F32(1.0) + F32(2.0) * ls)             # 1 + 2*ls is an exact small integer, as C's int
    return _signed_grid(db, GRIDS["iq3s"], idx, _rows(SIGNS8, blk[:, 74:106]))


# ---------------------------------------------------------------------------------------------
# iq1_s: 50 bytes = 2 + QK_K/8 + QK_K/16                                        (IQ-9.1)
#   d fp16 | qs u8[32] | qh u16[8]
#   qh[ib]: [neg 1][ls 3][hi3 3][hi2 3][hi1 3][hi0 3]
#   index of group l = qs[4ib + l] | hi_l << 8 (0..2047); delta = neg ? -0.125f : +0.125f
# ---------------------------------------------------------------------------------------------


def _iq1_values(dl: np.ndarray, idx: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """``dl * (grid[j] + delta)``: dl (nb, k) per run of 256/k weights, idx and neg (nb, 32) -> (nb, 256)."""
    y = _rows(IQ1_GRID_DELTA, idx.astype(np.intp) | (neg.astype(np.intp) << 11)).reshape(len(dl), dl.shape[1], -1)
    y *= dl[:, :, None]                         # dl * (g + delta): a product, so the operand order is moot
    return y.reshape(len(dl), 256)


def decode_iq1_s(blk: np.ndarray) -> np.ndarray:
    """IQ-9.2: ``dl = d * (2*ls + 1)``; ``y = dl * (grid[j] + delta)``."""
    d = fp16_field(blk, 0)
    qh = _u16(blk, 34, 8)
    dl = d * (F32(2.0) * ((qh >> 12) & 7).astype(F32) + F32(1.0))      # the int 2*ls + 1, exact
    hi = (qh[:, :, None] >> (3 * np.arange(4, dtype=np.uint16))) & 7
    idx = blk[:, 2:34].reshape(-1, 8, 4) | (hi << 8)
    neg = np.broadcast_to((qh >> 15)[:, :, None], idx.shape)
    return _iq1_values(dl, idx, neg)


# ---------------------------------------------------------------------------------------------
# iq1_m: 56 bytes = QK_K/8 + QK_K/16 + QK_K/32, no d field                        (IQ-10.1)
#   qs u8[32] | qh u8[16] | sc u16[4]
#   qh[2ib + h]: [neg 1][hi 3][neg 1][hi 3]   low nibble: group 2h, high nibble: group 2h + 1
#   sc[w]: [d nibble w 4][ls 3][ls 3][ls 3][ls 3]    ls of sub-block 2w+i, half h at bits 6i + 3h
#   d (fp16 bits) = sc[0] >> 12 | sc[1] >> 12 << 4 | sc[2] >> 12 << 8 | sc[3] >> 12 << 12
# ---------------------------------------------------------------------------------------------


def iq1m_scale_bits(blk: np.ndarray) -> np.ndarray:
    """(nb, 1) uint16: iq1_m's fp16 scale reassembled from the top nibbles of its 4 scale words (IQ-10.1)."""
    sc = _u16(blk, 48, 4)
    bits = (sc[:, 0] >> 12) | ((sc[:, 1] >> 8) & 0x00F0) | ((sc[:, 2] >> 4) & 0x0F00) | (sc[:, 3] & 0xF000)
    return bits.astype(np.uint16)[:, None]


def _iq1m_d(blk: np.ndarray) -> np.ndarray:
    return iq1m_scale_bits(blk).view(np.float16).astype(F32)


def decode_iq1_m(blk: np.ndarray) -> np.ndarray:
    """IQ-10.2: ``dl = d * (2*ls + 1)`` per half sub-block; ``y = dl * (grid[j] + delta)``."""
    d = _iq1m_d(blk)
    sc = _u16(blk, 48, 4)
    ls = (sc[:, _IQ1M_WORD, None] >> _IQ1M_SHIFT) & 7                                # (nb, ib, half)
    dl = d * (F32(2.0) * ls.reshape(-1, 16).astype(F32) + F32(1.0))                  # the int 2*ls + 1, exact
    nib = blk[:, 32:48].reshape(-1, 8, 2, 1) >> np.array([0, 4], np.uint8)           # (nb, ib, h, l%2)
    nib = nib.reshape(-1, 8, 4) & 15
    idx = blk[:, 0:32].reshape(-1, 8, 4).astype(np.uint16) | ((nib & 7).astype(np.uint16) << 8)
    return _iq1_values(dl, idx, nib >> 3)


def _iq1m_set_scale(blk: np.ndarray, values: np.ndarray) -> None:
    """Write float16 ``values`` as iq1_m's scale: nibble w of the bits into the top of scale word w (IQ-10.1)."""
    bits = np.asarray(values, np.float16).view(np.uint16).astype(np.uint16)
    words = np.ascontiguousarray(blk[:, 48:56]).view("<u2")
    for w in range(4):
        words[:, w] = (words[:, w] & 0x0FFF) | (((bits >> (4 * w)) & 0xF) << 12)
    blk[:, 48:56] = words.view(np.uint8)


def _d(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0)}


def _iq1m_scales(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": _iq1m_d(blk)}


# never_negative: d = max_scale / 31 (or / 15) times a positive fudge factor, max_scale >= 0 under
# GGML_ASSERT(scale >= 0), in every encoder but iq1_m's, whose d is a free least-squares refit
# sumqx_f / sumq2_f with no sign guard (IQ-10.3).
_GRID = dict(never_negative=("d",), fp16_offsets={"d": 0})
TYPES = (
    BlockType("iq2_xxs", "IQ-4", decode_iq2_xxs, _d, requires_importance=True, **_GRID, bits=2, group=32),
    BlockType("iq2_xs", "IQ-5", decode_iq2_xs, _d, requires_importance=True, **_GRID, bits=2, group=16),
    BlockType("iq2_s", "IQ-6", decode_iq2_s, _d, **_GRID, bits=2, group=16),
    BlockType("iq3_xxs", "IQ-7", decode_iq3_xxs, _d, **_GRID, bits=3, group=32),
    BlockType("iq3_s", "IQ-8", decode_iq3_s, _d, **_GRID, bits=3, group=32),
    BlockType("iq1_s", "IQ-9", decode_iq1_s, _d, requires_importance=True, **_GRID, bits=1, group=32),
    BlockType("iq1_m", "IQ-10", decode_iq1_m, _iq1m_scales, set_scale=_iq1m_set_scale, bits=1, group=16),
)
