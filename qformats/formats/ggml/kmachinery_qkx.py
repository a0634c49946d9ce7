"""The affine K-quant machinery: q4_K, q5_K and q2_K share it (spec/q4_k.md Q4K-1.4, Q4K-3, Q4K-4.2,
Q4K-4.6; spec/ggml_kquants.md KQ-1.3 .. KQ-1.5).

What the three types have in common, written once: ggml's affine searches (``make_qkx2_quants`` /
``make_qkx3_quants``, :func:`affine_search`), the scale quantizer of the importance paths
(``make_qp_quants``), the six-bit scale/min packing of q4_K and q5_K (``get_scale_min_k4``), q4_K's
nibble order (q5_K's low bits), and the decode tail ``y = (d*sc)*q - dmin*m``
(:func:`affine_decode`). Facts are from ggml 0.10.1 ``src/ggml-quants.c`` and ``src/ggml-common.h``
(llama.cpp sync ``3142f1db``); the code is ours.

How the encoders stay bit-exact while vectorized: every sub-block is a column of a ``(n, S)``
float32 array, so one NumPy operation applies the same float32 operation to all S sub-blocks at
once. Reductions that C performs as in-order loops are in-order loops over the rows here (never
``np.sum``/``np.dot``, whose pairwise or BLAS order rounds differently). NumPy never fuses
multiply-adds, and every operand is float32, so each C expression is evaluated with exactly its
rounding steps. Divisions stay divisions.
"""

from __future__ import annotations

import numpy as np

from ...numerics import nearest_int
from .base import F32
from .kmachinery_qx import GROUP_MAX_EPS

__all__ = ["seq_sum", "clamp_codes", "affine_search", "running_max", "six_bit_ref_codes", "make_qp_quants",
           "sub_block_columns",
           "encode_chunks", "unpack_scales", "pack_scales", "unpack_codes", "pack_codes", "block_field",
           "affine_decode", "bounded_passes", "nibble_codes", "six_bit_scales", "unshift_high_nibbles",
           "K_SCALE_SIZE", "DECODE_BLOCKS"]

K_SCALE_SIZE = 12       # bytes of packed 6-bit scales and mins (ggml-common.h)
_CHUNK_BLOCKS = 512     # super-blocks per encoder pass: keeps the (32, 4096) work arrays in cache (~1.6x faster)

# ---------------------------------------------------------------------------------------------
# bit fields
# ---------------------------------------------------------------------------------------------
#
# scales[12], sub-block j = 0..7, low bits on the right (ggml get_scale_min_k4):
#
#   byte 0..3  : [sc4..7 bits 5:4][sc0..3 bits 5:0]     byte k   = sc[k] | (sc[k+4] >> 4) << 6
#   byte 4..7  : [m4..7  bits 5:4][m0..3  bits 5:0]     byte 4+k = m[k]  | (m[k+4]  >> 4) << 6
#   byte 8..11 : [m4..7  bits 3:0][sc4..7 bits 3:0]     byte 8+k = (sc[k+4] & 15) | (m[k+4] & 15) << 4


def block_field(blk: np.ndarray, offset: int, size: int) -> np.ndarray:
    """Bytes ``offset .. offset+size-1`` of every block as a contiguous (nb, size) uint8 array.

    A C-contiguous ``blk`` is read through a structured view, one strided copy of ``size``-byte items
    (a plain 2-D slice copies row by row, several times slower for short fields).
    """
    nb, type_size = blk.shape
    if not blk.flags.c_contiguous:
        return np.ascontiguousarray(blk[:, offset:offset + size])
    item = np.dtype({"names": ["f"], "formats": [f"V{size}"], "offsets": [offset], "itemsize": type_size})
    return np.ascontiguousarray(blk.reshape(-1).view(item)["f"]).view(np.uint8).reshape(nb, size)


def unpack_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(..., 12) uint8 -> six-bit ``sc`` and ``m``, each (..., 8) uint8 (Q4K-1.4, KQ-1.5).

    Works on the three little-endian 32-bit words, four sub-blocks per mask operation.
    """
    lead = scales.shape[:-1]
    w = np.ascontiguousarray(scales, np.uint8).reshape(-1, K_SCALE_SIZE).view("<u4")   # (N, 3)
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
    them, so values above 63 (possible on q4_K's importance path) keep their stray bits,
    truncated to 8 bits, exactly as uint8 stores do.
    """
    ls = np.asarray(ls).astype(np.int32) & 0xFF
    lm = np.asarray(lm).astype(np.int32) & 0xFF
    out = np.empty(ls.shape[:-1] + (K_SCALE_SIZE,), np.int32)
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
    return np.concatenate([q & 15, q >> 4], axis=-2).reshape(qs.shape[:-1] + (256,))


