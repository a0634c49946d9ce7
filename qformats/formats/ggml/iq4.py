"""iq4_nl and iq4_xs: 4-bit codes into one non-linear table (spec/ggml_iquants.md IQ-1.1, IQ-2, IQ-3).

Both types store, per 32 weights, 4-bit indices into ``kvalues_iq4nl`` (16 signed integers, IQ-1.1)
and scale them: iq4_nl by one float16 ``d`` per 32 weights, iq4_xs by a float16 ``d`` per 256 weights
times a signed 6-bit sub-scale ``ls - 32`` per 32. Decoding is bit-identical to ggml
``dequantize_row_iq4_nl`` / ``dequantize_row_iq4_xs``; encoding to ``quantize_iq4_nl`` /
``quantize_iq4_xs``, which both run ``quantize_row_iq4_nl_impl`` (``ntry = 7``) with and without an
importance vector (IQ-2.5 .. IQ-2.7, IQ-3.5).

Float32 discipline as in ``qformats.formats.ggml.kmachinery_qkx``: every 32-weight group is a column of a
``(32, S)`` array, C's in-order reductions are in-order loops over the 32 rows (``seq_sum``), every
C expression is evaluated with exactly its float32 rounding steps, divisions stay divisions. The 16
candidate scales of the search do not depend on each other's results, so their sums are computed
together on a ``(32, 16, S)`` array; only the choice among them is sequential, as in C.
"""

from __future__ import annotations

import numpy as np

from ...containers.ggml_types import QK_K
from ...numerics import nearest_int
from .kmachinery_qkx import seq_sum
from .base import F32, BlockType, fp16_field

__all__ = ["TYPES", "KVALUES_IQ4NL", "best_index", "unpack_codes", "pack_codes", "xs_sub_scales", "pack_xs_scales",
           "fp16_ggml", "GROUP_MAX_EPS", "NTRY"]

# ggml-common.h `kvalues_iq4nl` (int8_t[16]), ggml 0.10.1 (llama.cpp 3142f1db); unchanged since
# llama.cpp PR #5590 (2024-02-21, b2189). IQ-1.1.
KVALUES_IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)
_VALUES = KVALUES_IQ4NL.astype(F32)
# A byte of qs holds two codes: its low nibble is weight j, its high nibble weight 16 + j (IQ-2.1). The
# decoder maps bytes to int8 table values with two 256-byte translation tables (bytes.translate: a C loop,
# ~5x faster than a NumPy gather with uint8 indices) and interleaves the two 16-byte halves of each
# 32-weight group as 16-byte items (a complex128 view: copied as bits, never as numbers).
_LOW_VALUE = KVALUES_IQ4NL.astype(np.int8)[np.arange(256) & 15].tobytes()
_HIGH_VALUE = KVALUES_IQ4NL.astype(np.int8)[np.arange(256) >> 4].tobytes()
_HALF = np.complex128                  # 16 bytes: one half-group of int8 values

QK4_NL = 32                                   # ggml-common.h
NL_BYTES = 2 + QK4_NL // 2                    # d, qs[16]                               = 18
XS_BYTES = 2 + 2 + QK_K // 64 + QK_K // 2     # d, scales_h, scales_l[4], qs[128]       = 136
XS_SCALES_H, XS_SCALES_L, XS_QS = 2, 4, 8     # byte offsets in block_iq4_xs
GROUP_MAX_EPS = F32(1e-15)                    # ggml-quants.c `#define GROUP_MAX_EPS 1e-15f`
NTRY = 7                                      # quantize_iq4_nl / quantize_iq4_xs pass ntry = 7
_CHUNK_GROUPS = 1024                          # 32-weight groups per encoder pass: (32, 16, S) stays in cache

# ---------------------------------------------------------------------------------------------
# bit fields
# ---------------------------------------------------------------------------------------------
#
# 16 code bytes per 32 weights (iq4_nl qs[16]; iq4_xs qs[16 ib .. 16 ib + 15] for group ib):
#
#   qs[j] = [ q[16 + j] : bits 7..4 ][ q[j] : bits 3..0 ]        j = 0..15
#
# The low nibbles are weights 0..15, the high nibbles weights 16..31 (not neighbouring pairs).


def unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(..., 16) uint8 -> (..., 32) codes 0..15 in weight order (IQ-2.1)."""
    return np.concatenate([qs & 15, qs >> 4], axis=-1)


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """(..., 32) codes 0..15 -> (..., 16) uint8: ``q[j] | q[16 + j] << 4``."""
    c = np.asarray(codes, np.uint8)
    return c[..., :16] | (c[..., 16:] << 4)


# iq4_xs sub-scales: ls[ib] (6 bits, ib = 0..7), low bits on the right (IQ-3.2):
#
#   scales_l[k] = [ ls[2k+1] bits 3..0 ][ ls[2k] bits 3..0 ]          k = 0..3
#   scales_h    = [ls7 5:4][ls6 5:4][ls5 5:4][ls4 5:4][ls3 5:4][ls2 5:4][ls1 5:4][ls0 5:4]   (u16 LE)
#                  bits 15..14                                               bits 1..0


def xs_sub_scales(blk: np.ndarray) -> np.ndarray:
    """(nb, 136) iq4_xs blocks -> (nb, 8) int32 ``ls`` in 0..63 (add ``- 32`` for the sub-scale)."""
    h = np.ascontiguousarray(blk[:, XS_SCALES_H:XS_SCALES_L]).view("<u2").astype(np.int32)    # (nb, 1)
    lo = blk[:, XS_SCALES_L:XS_QS].astype(np.int32)
    low = np.stack([lo & 15, lo >> 4], axis=-1).reshape(-1, 8)                              # ib = 2k, 2k+1
    return low | (((h >> (2 * np.arange(8))) & 3) << 4)


def pack_xs_scales(ls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, 8) ints 0..63 -> (scales_h (B,) uint16, scales_l (B, 4) uint8)."""
    ls = np.asarray(ls, np.int32)
    scales_l = ((ls[:, 0::2] & 15) | ((ls[:, 1::2] & 15) << 4)).astype(np.uint8)
    scales_h = np.zeros(ls.shape[0], np.int32)
    for ib in range(8):
        scales_h |= (ls[:, ib] >> 4) << (2 * ib)
    return scales_h.astype(np.uint16), scales_l


def fp16_ggml(v: np.ndarray) -> np.ndarray:
    """``GGML_FP32_TO_FP16``: round to nearest even (NumPy agrees), and every NaN to ``sign | 0x7E00``
    (ggml drops the payload; NumPy keeps its top bits). uint16 bits."""
    v = np.asarray(v, F32)
    with np.errstate(over="ignore"):                   # overflow to inf is the defined result
        h = v.astype("<f2").view(np.uint16)
    nan = (v.view(np.uint32) >> 16).astype(np.uint16) & 0x8000 | 0x7E00
    return np.where(np.isnan(v), nan, h).astype(np.uint16)


# ---------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------


def _table_values(qs: np.ndarray) -> np.ndarray:
    """(groups, 16) qs bytes -> (groups, 32) float32 table values in weight order (exact: small integers)."""
    raw = np.ascontiguousarray(qs).tobytes()
    halves = np.empty((qs.shape[0], 2), _HALF)
    halves[:, 0] = np.frombuffer(raw.translate(_LOW_VALUE), _HALF)
    halves[:, 1] = np.frombuffer(raw.translate(_HIGH_VALUE), _HALF)
    return halves.view(np.int8).reshape(qs.shape[0], 32).astype(F32)


def _decode_nl(blk: np.ndarray) -> np.ndarray:
    """``y[i] = fp32(d) * kvalues_iq4nl[q[i]]``: one float32 op, exact (IQ-2.2)."""
    out = _table_values(blk[:, 2:NL_BYTES])
    return np.multiply(out, fp16_field(blk, 0), out=out)


def _decode_xs(blk: np.ndarray) -> np.ndarray:
    """``dl = fp32(d) * (ls - 32)``; ``y = dl * kvalues_iq4nl[q]``: two float32 ops, both exact (IQ-3.3)."""
    nb = blk.shape[0]
    dl = fp16_field(blk, 0) * (xs_sub_scales(blk) - 32).astype(F32)                  # (nb, 8)
    q = _table_values(blk[:, XS_QS:].reshape(nb * 8, 16))                             # (nb * 8, 32)
    return np.multiply(q, dl.reshape(nb * 8, 1), out=q).reshape(nb, QK_K)


def _d_field(blk: np.ndarray) -> dict[str, np.ndarray]:
    return {"d": fp16_field(blk, 0)}


# ---------------------------------------------------------------------------------------------
# nearest table value: ggml best_index_int8(16, kvalues_iq4nl, x)  (IQ-2.4)
# ---------------------------------------------------------------------------------------------
#
# C: x <= -127 -> 0; x >= 113 -> 15; else a bisection ends with val[mu-1] <= x < val[mu] and the
# answer is `x - val[mu-1] < val[mu] - x ? mu-1 : mu`, two float32 subtractions (a tie goes up). A
# NaN fails every comparison and gets 15. Both rounded differences are monotone in x, so within each
# pair the answer switches once, and it switches exactly at the midpoint (val[i-1] + val[i]) / 2 (C's
# test is true just below each midpoint and false at it: tests/ggml/test_iq4.py). The midpoints are
# multiples of 1/2, so best_index_int8(x) = #{i : x >= midpoint_i} is constant on every half-unit
# cell [k/2, (k+1)/2): one table lookup by floor(2x). Clamping x to [-128, 114] first (fmin: a NaN
# becomes 114) keeps the lookup in range and changes no answer.

