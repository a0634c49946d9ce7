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


def outliers_added_as_dense_matrix(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    """The outliers materialised as a dense matrix and added (``to_dense()``, a torch.sparse add): every
    untouched -0.0 of the dense part becomes +0.0 (-0.0 + +0.0), the values are otherwise right."""
    layer = spqr.SpQRLayer(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n)
    base = _layer(dense_weights, row_offsets, col_vals, in_perm)
    dense = spqr.dequantize(dict(base, row_offsets=np.zeros(m + 1, np.int32), col_vals=np.zeros(0, np.int32)),
                            permuted=True, m=m, n=n)
    cols, vals = split_col_vals(layer.col_vals)
    rows = entry_rows(layer.row_offsets, cols.size, m)
    outliers = np.zeros((m, n), np.float32)
    np.add.at(outliers, (rows, cols), vals.astype(np.float32))
    wp = (dense.astype(np.float32) + outliers).astype(np.float16)
    out = np.empty_like(wp)
    out[:, unpack_perm(layer.in_perm)] = wp
    return out


def ptcsr_padding_skipped(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    """PTCSR rows stopped at their first padding slot (spqr_quant's CUDA kernel): the +0.0 padding is never
    added, so -0.0 stays where SPQR-5.2's host decode gives +0.0."""
    from qformats.formats.spqr.codec import to_csr

    layer = spqr.SpQRLayer(_layer(dense_weights, row_offsets, col_vals, in_perm), m=m, n=n)
    ro, cv = to_csr(layer)
    return spqr.dequantize(dict(_layer(dense_weights, row_offsets, col_vals, in_perm), row_offsets=ro, col_vals=cv),
                           m=m, n=n)