def pack_codes(codes: np.ndarray) -> np.ndarray:
    """(..., 256) codes in 0..15 -> (..., 128) uint8 in llama.cpp nibble order."""
    c = np.asarray(codes).astype(np.uint8).reshape(codes.shape[:-1] + (4, 2, 32))
    return (c[..., 0, :] | (c[..., 1, :] << 4)).reshape(codes.shape[:-1] + (128,))


# ---------------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------------

# Super-blocks per decode pass: the uint8 codes, the float32 output and the repeated scales of one pass
# (about 3.3 KiB a super-block) stay in the caches; fastest of 128 .. 2048 on the machine measured.
DECODE_BLOCKS = 1024
SCALE_BLOCKS = 8 * DECODE_BLOCKS    # super-blocks whose sub-block scales are computed at once
# per super-block: the 32 bytes of q4_K's chunk c are read twice, the first copy keeps the low nibbles
# (q, sub-block 2c), the second the high nibbles in place (16 q, sub-block 2c+1); tiled for a whole pass
_NIBBLE_MASK = np.tile(np.repeat(np.array([0x0F, 0xF0], np.uint8), 32), 4 * DECODE_BLOCKS).reshape(DECODE_BLOCKS, 256)
# per super-block, d * sc of sub-blocks 0..7: the 1/16 that takes the high nibbles' 16 back (exact: a
# power of two, and d * sc is 0 or at least 2^-24)
_NIBBLE_UNSHIFT = np.tile(np.array([1, 1 / 16] * 4, F32), (DECODE_BLOCKS, 1))


def nibble_codes(qs: np.ndarray) -> np.ndarray:
    """(B, 128) uint8 q4_K ``qs`` (a view into the blocks will do) -> (B, 256) uint8 in weight order: ``q``
    in even sub-blocks, ``16 q`` in odd ones (Q4K-1.5); the caller's scales carry the 1/16
    (:func:`unshift_high_nibbles`). One repeat of 32-byte runs and one mask."""
    code = np.repeat(qs.reshape(-1, 4, 1, 32), 2, axis=2).reshape(-1, 256)
    return np.bitwise_and(code, _NIBBLE_MASK[:code.shape[0]], out=code)


def six_bit_scales(head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nb, 16) uint8 ``d, dmin, scales[12]`` of q4_K / q5_K -> float32 ``d * sc[j]`` and ``dmin * m[j]``,
    each (nb, 8) (Q4K-1.4, KQ-1.5), exact float32 products of the widened float16 ``d`` and ``dmin``.

    :func:`unpack_scales` on the header's 32-bit words in place, each a column of ``nb``.
    """
    nb = head.shape[0]
    w = head.view("<u4")                                                     # (nb, 4): d|dmin, scales
    dm = np.ascontiguousarray(head[:, :4]).view("<f2").astype(F32)          # (nb, 2): d, dmin, widened exactly
    sc, m = np.empty((2, nb, 2), "<u4")
    np.bitwise_and(w[:, 1], 0x3F3F3F3F, out=sc[:, 0])                        # sc0..3
    np.bitwise_and(w[:, 2], 0x3F3F3F3F, out=m[:, 0])                         # m0..3
    np.bitwise_or(w[:, 3] & 0x0F0F0F0F, ((w[:, 1] >> 6) & 0x03030303) << 4, out=sc[:, 1])   # sc4..7
    np.bitwise_or((w[:, 3] >> 4) & 0x0F0F0F0F, ((w[:, 2] >> 6) & 0x03030303) << 4, out=m[:, 1])   # m4..7
    dj = sc.view(np.uint8).astype(F32)
    dj *= np.repeat(dm[:, 0], 8).reshape(nb, 8)
    mj = m.view(np.uint8).astype(F32)
    mj *= np.repeat(dm[:, 1], 8).reshape(nb, 8)
    return dj, mj


def unshift_high_nibbles(dj: np.ndarray) -> np.ndarray:
    """``d * sc`` of at most DECODE_BLOCKS super-blocks, in place: sub-blocks 1, 3, 5, 7 get
    ``(d * sc) / 16``, for :func:`nibble_codes`' ``16 q``."""
    dj *= _NIBBLE_UNSHIFT[:dj.shape[0]]
    return dj


