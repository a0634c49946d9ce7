"""Deliberately wrong SpQR decoders, each imitating a real bug (tests/mutants/README.md)."""

from __future__ import annotations

import numpy as np

from qformats.formats import spqr
from qformats.formats.spqr.codec import entry_rows, outlier_mask, split_col_vals, unpack_dense, unpack_perm


def _layer(dense_weights, row_offsets, col_vals, in_perm):
    return {"dense_weights": dense_weights, "row_offsets": row_offsets, "col_vals": col_vals, "in_perm": in_perm}


def outliers_substituted(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    """W = outlier at outlier positions (the SpQR repository's legacy decoder), not dense + outlier (SPQR-5.2)."""
    layer = spqr.SpQRLayer(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n)
    wp = spqr.dequantize(layer, permuted=True).copy()
    cols, vals = split_col_vals(layer.col_vals)
    keep = outlier_mask(layer.col_vals, layer.sparse)
    rows = entry_rows(layer.row_offsets, cols.size, m)
    wp[rows[keep], cols[keep]] = vals[keep]
    out = np.empty_like(wp)
    out[:, unpack_perm(layer.in_perm)] = wp
    return out


def permutation_not_applied(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    """Returns the permuted column order, as spqr_quant's own dequantize() does (SPQR-5.3)."""
    return spqr.dequantize(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n, permuted=True)


def float32_statistics(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    """The dense part in float32 and rounded once (the quantizer's fp32 stats, SpQR#48), not the fp16 sequence."""
    f = unpack_dense(dense_weights, m, n)
    ti, tj, t = m // 16, n // 16, 16
    rep = lambda a: np.repeat(a.astype(np.float32), t, axis=0).reshape(ti, t, tj)  # noqa: E731
    s = rep(f.w_s_s) * (f.s_code.reshape(ti, t, tj) - rep(f.w_s_z))
    z = rep(f.w_z_s) * (f.z_code.reshape(ti, t, tj) - rep(f.w_z_z))
    wd = (s[..., None] * (f.q.reshape(ti, t, tj, t) - z[..., None])).reshape(m, n)
    layer = spqr.SpQRLayer(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n)
    cols, vals = split_col_vals(layer.col_vals)
    np.add.at(wd, (entry_rows(layer.row_offsets, cols.size, m), cols), vals.astype(np.float32))
    out = np.empty((m, n), np.float16)
    out[:, unpack_perm(layer.in_perm)] = wd.astype(np.float16)
    return out


def matmul_fp16_accumulation(*, dense_weights, row_offsets, col_vals, in_perm, m, n, x):
    """A GEMV with a float16 accumulator."""
    w = spqr.dequantize(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n)
    x = np.asarray(x, np.float16)
    acc = np.zeros((x.shape[0], m), np.float16)
    for k in range(n):
        acc = (acc + x[:, k:k + 1] * w[:, k]).astype(np.float16)
    return acc
