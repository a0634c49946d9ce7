"""q4_K decode and reference encode, bit-identical to llama.cpp (spec/q4_k.md, Q4K-3 .. Q4K-4).

``dequantize`` reproduces ggml ``dequantize_row_q4_K``; ``quantize`` reproduces
``quantize_row_q4_K_ref`` (and, with ``importance=``, ``quantize_row_q4_K_impl``, see
``importance.py``) byte for byte under IEEE float32 arithmetic without contraction.

How the encoder stays bit-exact while vectorized: every sub-block (32 weights) is a column
of a ``(32, S)`` float32 array, so one NumPy operation applies the same float32 operation
to all S sub-blocks at once. Reductions that C performs as in-order loops are in-order
loops over the 32 rows here (never ``np.sum``/``np.dot``, whose pairwise or BLAS order
rounds differently). NumPy never fuses multiply-adds, and every operand is float32, so
each C expression is evaluated with exactly its rounding steps. Divisions stay divisions.
"""

from __future__ import annotations

import numpy as np

from ...numerics import nearest_int
from ...tensors import as_array
from .checks import check_blocks, check_input
from .layout import BLOCK_BYTES, N_SUB_BLOCKS, QK_K, QS_OFFSET, SCALES_OFFSET, SUB_BLOCK

__all__ = ["dequantize", "quantize", "unpack_scales", "pack_scales", "unpack_codes", "pack_codes", "encode_chunks"]

F32 = np.float32
_CHUNK_BLOCKS = 512  # super-blocks per encoder pass: keeps the (32, 4096) work arrays in cache (~1.6x faster)

# ---------------------------------------------------------------------------------------------
# bit fields
# ---------------------------------------------------------------------------------------------
#
# scales[12], sub-block j = 0..7, low bits on the right (ggml get_scale_min_k4):
#
#   byte 0..3  : [sc4..7 bits 5:4][sc0..3 bits 5:0]     byte k   = sc[k] | (sc[k+4] >> 4) << 6
#   byte 4..7  : [m4..7  bits 5:4][m0..3  bits 5:0]     byte 4+k = m[k]  | (m[k+4]  >> 4) << 6
#   byte 8..11 : [m4..7  bits 3:0][sc4..7 bits 3:0]     byte 8+k = (sc[k+4] & 15) | (m[k+4] & 15) << 4


