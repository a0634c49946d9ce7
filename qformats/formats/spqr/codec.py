"""SpQR release-layout codec: tile words, outlier entries, permutation, decode (spec/spqr.md §2-§5).

One ``dense_weights`` word per (tile I, tile column J, row-in-tile k), tile-row-major
(``word = ((I * n/16) + J) * 16 + k``)::

    63 62 | 61 .. 54 | 53 ....................... 6 | 5 .. 3 | 2 .. 0
     0  0 | SO byte  | q15 | q14 | ... | q1 | q0     | z_code | s_code
          | k // 2   | 3 bits each, column 16J + l   |

The tile's second-order word SO (64 bits, little-endian) is four raw float16 values::

    SO = W_s_s | W_z_s << 16 | W_s_z << 32 | W_z_z << 48

and its byte p sits in rows 2p and 2p+1 (stored twice, so each half-warp can rebuild it).
Decode is float16 op by op (``s = W_s_s*(s_code - W_s_z)``, ``z = W_z_s*(z_code - W_z_z)``,
``w = s*(q - z)``), then each stored outlier entry is added in float32 in storage order and the
sum is rounded to float16 (SPQR-5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

import numpy as np

from ...errors import fail
from ...numerics import fp16_bits, fp16_from_bits
from ...tensors import as_array
from .layout import BITS, Q_SHIFT, SO_SHIFT, TILE, Z_SHIFT, SpQRLayer, check_dims, dim_arg

__all__ = [
    "DenseFields", "tile_words", "so_bytes", "second_order", "unpack_dense", "pack_dense",
    "merge_col_vals", "split_col_vals", "pack_perm", "unpack_perm", "check_perm", "entry_rows",
    "csr_offsets", "outlier_mask", "csr_to_ptcsr", "ptcsr_to_csr", "to_csr", "decode_dense",
    "dequantize", "from_legacy", "as_layer",
]

F16 = np.float16
U64 = np.uint64
MAX_CODE = (1 << BITS) - 1
_MASK3 = U64(MAX_CODE)
_Q_SHIFTS = (Q_SHIFT + BITS * np.arange(TILE)).astype(U64)     # bit offset of q_l, l = 0..15


class DenseFields(NamedTuple):
    """Every field of ``dense_weights``, in (row, permuted column) orientation."""

    q: np.ndarray          # uint8 [m, n]          weight codes
    s_code: np.ndarray     # uint8 [m, n/16]       first-level scale codes
    z_code: np.ndarray     # uint8 [m, n/16]       first-level zero codes
    w_s_s: np.ndarray      # float16 [m/16, n/16]  scale of the scales
    w_s_z: np.ndarray      # float16 [m/16, n/16]  zero of the scales
    w_z_s: np.ndarray      # float16 [m/16, n/16]  scale of the zeros
    w_z_z: np.ndarray      # float16 [m/16, n/16]  zero of the zeros


def tile_words(dense_weights: Any, m: int, n: int) -> np.ndarray:
    """``dense_weights`` as uint64 [m/16, n/16, 16]: tile (I, J), row in tile k."""
    return np.ascontiguousarray(as_array(dense_weights, "dense_weights")).view(U64).reshape(m // TILE, n // TILE, TILE)


def so_bytes(dense_weights: Any, m: int, n: int) -> np.ndarray:
    """Bits 54..61 of every word as uint8 [m/16, n/16, 16] (row k carries SO byte k // 2)."""
    return ((tile_words(dense_weights, m, n) >> U64(SO_SHIFT)) & U64(0xFF)).astype(np.uint8)


def second_order(so: np.ndarray) -> np.ndarray:
    """float16 [..., 4] (W_s_s, W_z_s, W_s_z, W_z_z) from the even-row copies of :func:`so_bytes` (SPQR-2.3)."""
    return fp16_from_bits(np.ascontiguousarray(so[..., 0::2]).view("<u2"))


def unpack_dense(dense_weights: Any, m: int, n: int) -> DenseFields:
    """Split ``dense_weights`` into codes and statistics; SO is read from the even rows (SPQR-2.3)."""
    w = tile_words(dense_weights, m, n)                                      # [I, J, k]
    rows = lambda a: a.transpose(0, 2, 1).reshape(m, n // TILE).astype(np.uint8)  # noqa: E731
    q = ((w[..., None] >> _Q_SHIFTS) & _MASK3).astype(np.uint8)              # [I, J, k, l]
    q = q.transpose(0, 2, 1, 3).reshape(m, n)
    so = second_order(so_bytes(w, m, n))                                     # [I, J, 4]
    return DenseFields(q, rows(w & _MASK3), rows((w >> U64(Z_SHIFT)) & _MASK3),
                       so[..., 0], so[..., 2], so[..., 1], so[..., 3])


def _check_codes(a: np.ndarray, name: str, code: str) -> None:
    if a.size and (a.min() < 0 or a.max() > MAX_CODE):
        raise fail(code, name, f"{BITS}-bit codes in [0, {MAX_CODE}]", int(a.min() if a.min() < 0 else a.max()))


def _field(value: Any, name: str, shape: tuple[int, int], codes: bool) -> np.ndarray:
    a = as_array(value, name)
    if a.shape != shape:
        raise fail("tensor.shape", name, f"of shape {shape}", tuple(a.shape))
    if codes:                   # a wider code would spill into the next field
        if a.dtype.kind not in "iu":
            raise fail("bits.value_range", name, "an integer array", a.dtype.name)
        _check_codes(a, name, "bits.value_range")
    return a


def pack_dense(q: Any, s_code: Any, z_code: Any, w_s_s: Any, w_s_z: Any, w_z_s: Any, w_z_z: Any) -> np.ndarray:
    """Inverse of :func:`unpack_dense`: codes in [0, 7], statistics float16 [m/16, n/16] -> int64 [m*n/16]."""
    q = as_array(q, "q")
    if q.ndim != 2:
        raise fail("tensor.shape", "q", "a 2-D code matrix (m, n)", tuple(q.shape))
    m, n = q.shape
    check_dims(m, n, "q")
    ti, tj = m // TILE, n // TILE
    q = _field(q, "q", (m, n), codes=True)
    tile = lambda v, k: _field(v, k, (m, tj), True).astype(U64).reshape(ti, TILE, tj).transpose(0, 2, 1)  # noqa: E731
    bits16 = lambda v, k: fp16_bits(_field(v, k, (ti, tj), False)).astype(U64)  # noqa: E731
    so = (bits16(w_s_s, "w_s_s") | bits16(w_z_s, "w_z_s") << U64(16) | bits16(w_s_z, "w_s_z") << U64(32)
          | bits16(w_z_z, "w_z_z") << U64(48))
    k = np.arange(TILE, dtype=U64)
    so_field = ((so[..., None] >> (U64(8) * (k // U64(2)))) & U64(0xFF)) << U64(SO_SHIFT)
    codes = q.astype(U64).reshape(ti, TILE, tj, TILE).transpose(0, 2, 1, 3) << _Q_SHIFTS
    word = (tile(s_code, "s_code") | tile(z_code, "z_code") << U64(Z_SHIFT) | so_field
            | np.bitwise_or.reduce(codes, axis=-1))
    return word.reshape(-1).view(np.int64)


def merge_col_vals(cols: Any, values: Any) -> np.ndarray:
    """``fp16_bits(value) << 16 | column`` as int32 (SPQR-3.2); columns must lie in [0, 65536)."""
    c, v = as_array(cols, "cols"), as_array(values, "values")
    if c.ndim != 1 or v.shape != c.shape:
        raise fail("tensor.shape", "values", f"1-D and as long as cols {tuple(c.shape)}", tuple(v.shape))
    if c.size and c.dtype.kind not in "iu":
        raise fail("bits.value_range", "cols", "an integer array", c.dtype.name)
    if c.size and (c.min() < 0 or c.max() > 0xFFFF):
        raise fail("bits.value_range", "cols", "16-bit columns in [0, 65535]", int(c.min() if c.min() < 0 else c.max()))
    hi = fp16_bits(v).astype(np.uint32) << np.uint32(16)
    return (hi | c.astype(np.uint32)).view(np.int32)


def split_col_vals(col_vals: Any) -> tuple[np.ndarray, np.ndarray]:
    """(column as unsigned int64, value float16) of each entry; an empty float32 tensor gives empties."""
    cv = np.asarray(col_vals)
    if cv.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, F16)
    u = cv.view(np.uint32)
    return (u & np.uint32(0xFFFF)).astype(np.int64), fp16_from_bits(u >> np.uint32(16))


def pack_perm(perm: Any) -> np.ndarray:
    """int32 [n/2] holding ``perm[2i] | perm[2i+1] << 16`` (SPQR-4.1)."""
    p = np.asarray(perm).astype(np.uint32)
    return (p[0::2] | p[1::2] << np.uint32(16)).view(np.int32)


def unpack_perm(in_perm: Any) -> np.ndarray:
    """The permutation as int64 [n]: uint16 pairs from int32, or the int64 [n] variant as is (SPQR-7.4)."""
    a = np.asarray(in_perm)
    if a.dtype == np.int64:
        return a.copy()
    return a.view(np.uint16).astype(np.int64)   # little-endian: low half first


def check_perm(perm: np.ndarray, n: int, tensor: str, code: str) -> np.ndarray:
    """``perm`` as int64 [n] after checking it is a permutation of 0..n-1 (SPQR-4.2)."""
    want = f"a permutation of 0..{n - 1}"
    if perm.dtype.kind not in "iu":
        raise fail(code, tensor, want, f"dtype {perm.dtype.name}")
    p = perm.reshape(-1).astype(np.int64)
    if p.size != n:
        raise fail(code, tensor, want, f"length {p.size}")
    out = (p < 0) | (p >= n)
    if out.any():
        j = int(np.flatnonzero(out)[0])
        raise fail(code, tensor, want, f"index {int(p[j])} at position {j}")
    seen = np.bincount(p, minlength=n)
    if (seen != 1).any():
        k = int(np.flatnonzero(seen != 1)[0])
        raise fail(code, tensor, want, f"index {k} appears {int(seen[k])} times")
    return p


def entry_rows(row_offsets: np.ndarray, entries: int, m: int) -> np.ndarray:
    """Row of each ``col_vals`` entry: CSR by range, PTCSR as ``16*b + j % 16`` (SPQR-3.3, SPQR-3.4)."""
    ro = np.asarray(row_offsets, np.int64)
    owner = np.repeat(np.arange(ro.size - 1), np.diff(ro))
    if ro.size == m + 1:
        return owner
    return owner * TILE + np.arange(entries) % TILE


def csr_offsets(rows: np.ndarray, m: int) -> np.ndarray:
    """CSR ``row_offsets`` int32 [m+1] of entries stored in row order, given each entry's row."""
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int32)


def outlier_mask(col_vals: Any, sparse: str) -> np.ndarray:
    """Which stored entries are outliers: every CSR entry; PTCSR entries other than padding (0) (SPQR-3.8)."""
    cv = np.asarray(col_vals)
    if sparse == "csr" or cv.size == 0:
        return np.ones(cv.size, bool)
    return cv.view(np.int32) != 0


def csr_to_ptcsr(row_offsets: Any, col_vals: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR -> PTCSR (SPQR-3.4): entry t of row 16b+k moves to ``ptr[b] + 16t + k``; other slots 0."""
    ro = np.asarray(row_offsets, np.int64)
    cv = np.asarray(col_vals)
    counts = np.diff(ro)
    widths = counts.reshape(-1, TILE).max(axis=1)
    out_ro = np.concatenate([[0], np.cumsum(TILE * widths)]).astype(np.int32)
    out = np.zeros(int(out_ro[-1]), np.int32)
    if cv.size:
        rows = np.repeat(np.arange(m), counts)
        t = np.arange(cv.size) - ro[rows]
        out[out_ro[rows // TILE].astype(np.int64) + TILE * t + rows % TILE] = cv.view(np.int32)
    return out_ro, out


def ptcsr_to_csr(row_offsets: Any, col_vals: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    """PTCSR -> CSR: padding slots (entry 0) dropped, each row's entries kept in slot order."""
    ro = np.asarray(row_offsets, np.int64)
    cv = np.asarray(col_vals).view(np.int32) if np.asarray(col_vals).size else np.zeros(0, np.int32)
    rows = entry_rows(ro, cv.size, m)
    keep = outlier_mask(cv, "ptcsr")
    order = np.lexsort((np.arange(cv.size)[keep], rows[keep]))
    return csr_offsets(rows[keep], m), cv[keep][order]


def as_layer(layer: Any, *, m: int | None = None, n: int | None = None) -> SpQRLayer:
    """A validated :class:`SpQRLayer` from a layer or a plain mapping of the four tensors.

    A layer is returned as is when the given m and n are None or its own; otherwise it is checked again.
    """
    m, n = dim_arg("m", m), dim_arg("n", n)
    if isinstance(layer, SpQRLayer) and m in (None, layer.m) and n in (None, layer.n):
        return layer
    return SpQRLayer(layer, m=m, n=n)


def to_csr(layer: Any, *, m: int | None = None, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(row_offsets int32 [m+1], col_vals int32 [nnz]) of any release layer, PTCSR padding dropped."""
    lay = as_layer(layer, m=m, n=n)
    cv = lay.col_vals if lay.col_vals.dtype == np.int32 else np.zeros(0, np.int32)
    if lay.sparse == "csr":
        return np.asarray(lay.row_offsets, np.int32), cv
    return ptcsr_to_csr(lay.row_offsets, cv, lay.m)


def decode_dense(fields: DenseFields) -> np.ndarray:
    """The dense part ``s*(q - z)`` in float16, one rounding per operation (SPQR-5.1)."""
    m, n = fields.q.shape
    ti, tj = m // TILE, n // TILE
    per_row = lambda a: np.repeat(a, TILE, axis=0).reshape(ti, TILE, tj)  # noqa: E731
    s = per_row(fields.w_s_s) * (fields.s_code.reshape(ti, TILE, tj).astype(F16) - per_row(fields.w_s_z))
    z = per_row(fields.w_z_s) * (fields.z_code.reshape(ti, TILE, tj).astype(F16) - per_row(fields.w_z_z))
    q = fields.q.reshape(ti, TILE, tj, TILE).astype(F16)
    return (s[..., None] * (q - z[..., None])).reshape(m, n)


def dequantize(layer: Any, *, permuted: bool = False, m: int | None = None, n: int | None = None,
               legacy: bool = False) -> np.ndarray:
    """float16 (out, in) weight exactly as spqr_quant 0.2.0 ``QuantizedLinear.dequantize()`` (SPQR-5).

    Original column order unless ``permuted`` (spqr_quant itself returns permuted order). The int64
    ``in_perm`` of SpQR PR #47 is read only with ``legacy=True`` (SPQR-7.3): spqr_quant refuses it.
    """
    lay = as_layer(layer, m=m, n=n)
    m, n = lay.m, lay.n
    if lay.in_perm.dtype == np.int64 and not legacy:
        raise fail("spqr.in_perm.int64", "in_perm", f"int32[{n // 2}] uint16 pairs (pass legacy=True to read the "
                   "int64 variant of SpQR PR #47)", f"int64[{lay.in_perm.size}]")
    wp = decode_dense(unpack_dense(lay.dense_weights, m, n))
    cols, vals = split_col_vals(lay.col_vals)
    if cols.size:
        acc = wp.astype(np.float32)
        rows = entry_rows(lay.row_offsets, cols.size, m)
        np.add.at(acc, (rows, cols), vals.astype(np.float32))   # unbuffered: sequential, storage order
        wp = acc.astype(F16)
    if permuted:
        return wp
    out = np.empty_like(wp)
    out[:, unpack_perm(lay.in_perm)] = wp
    return out


# -- legacy (SpQR repository per-layer save) -> release ---------------------------------------

_LEGACY_STATS = ("quant_layer_scale_qq_scale", "quant_layer_scale_qq_zero",
                 "quant_layer_zero_qq_scale", "quant_layer_zero_qq_zero")


def _legacy_array(legacy: Mapping[str, Any], key: str) -> np.ndarray:
    if key not in legacy:
        raise fail("spqr.legacy.invalid", key, "present in the legacy dict", "missing")
    value = legacy[key]
    if isinstance(value, (list, tuple)):      # the dict holds one tensor per column group
        value = np.stack([as_array(v, key) for v in value]) if value else np.zeros(0)
    return as_array(value, key)


def _legacy_codes(legacy: Mapping[str, Any], key: str, shape: tuple[int, ...]) -> np.ndarray:
    a = _legacy_array(legacy, key)
    if a.dtype.kind not in "iu":
        raise fail("spqr.legacy.invalid", key, "an integer code tensor", a.dtype.name)
    if a.size != int(np.prod(shape)):
        raise fail("spqr.legacy.invalid", key, f"{int(np.prod(shape))} codes {shape}", tuple(a.shape))
    _check_codes(a, key, "spqr.legacy.range")
    return a.reshape(shape)


def _legacy_outliers(legacy: Mapping[str, Any], m: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, cols, float16 values) sorted by row then column, as ``to_sparse_csr`` orders them."""
    if "outliers_matrix.indices" in legacy:
        idx = _legacy_array(legacy, "outliers_matrix.indices")
        vals = _legacy_array(legacy, "outliers_matrix.values")
        if idx.ndim != 2 or idx.shape[0] != 2 or vals.shape != (idx.shape[1],) or idx.dtype.kind not in "iu":
            raise fail("spqr.legacy.invalid", "outliers_matrix", "COO indices int [2, nnz] with values [nnz]",
                       (tuple(idx.shape), tuple(vals.shape)))
        rows, cols = idx.astype(np.int64)
    else:
        dense = _legacy_array(legacy, "outliers_matrix")
        if dense.shape != (m, n):
            raise fail("spqr.legacy.invalid", "outliers_matrix", f"a dense [{m}, {n}] matrix", tuple(dense.shape))
        rows, cols = np.nonzero(dense)
        vals = dense[rows, cols]
    if vals.dtype.kind != "f":
        raise fail("spqr.legacy.invalid", "outliers_matrix", "floating-point values", vals.dtype.name)
    if rows.size and (rows.min() < 0 or rows.max() >= m or cols.min() < 0 or cols.max() >= n):
        raise fail("spqr.legacy.invalid", "outliers_matrix", f"indices inside [{m}, {n}]",
                   (int(rows.max()), int(cols.max())))
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], np.asarray(vals, F16)[order]
    if rows.size > 1 and np.any((np.diff(rows) == 0) & (np.diff(cols) == 0)):
        raise fail("spqr.legacy.invalid", "outliers_matrix", "coalesced (no repeated position)", "duplicates")
    return rows, cols, vals


def from_legacy(legacy: Mapping[str, Any], *, sparse: Literal["csr", "ptcsr"] = "csr") -> SpQRLayer:
    """The SpQR repository's per-layer quantizer dict -> release layout, byte for byte as spqr_quant 0.2.0.

    Keys as ``main.py --save`` writes them: ``quant_weights``, ``quant_layer_scale``,
    ``quant_layer_zeros``, the four ``quant_layer_*_qq_*`` statistics (lists per column group or
    stacked), ``outliers_matrix`` (dense) or ``outliers_matrix.indices``/``.values`` (COO), ``perm``
    (SPQR-8.2). An empty CSR outlier set is written as float32[0], as spqr_quant does (SPQR-7.2).
    """
    if sparse not in ("csr", "ptcsr"):
        raise fail("argument.invalid", "sparse", "'csr' or 'ptcsr'", sparse)
    for key, want in (("groupsize", TILE), ("qq_groupsize", TILE), ("bits", BITS), ("wbits", BITS)):
        if key in legacy and int(legacy[key]) != want:
            raise fail("spqr.legacy.unsupported", key, f"{want} for the release layout", int(legacy[key]))
    w = _legacy_array(legacy, "quant_weights")
    if w.ndim != 2:
        raise fail("spqr.legacy.invalid", "quant_weights", "a [m, n] code matrix", tuple(w.shape))
    m, n = (int(d) for d in w.shape)
    check_dims(m, n, "quant_weights", "spqr.legacy.unsupported")
    ti, tj = m // TILE, n // TILE
    q = _legacy_codes(legacy, "quant_weights", (m, n))
    s_code = _legacy_codes(legacy, "quant_layer_scale", (tj, m)).T       # list index = column group
    z_code = _legacy_codes(legacy, "quant_layer_zeros", (tj, m)).T
    stats = []
    for key in _LEGACY_STATS:
        a = _legacy_array(legacy, key)
        if a.size != ti * tj or a.dtype != F16:
            raise fail("spqr.legacy.invalid", key, f"float16 with {tj}x{ti} entries", (a.dtype.name, tuple(a.shape)))
        stats.append(a.reshape(tj, ti).T)
    perm = check_perm(_legacy_array(legacy, "perm"), n, "perm", "spqr.legacy.invalid")
    rows, cols, vals = _legacy_outliers(legacy, m, n)
    if cols.size and cols.max() >= 1 << 15:
        raise fail("spqr.outliers.column_signed", "outliers_matrix",
                   "columns below 32768 (spqr_quant sign-extends wider ones into NaN values)", int(cols.max()))
    dense = pack_dense(q, s_code, z_code, stats[0], stats[1], stats[2], stats[3])
    ro = csr_offsets(rows, m)
    cv = merge_col_vals(cols, vals) if cols.size else np.zeros(0, np.float32)
    if sparse == "ptcsr":
        ro, cv = csr_to_ptcsr(ro, cv if cols.size else np.zeros(0, np.int32), m)
    return SpQRLayer({"dense_weights": dense, "row_offsets": ro, "col_vals": cv, "in_perm": pack_perm(perm)},
                     m=m, n=n)