def bounded_passes(decode):
    """Mark a ``BlockType.decode`` that allocates its output once and works in passes of at most a few
    MiB: the family's ``dequantize`` then calls it once on any number of blocks, instead of in 8 MiB
    slices copied into a second output (a copy of the whole output, measured, 16.8M weights)."""
    decode.bounded_passes = True
    return decode


def affine_decode(nb: int, scales, codes) -> np.ndarray:
    """``y = dj * q - mj`` per sub-block: the decode of q2_K, q4_K and q5_K (Q4K-3.1, KQ-2.2, KQ-5.2).

    ``scales(part)``: float32 ``(dj, mj)``, each (B, k), for the k sub-blocks of 256 / k weights of the
    super-blocks ``part`` (a slice of at most SCALE_BLOCKS); ``codes(part, dj)``: the uint8 (B, 256)
    codes of at most DECODE_BLOCKS super-blocks in weight order, and it may scale their ``dj`` in place
    by the power of two the codes carry. ``dj * q`` is exact (11 x 6 x 5 bits at most), so the one
    rounding is the subtraction, as in C, where ``d * sc``, ``dmin * m`` are float32 products of the
    widened float16 ``d``, ``dmin``: non-finite scales give C's values (``inf * 0`` is NaN in both).

    Pass by pass over cache-sized runs of super-blocks: the codes are widened into the output, the
    sub-block scales repeated per weight, then one multiply and one subtract over contiguous
    float32. Repeating costs less than NumPy's broadcasting loops over 16 or 32 elements (measured,
    NumPy 2.4), and a per-sub-block table of values would need a gather, several times slower. The
    scales are computed a few passes at a time: whole-tensor temporaries would be fresh pages (page
    faults cost more than the arithmetic), one pass at a time would cost a dozen calls a pass.
    """
    out = np.empty((nb, 256), F32)
    for first in range(0, nb, SCALE_BLOCKS):
        dj, mj = scales(slice(first, min(first + SCALE_BLOCKS, nb)))
        group = 256 // dj.shape[1]
        for start in range(0, dj.shape[0], DECODE_BLOCKS):
            part = slice(start, min(start + DECODE_BLOCKS, dj.shape[0]))
            o = out[first + part.start:first + part.stop]
            np.copyto(o, codes(slice(first + part.start, first + part.stop), dj[part]), casting="unsafe")
            np.multiply(o, np.repeat(dj[part], group).reshape(o.shape), out=o)    # exact
            np.subtract(o, np.repeat(mj[part], group).reshape(o.shape), out=o)    # the one rounding
    return out