_MIDPOINTS = (_VALUES[1:] + _VALUES[:-1]) / F32(2)
_CELL_LO, _CELL_HI = -256, 228                                  # floor(2x) for x in [-128, 114]
_CELL_INDEX = np.searchsorted(_MIDPOINTS, np.arange(_CELL_LO, _CELL_HI + 1) / 2, side="right")
_CELL_VALUE = _VALUES[_CELL_INDEX]
_CELL_INDEX = _CELL_INDEX.astype(np.uint8)


def _cells(al: np.ndarray) -> np.ndarray:
    """floor(2 * clamp(al, -128, 114)) - _CELL_LO as intp: the cell of each value."""
    c = np.fmin(al, F32(114))
    np.maximum(c, F32(-128), out=c)
    c *= F32(2)                                                  # exact
    np.floor(c, out=c)
    k = c.astype(np.intp)
    k -= _CELL_LO
    return k


def best_index(al: np.ndarray) -> np.ndarray:
    """ggml ``best_index_int8(16, kvalues_iq4nl, al)`` elementwise: uint8 codes 0..15."""
    return _CELL_INDEX[_cells(al)]


def _nearest_value(al: np.ndarray) -> np.ndarray:
    """``kvalues_iq4nl[best_index_int8(16, kvalues_iq4nl, al)]`` as float32."""
    return _CELL_VALUE[_cells(al)]


# ---------------------------------------------------------------------------------------------
# encoder: quantize_row_iq4_nl_impl, ntry = 7  (IQ-2.5 .. IQ-2.7, IQ-3.5)
# ---------------------------------------------------------------------------------------------


def _group_weights(x: np.ndarray, qw: np.ndarray | None, sigma2: np.ndarray | None) -> np.ndarray:
    """``weight[j]``: ``x*x`` without an importance vector, else ``qw * sqrtf(sigma2 + x*x)`` (IQ-2.6)."""
    if qw is None:
        return x * x
    return qw * np.sqrt(sigma2 + x * x)