def unpack_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., 12) uint8 -> six-bit ``sc`` and ``m``, each (..., 8) uint8 (Q4K-1.4).

    Works on the three little-endian 32-bit words, four sub-blocks per mask operation.
    """
    lead = scales.shape[:-1]
    w = np.ascontiguousarray(scales, np.uint8).reshape(-1, 12).view("<u4")   # (N, 3)
    w0, w1, w2 = w[:, 0], w[:, 1], w[:, 2]
    out = np.empty((w.shape[0], 4), "<u4")
    out[:, 0] = w0 & 0x3F3F3F3F                                              # sc0..3
    out[:, 1] = (w2 & 0x0F0F0F0F) | (((w0 >> 6) & 0x03030303) << 4)          # sc4..7
    out[:, 2] = w1 & 0x3F3F3F3F                                              # m0..3
    out[:, 3] = ((w2 >> 4) & 0x0F0F0F0F) | (((w1 >> 6) & 0x03030303) << 4)   # m4..7
    both = out.view(np.uint8).reshape(lead + (16,))
    return both[..., :8], both[..., 8:]


def pack_scales(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """Pack (..., 8) integer scales and mins into (..., 12) uint8 as the C encoders do.

    The C code assigns ``ls``/``lm`` (uint8) to the low bytes and ORs ``(v >> 4) << 6`` into
    them, so values above 63 (possible on the importance path) keep their stray bits,
    truncated to 8 bits, exactly as uint8 stores do.
    """
    ls = np.asarray(ls).astype(np.int32) & 0xFF
    lm = np.asarray(lm).astype(np.int32) & 0xFF
    out = np.empty(ls.shape[:-1] + (12,), np.int32)
    out[..., 0:4] = ls[..., 0:4] | ((ls[..., 4:8] >> 4) << 6)
    out[..., 4:8] = lm[..., 0:4] | ((lm[..., 4:8] >> 4) << 6)
    out[..., 8:12] = (ls[..., 4:8] & 0xF) | ((lm[..., 4:8] & 0xF) << 4)
    return (out & 0xFF).astype(np.uint8)


# qs[128]: chunk c = 0..3 of 64 weights uses qs[32c .. 32c+31]:
#
#   qs[32c + l] = code(64c + l) | code(64c + 32 + l) << 4        l = 0..31
#                 ^ sub-block 2c, low nibble   ^ sub-block 2c+1, high nibble


def unpack_codes(qs: np.ndarray) -> np.ndarray:
    """(..., 128) uint8 -> (..., 256) uint8 codes in weight order (Q4K-1.5)."""
    q = qs.reshape(qs.shape[:-1] + (4, 1, 32))
    return np.concatenate([q & 15, q >> 4], axis=-2).reshape(qs.shape[:-1] + (QK_K,))


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """(..., 256) codes in 0..15 -> (..., 128) uint8 in llama.cpp nibble order."""
    c = np.asarray(codes).astype(np.uint8).reshape(codes.shape[:-1] + (4, 2, 32))
    return (c[..., 0, :] | (c[..., 1, :] << 4)).reshape(codes.shape[:-1] + (QK_K // 2,))


# ---------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------

_DECODE_CHUNK = 4096  # blocks per pass over the codes: the float32 intermediates stay in cache


def dequantize(blocks, *, strict: bool = False) -> np.ndarray:
    """uint8 ``(rows, n // 256 * 144)`` q4_K blocks -> float32 ``(rows, n)`` (Q4K-3.1).

    Bit-identical to ggml ``dequantize_row_q4_K``: ``y = fp32(d)*sc*q - fp32(dmin)*m``.
    Blocks whose ``d`` or ``dmin`` is inf/NaN are invalid (Q4K-5.4); like llama.cpp the
    formula is still evaluated for them unless ``strict=True``, which rejects them first.
    """
    arr = as_array(blocks, "blocks")
    check_blocks(arr, tensor="blocks", finite=strict)
    rows, nbytes = arr.shape
    nb = rows * (nbytes // BLOCK_BYTES)
    blk = arr.reshape(nb, BLOCK_BYTES)
    dm = np.ascontiguousarray(blk[:, 0:4]).view("<f2").astype(F32)       # (nb, 2): fp32(d), fp32(dmin)
    sc, m = unpack_scales(blk[:, SCALES_OFFSET:QS_OFFSET])
    with np.errstate(invalid="ignore", over="ignore"):  # inf*0 in invalid blocks, as in C
        d_sc = (dm[:, 0:1] * sc.astype(F32)).reshape(nb, 4, 2, 1)        # exact: 11 x 6 bits
        dmin_m = (dm[:, 1:2] * m.astype(F32)).reshape(nb, 4, 2, 1)       # exact
        qs = blk[:, QS_OFFSET:].reshape(nb, 4, 32)                       # (block, chunk, byte)
        out = np.empty((nb, 4, 2, 32), F32)                              # (block, chunk, nibble, l)
        for start in range(0, nb, _DECODE_CHUNK):
            part = slice(start, start + _DECODE_CHUNK)
            q, o = qs[part], out[part]
            o[:, :, 0] = q & 15                 # low nibbles: sub-block 2c
            o[:, :, 1] = q >> 4                 # high nibbles: sub-block 2c+1
            np.multiply(o, d_sc[part], out=o)   # (d*sc)*q: exact
            np.subtract(o, dmin_m[part], out=o)  # the one rounding step
    return out.reshape(rows, nbytes // BLOCK_BYTES * QK_K)


# ---------------------------------------------------------------------------------------------
# shared encoder pieces (also used by importance.py)
# ---------------------------------------------------------------------------------------------


def seq_sum(terms) -> np.ndarray:
    """``acc = 0; for t in terms: acc += t`` in float32, in order (C's reduction loops)."""
    acc = None
    for t in terms:
        acc = F32(0) + t if acc is None else acc + t
    return acc


def clamp_codes(v: np.ndarray, nmax: int) -> np.ndarray:
    """``MAX(0, MIN(nmax, nearest_int(v)))`` as float32 (exact small integers)."""
    return np.clip(nearest_int(v), 0, nmax).astype(F32)


def affine_search(x, w, *, nmax: int, rmin: float, rdelta: float, nstep: int, degenerate_le: bool):
    """ggml ``make_qkx2_quants`` (``degenerate_le=False``) / ``make_qkx3_quants`` (``True``).

    ``x``, ``w``: (32, S) float32, one sub-block per column. Returns ``(scale, the_min, L)``
    with scale and the_min (S,) float32 and L (32, S) float32 codes. See spec Q4K-4.2.
    """
    mn = x[0].copy()
    mx = x[0].copy()
    sum_w = w[0].copy()
    sum_x = sum_w * x[0]
    for i in range(1, x.shape[0]):
        xi = x[i]
        mn = np.where(xi < mn, xi, mn)      # a NaN never wins a comparison, as in C
        mx = np.where(xi > mx, xi, mx)
        sum_w = sum_w + w[i]
        sum_x = sum_x + w[i] * xi
    mn = np.where(mn > 0, F32(0), mn)
    degenerate = (mx <= mn) if degenerate_le else (mx == mn)
    mn0 = mn

    iscale = F32(nmax) / (mx - mn)
    scale = F32(1) / iscale
    L = clamp_codes(iscale * (x - mn), nmax)
    e0 = (scale * L + mn) - x
    best = seq_sum(w * (e0 * e0))

    for step in range(nstep + 1):
        num = (F32(rmin) + F32(rdelta) * F32(step)) + F32(nmax)
        iscale = num / (mx - mn)
        laux = clamp_codes(iscale * (x - mn), nmax)
        wl = w * laux
        sum_l = seq_sum(wl)
        sum_l2 = seq_sum(wl * laux)
        sum_xl = seq_sum(wl * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
        clamp = this_min > 0
        this_min = np.where(clamp, F32(0), this_min)
        this_scale = np.where(clamp, sum_xl / sum_l2, this_scale)
        err = (this_scale * laux + this_min) - x
        cur = seq_sum(w * (err * err))
        better = (D > 0) & (cur < best)
        L = np.where(better, laux, L)
        best = np.where(better, cur, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)   # later trials use the new min (Q4K-4.2 step 5)

    scale = np.where(degenerate, F32(0), scale)
    mn = np.where(degenerate, mn0, mn)
    L = np.where(degenerate, F32(0), L)
    return scale, -mn, L


def finish_blocks(x, L, ls, lm, d, dmin) -> np.ndarray:
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
    out = np.empty((nblk, BLOCK_BYTES), np.uint8)
    out[:, 0:2] = d16.reshape(-1, 1).view(np.uint8)
    out[:, 2:4] = dmin16.reshape(-1, 1).view(np.uint8)
    out[:, SCALES_OFFSET:QS_OFFSET] = packed
    out[:, QS_OFFSET:] = pack_codes(codes)
    return out


def encode_chunks(n_blocks: int, encode) -> np.ndarray:
    """``(n_blocks, 144)`` blocks from ``encode(part)`` run on cache-sized slices of super-blocks.

    Runs of _CHUNK_BLOCKS keep the (32, S) work arrays in cache; it is not a per-block loop.
    0/0, inf-inf etc. are part of the C encoders' behaviour, so float warnings are silenced.
    """
    out = np.empty((n_blocks, BLOCK_BYTES), np.uint8)
    with np.errstate(all="ignore"):
        for start in range(0, n_blocks, _CHUNK_BLOCKS):
            part = slice(start, min(start + _CHUNK_BLOCKS, n_blocks))
            out[part] = encode(part)
    return out


def sub_block_columns(xb: np.ndarray) -> np.ndarray:
    """(B, 256) super-blocks -> (32, B*8) with one sub-block per column."""
    return np.ascontiguousarray(xb.reshape(-1, SUB_BLOCK).T)


def running_max(v: np.ndarray) -> np.ndarray:
    """``m = 0; for j: if (v[j] > m) m = v[j];`` over the last axis (NaN never wins)."""
    acc = np.zeros(v.shape[:-1], F32)
    for j in range(v.shape[-1]):
        acc = np.where(v[..., j] > acc, v[..., j], acc)
    return acc


# ---------------------------------------------------------------------------------------------
# reference encoder
# ---------------------------------------------------------------------------------------------


def _quantize_ref_chunk(xb: np.ndarray) -> np.ndarray:
    """``quantize_row_q4_K_ref`` on (B, 256) float32 -> (B, 144) uint8."""
    nblk = xb.shape[0]
    x = sub_block_columns(xb)
    sum_x2 = seq_sum(x * x)
    av_x = np.sqrt(sum_x2 / F32(32))
    w = av_x + np.abs(x)
    scales, mins, L = affine_search(x, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20, degenerate_le=False)
    scales = scales.reshape(nblk, N_SUB_BLOCKS)
    mins = mins.reshape(nblk, N_SUB_BLOCKS)
    max_scale = running_max(scales)
    max_min = running_max(mins)
    inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0))
    inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0))
    # `uint8_t ls = nearest_int(...)` truncates mod 256 before `MIN(63, ls)`
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    return finish_blocks(x, L, ls, lm, max_scale / F32(63), max_min / F32(63))


def quantize(x, importance=None) -> np.ndarray:
    """float32 ``(rows, n)``, ``n % 256 == 0`` -> uint8 q4_K blocks ``(rows, n // 256 * 144)``.

    ``importance=None``: ggml ``quantize_row_q4_K_ref`` (what ``llama-quantize`` runs without
    ``--imatrix``). ``importance``: float32 ``(n,)`` per-column weights selects
    ``quantize_row_q4_K_impl``. Both are bit-identical to llama.cpp built without FMA
    contraction (Q4K-4). Non-finite inputs are accepted and give llama.cpp's deterministic
    bytes, which may be invalid blocks (Q4K-4.5).
    """
    arr = check_input(x, tensor="x")
    rows, n = arr.shape
    if importance is not None:
        from .importance import quantize_importance  # the importance path lives in its own module

        return quantize_importance(arr, importance)
    xb = arr.reshape(-1, QK_K)
    out = encode_chunks(xb.shape[0], lambda part: _quantize_ref_chunk(xb[part]))
    return out.reshape(rows, n // QK_K * BLOCK_BYTES)