def scaled(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(nb, k) small integer codes times (nb,) float32 scales -> (nb, k) float32 (exact where the caller says so)."""
    out = codes.astype(F32)
    np.multiply(out.reshape(-1), np.repeat(scale, codes.shape[1]), out=out.reshape(-1))
    return out


# ---------------------------------------------------------------------------------------------
# encoder pieces
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


def affine_search(x, w, *, nmax: int, rmin: float, rdelta: float, nstep: int, degenerate_le: bool,
                  mad: bool = False):
    """ggml ``make_qkx2_quants`` (``degenerate_le=False``) / ``make_qkx3_quants`` (``True``).

    ``x``, ``w``: (n, S) float32, one sub-block per column. Returns ``(scale, the_min, L)``
    with scale and the_min (S,) float32 and L (n, S) float32 codes. See spec Q4K-4.2. Trials are
    scored by ``w * (e*e)``, or with ``mad=True`` by ``w * fabsf(e)`` (``make_qkx2_quants(...,
    use_mad = true)``, q2_K's reference path, KQ-1.3).
    """
    def score(e):
        return w * np.abs(e) if mad else w * (e * e)

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
    best = seq_sum(score((scale * L + mn) - x))

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
        cur = seq_sum(score((this_scale * laux + this_min) - x))
        better = (D > 0) & (cur < best)
        L = np.where(better, laux, L)
        best = np.where(better, cur, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)   # later trials use the new min (Q4K-4.2 step 5)

    scale = np.where(degenerate, F32(0), scale)
    mn = np.where(degenerate, mn0, mn)
    L = np.where(degenerate, F32(0), L)
    return scale, -mn, L


def six_bit_ref_codes(scales: np.ndarray, mins: np.ndarray):
    """The reference paths' 6-bit codes of (B, 8) sub-block scales and mins (Q4K-4.3 step 4, KQ-5.4):
    ``(ls, lm, d, dmin)``, ``d = max_scale / 63`` and ``dmin = max_min / 63`` as float32 (B,)."""
    max_scale, max_min = running_max(scales), running_max(mins)
    inv_scale = np.where(max_scale > 0, F32(63) / max_scale, F32(0))
    inv_min = np.where(max_min > 0, F32(63) / max_min, F32(0))
    # `uint8_t ls = nearest_int(...)` truncates mod 256 before `MIN(63, ls)`
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    return ls, lm, max_scale / F32(63), max_min / F32(63)


def make_qp_quants(x: np.ndarray, qw: np.ndarray, nmax: int = 63) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_qp_quants(n, nmax, x, L, quant_weights)`` for n = len(x), vectorized (Q4K-4.6, KQ-1.4).

    ``x``, ``qw``: (n, B) float32, one problem per column. Returns ``(scale (B,), L (n, B))``
    with L the uint8 values C stores (int32 here, already reduced mod 256).
    """
    n = x.shape[0]
    mx = np.zeros(x.shape[1:], F32)
    for i in range(n):
        mx = np.where(mx > x[i], mx, x[i])          # MAX(a, b) = a > b ? a : b
    all_zero = mx < GROUP_MAX_EPS                   # the 2025-08 fix (llama.cpp #15379)

    iscale = F32(nmax) / mx
    L = nearest_int(iscale * x) & 0xFF              # stored to uint8 without a clamp
    scale = F32(1) / iscale
    diff = x - scale * L.astype(F32)
    best = seq_sum((qw * diff) * diff)
    for step in (-4, -3, -2, -1, 1, 2, 3, 4):
        iscale_is = (F32(0.1) * F32(step) + F32(nmax)) / mx
        scale_is = F32(1) / iscale_is
        l_is = np.minimum(nmax, nearest_int(iscale_is * x))
        diff = x - scale_is * l_is.astype(F32)
        mse = seq_sum((qw * diff) * diff)
        better = mse < best
        best = np.where(better, mse, best)
        iscale = np.where(better, iscale_is, iscale)

    lint = np.minimum(nmax, nearest_int(iscale * x))
    L = lint & 0xFF
    lf = lint.astype(F32)                           # the sums use the int, not the stored byte
    sumlx = seq_sum((qw * x) * lf)
    suml2 = seq_sum((qw * lf) * lf)

    active = np.ones(x.shape[1:], bool)
    for _ in range(5):
        changed = np.zeros_like(active)
        for i in range(n):
            w, xi, li = qw[i], x[i], L[i].astype(F32)
            slx = sumlx - (w * xi) * li
            sl2 = suml2 - (w * li) * li
            new_l = np.minimum(nmax, nearest_int((xi * sl2) / slx))
            nl = new_l.astype(F32)
            slx_new = slx + (w * xi) * nl
            sl2_new = sl2 + (w * nl) * nl
            take = (active & (slx > 0) & (sl2 > 0) & (new_l != L[i])
                    & ((slx_new * slx_new) * suml2 > (sumlx * sumlx) * sl2_new))
            L[i] = np.where(take, new_l & 0xFF, L[i])
            sumlx = np.where(take, slx_new, sumlx)
            suml2 = np.where(take, sl2_new, suml2)
            changed |= take
        active &= changed                           # `if (!n_changed) break;` per problem
        if not active.any():
            break

    result = np.where(suml2 > 0, sumlx / suml2, F32(0))
    return np.where(all_zero, F32(0), result), np.where(all_zero, 0, L)


def running_max(v: np.ndarray) -> np.ndarray:
    """``m = 0; for j: if (v[j] > m) m = v[j];`` over the last axis (NaN never wins)."""
    acc = np.zeros(v.shape[:-1], F32)
    for j in range(v.shape[-1]):
        acc = np.where(v[..., j] > acc, v[..., j], acc)
    return acc


def sub_block_columns(xb: np.ndarray, n: int = 32) -> np.ndarray:
    """(B, 256) super-blocks -> (n, B*256/n): one sub-block of n weights per column."""
    return np.ascontiguousarray(xb.reshape(-1, n).T)


def encode_chunks(n_blocks: int, type_size: int, encode) -> np.ndarray:
    """``(n_blocks, type_size)`` blocks from ``encode(part)`` run on cache-sized slices of super-blocks.

    Runs of _CHUNK_BLOCKS keep the (n, S) work arrays in cache; it is not a per-block loop.
    0/0, inf-inf etc. are part of the C encoders' behaviour, so float warnings are silenced.
    """
    out = np.empty((n_blocks, type_size), np.uint8)
    with np.errstate(all="ignore"):
        for start in range(0, n_blocks, _CHUNK_BLOCKS):
            part = slice(start, min(start + _CHUNK_BLOCKS, n_blocks))
            out[part] = encode(part)
    return out