def _group_scales(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The scale search of one 32-weight group per column: (32, S) x and weights -> (S,) float32 ``d``.

    ``amax``/``max``: the first element of largest |x| (strict ``>``, a NaN never wins); groups with
    ``amax < 1e-15`` get 0. Trial 0 uses ``id = 1 / (-max / -127)``, trials 1..15 ``id = (itry - 127) /
    max`` for itry = -7..7. Each trial maps ``id * x`` to the nearest table value ``q`` and forms
    ``sumqx = sum (w*q)*x``, ``sumq2 = sum (w*q)*q`` in order (IQ-2.5).
    """
    amax = np.zeros(x.shape[1], F32)
    mx = np.zeros(x.shape[1], F32)
    for j in range(x.shape[0]):
        ax = np.abs(x[j])
        wins = ax > amax
        amax = np.where(wins, ax, amax)
        mx = np.where(wins, x[j], mx)

    ids = np.empty((16,) + mx.shape, F32)
    ids[0] = F32(1) / (-mx / F32(_VALUES[0]))                        # d = -max/values[0]; id = 1/d
    ids[1:] = (np.arange(-NTRY, NTRY + 1, dtype=F32)[:, None] + _VALUES[0]) / mx    # (itry + values[0])/max
    q = _nearest_value(x[:, None, :] * ids[None])                     # (32, 16, S): id*xb[j]
    wq = w[:, None, :] * q
    sumqx = seq_sum(wq[j] * x[j] for j in range(x.shape[0]))          # (16, S)
    sumq2 = seq_sum(wq[j] * q[j] for j in range(x.shape[0]))

    d = np.where(sumq2[0] > 0, sumqx[0] / sumq2[0], F32(0))
    best = d * sumqx[0]
    for t in range(1, 16):
        sx, s2 = sumqx[t], sumq2[t]
        better = (s2 > 0) & (sx * sx > best * s2)
        d = np.where(better, sx / s2, d)
        best = np.where(better, d * sx, best)
    return np.where(amax < GROUP_MAX_EPS, F32(0), d)


def _encode_nl(x: np.ndarray, qw: np.ndarray | None) -> np.ndarray:
    """(32, S) groups (one iq4_nl block each) -> (S, 18) blocks (IQ-2.7)."""
    sigma2 = None
    if qw is not None:
        sigma2 = seq_sum(x[j] * x[j] for j in range(QK4_NL)) * F32(2.0 / QK4_NL)
    d = _group_scales(x, _group_weights(x, qw, sigma2))
    inv = np.where(d != 0, F32(1) / d, F32(0))                        # id = scales[0] ? 1/scales[0] : 0
    codes = best_index(inv * x)                                        # (32, S)
    out = np.empty((x.shape[1], NL_BYTES), np.uint8)
    out[:, 0:2] = fp16_ggml(d)[:, None].view(np.uint8)
    out[:, 2:] = pack_codes(codes.T)
    return out


def _encode_xs(x: np.ndarray, qw: np.ndarray | None) -> np.ndarray:
    """(32, 8B) groups, column 8b + ib = group ib of super-block b -> (B, 136) blocks (IQ-3.5)."""
    nblk = x.shape[1] // 8
    sigma2 = None
    if qw is not None:     # over the 256 weights in order: group 0's 32, then group 1's, ...
        xg = x.reshape(32, nblk, 8)
        s = seq_sum(xg[j, :, ib] * xg[j, :, ib] for ib in range(8) for j in range(32))
        sigma2 = np.repeat(s * F32(2.0 / QK_K), 8)
    scales = _group_scales(x, _group_weights(x, qw, sigma2)).reshape(nblk, 8)

    amax = np.zeros(nblk, F32)
    max_scale = np.zeros(nblk, F32)
    for ib in range(8):                                                 # the scale of largest |d|, first wins
        a = np.abs(scales[:, ib])
        wins = a > amax
        amax = np.where(wins, a, amax)
        max_scale = np.where(wins, scales[:, ib], max_scale)
    d = -max_scale / F32(32)
    inv = np.where(d != 0, F32(1) / d, F32(0))
    ll = np.clip(nearest_int(inv[:, None] * scales), -32, 31)          # MAX(-32, MIN(31, l))
    dl = d[:, None] * ll.astype(F32)                                    # float32 d, not the stored fp16
    idl = np.where(dl != 0, F32(1) / dl, F32(0)).reshape(-1)
    codes = best_index(idl * x).T.reshape(nblk, 8, 32)

    scales_h, scales_l = pack_xs_scales(ll + 32)
    out = np.empty((nblk, XS_BYTES), np.uint8)
    out[:, 0:2] = fp16_ggml(d)[:, None].view(np.uint8)
    out[:, XS_SCALES_H:XS_SCALES_L] = scales_h.astype("<u2")[:, None].view(np.uint8)
    out[:, XS_SCALES_L:XS_QS] = scales_l
    out[:, XS_QS:] = pack_codes(codes).reshape(nblk, 128)
    return out


def _quantizer(block_size: int, type_size: int, encode):
    """float32 (rows, n) [+ importance (n,)] -> uint8 (rows, n // block_size * type_size), in chunks
    of about _CHUNK_GROUPS groups (whole blocks) so the work arrays stay in cache."""
    groups_per_block = block_size // 32

    def quantize(x: np.ndarray, importance: np.ndarray | None) -> np.ndarray:
        rows, n = x.shape
        cols = np.ascontiguousarray(x.reshape(-1, 32).T)               # (32, all groups)
        qw_cols = None if importance is None else np.ascontiguousarray(importance.reshape(-1, 32).T)
        per_row = n // 32
        total = cols.shape[1]
        step = max(1, _CHUNK_GROUPS // groups_per_block) * groups_per_block
        out = np.empty((total // groups_per_block, type_size), np.uint8)
        with np.errstate(all="ignore"):
            for start in range(0, total, step):
                part = slice(start, min(start + step, total))
                qw = None
                if qw_cols is not None:                                 # the same vector for every row
                    qw = qw_cols[:, np.arange(part.start, part.stop) % per_row]
                out[part.start // groups_per_block:part.stop // groups_per_block] = encode(cols[:, part], qw)
        return out.reshape(rows, n // block_size * type_size)

    return quantize


TYPES = (
    # d is the signed result of the search (the trials with id < 0 give d < 0): no never_negative.
    BlockType("iq4_nl", "IQ-2", _decode_nl, _d_field, fp16_offsets={"d": 0},
              quantize=_quantizer(QK4_NL, NL_BYTES, _encode_nl), importance=True, bits=4, group=32),
    BlockType("iq4_xs", "IQ-3", _decode_xs, _d_field, fp16_offsets={"d": 0},
              quantize=_quantizer(QK_K, XS_BYTES, _encode_xs), importance=True, bits=4, group=32),
)
assert tuple(bt.type_size for bt in TYPES) == (NL_BYTES, XS_BYTES)      # containers/ggml_types.py agrees
assert tuple(bt.block_size for bt in TYPES) == (QK4_NL, QK_K)
