"""Emulations of real SpQR tools' behaviour that differs from the spec (spec/spqr.md §7).

Each function reproduces one upstream behaviour so tests can show what real files contain and
what real readers do with them; none is used on the normal decode path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .codec import decode_dense, entry_rows, from_legacy, split_col_vals, tile_words, to_csr, unpack_dense, unpack_perm
from .layout import SO_SHIFT, TILE

__all__ = ["spqr_quant_merge_col_val", "host_second_order_word", "legacy_dequantize"]


def spqr_quant_merge_col_val(cols: Any, values: Any) -> np.ndarray:
    """spqr_quant 0.2.0 ``sparse_util.merge_col_val`` (SPQR-7.1, SPQR-7.2).

    The column is viewed as int16 and sign-extended before the OR, so a column >= 32768 sets all
    16 value bits (0xffff, a float16 NaN); an empty set comes back as float32[0].
    """
    v = np.asarray(values, np.float16)
    if v.shape[0] == 0:
        return np.zeros(0, np.float32)
    c = np.asarray(cols).astype(np.uint16).view(np.int16).astype(np.int64)
    return ((v.view(np.int16).astype(np.int64) << 16) | c).astype(np.int32)


def host_second_order_word(dense_weights: Any, m: int, n: int) -> np.ndarray:
    """SO word per tile as spqr_quant's host ``dequantize_compressed`` builds it (SPQR-7.4).

    It ORs ``word >> 54`` of all 16 rows at byte ``k // 2`` without masking, so a set bit 62 or 63
    of row k lands in byte ``k // 2 + 1`` (or beyond bit 63 for the last pair).
    """
    part = tile_words(dense_weights, m, n) >> np.uint64(SO_SHIFT)
    shifts = (np.uint64(8) * (np.arange(TILE, dtype=np.uint64) // np.uint64(2)))
    return np.bitwise_or.reduce(part << shifts, axis=-1)


def legacy_dequantize(legacy: Mapping[str, Any]) -> np.ndarray:
    """The SpQR repository's ``modelutils.layer_weight_dequantization`` (SPQR-7.7), original column order.

    Same float16 statistics and dense values as the release decode, but each outlier *replaces* the
    dense value (``W*(O == 0) + O`` in float16), which also turns every -0.0 into +0.0.
    """
    layer = from_legacy(legacy, sparse="csr")
    w = decode_dense(unpack_dense(layer.dense_weights, layer.m, layer.n))
    o = np.zeros_like(w)
    ro, cv = to_csr(layer)
    cols, vals = split_col_vals(cv)
    o[entry_rows(ro, cols.size, layer.m), cols] = vals
    w = w * (o == 0).astype(np.float16) + o
    return w[:, np.argsort(unpack_perm(layer.in_perm))]
