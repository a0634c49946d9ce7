"""The importance-weighted q4_K encoder: ggml ``quantize_row_q4_K_impl`` (spec/q4_k.md, Q4K-4.6).

``llama-quantize --imatrix`` reaches it through ``quantize_q4_K(..., quant_weights)``: per
sub-block ``make_qkx3_quants`` with weights ``qw * sqrt(sigma2 + x^2)``, then the eight
scales and the eight mins are each quantized to 6 bits by ``make_qp_quants`` (a weighted
scale search followed by coordinate descent). Same float32 discipline as ``codec.py``:
vectorized across sub-blocks / super-blocks, in-order loops where C loops.
"""

from __future__ import annotations

import numpy as np

from ...numerics import nearest_int
from .checks import check_importance
from .codec import F32, affine_search, encode_chunks, finish_blocks, seq_sum, sub_block_columns
from .layout import BLOCK_BYTES, N_SUB_BLOCKS, QK_K

__all__ = ["quantize_importance", "make_qp_quants"]

GROUP_MAX_EPS = F32(1e-15)  # ggml-quants.c `#define GROUP_MAX_EPS 1e-15f`


def make_qp_quants(x: np.ndarray, qw: np.ndarray, nmax: int = 63) -> tuple[np.ndarray, np.ndarray]:
    """ggml ``make_qp_quants(n, nmax, x, L, quant_weights)`` for n = len(x), vectorized.

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


def _impl_chunk(xb: np.ndarray, qwb: np.ndarray) -> np.ndarray:
    """``quantize_row_q4_K_impl`` on (B, 256) inputs with their (B, 256) importance."""
    x = sub_block_columns(xb)
    qw = sub_block_columns(qwb)
    xt = np.ascontiguousarray(xb.T)
    sum_x2 = seq_sum(xt * xt)                                           # per super-block, in order
    sigma2 = (F32(2) * sum_x2) / F32(QK_K)
    sigma2_cols = np.repeat(sigma2, N_SUB_BLOCKS)                       # (S,)
    w = qw * np.sqrt(sigma2_cols + x * x)
    sw = seq_sum(w)
    scales, mins, L = affine_search(x, w, nmax=15, rmin=-0.9, rdelta=0.05, nstep=36, degenerate_le=True)
    per_block = (-1, N_SUB_BLOCKS)
    sw_t = sw.reshape(per_block).T
    d_block, ls = make_qp_quants(np.ascontiguousarray(scales.reshape(per_block).T), sw_t)
    m_block, lm = make_qp_quants(np.ascontiguousarray(mins.reshape(per_block).T), sw_t)
    return finish_blocks(x, L, ls.T, lm.T, d_block, m_block)


def quantize_importance(x: np.ndarray, importance) -> np.ndarray:
    """(rows, n) float32 with a float32 (n,) importance vector -> (rows, n // 256 * 144) uint8."""
    rows, n = x.shape
    qw_row = check_importance(importance, n).reshape(-1, QK_K)          # (nb, 256)
    nb = qw_row.shape[0]
    xb = x.reshape(-1, QK_K)
    # super-block i of the flattened rows is block i % nb of its row: same importance in every row
    out = encode_chunks(xb.shape[0],
                        lambda part: _impl_chunk(xb[part], qw_row[np.arange(part.start, part.stop) % nb]))
    return out.reshape(rows, nb * BLOCK_BYTES)
