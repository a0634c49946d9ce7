"""SpQR conformance cases (spec/spqr.md): release-layout layers built field by field.

Each reader case (``dequantize``, ``matmul``) is a 32 x 64 layer (2 x 4 tiles of 16 x 16) with random
3-bit codes and float16 second-order statistics packed by :func:`pack_dense`, outliers at a chosen
density stored as CSR or PTCSR, and an identity or act-order column permutation::

    sparse {csr, ptcsr} x density {0, 0.3 %, 1 %, 5 %} x permutation {identity, act_order}

Every layer with outliers holds a -0.0 and a float16-subnormal outlier value (SPQR-3.3); edge cases
put outliers in the first and last column and leave most rows empty. A 16 x 1024 layer of
non-negative weights gives long matmul sums. Expected values are the reference decode (SPQR-5),
float16 and bit-exact with spqr_quant 0.2.0.

Signed-zero layers (spec/kernels.md KC-2.4) have rows without outliers whose statistics are degenerate
(negative, +0 and -0 scales, integer zero points met by their codes), PTCSR padding added onto -0.0, and
stored -0.0 outliers. One CSR layer stores its empty ``col_vals`` as float32[0], as spqr_quant writes it
(SPQR-7.2: readers MUST accept it). One non-conforming layer per MUST-reject rule of the chapter is the
validating level's (KC-4.2); a decoder may decode them.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case
from ...numerics import fp16_bits
from .codec import (csr_offsets, csr_to_ptcsr, decode_dense, dequantize, entry_rows, merge_col_vals, pack_dense,
                    pack_perm, split_col_vals, unpack_dense)
from .layout import TILE

__all__ = ["cases", "reference", "misreadings", "FORMATS"]

FORMATS = ("spqr",)
M, N = 32, 64
DENSITIES = {"0": 0.0, "0.3pct": 0.003, "1pct": 0.01, "5pct": 0.05}
F16 = np.float16


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _dense(rng: np.random.Generator, m: int, n: int, *, nonnegative: bool = False) -> np.ndarray:
    """Random codes and statistics; ``nonnegative`` makes every dense weight s * q >= 0 (z = 0)."""
    ti, tj = m // TILE, n // TILE
    q = rng.integers(0, 8, (m, n))
    s_code, z_code = rng.integers(0, 8, (m, tj)), rng.integers(0, 8, (m, tj))
    stat = lambda lo, hi: rng.uniform(lo, hi, (ti, tj)).astype(F16)  # noqa: E731
    w_s_s, w_s_z, w_z_s, w_z_z = stat(2.0 ** -12, 2.0 ** -8), stat(0, 7), stat(0.5, 1.5), stat(0, 7)
    if nonnegative:
        s_code, w_s_z, w_z_s = np.maximum(s_code, 1), np.zeros_like(w_s_z), np.zeros_like(w_z_s)
    return pack_dense(q, s_code, z_code, w_s_s, w_s_z, w_z_s, w_z_z)


def _outliers(rng: np.random.Generator, density: float, m: int, n: int, edges: bool) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) sorted row-then-column, and float16 values with a -0.0 and a subnormal among them."""
    count = int(round(density * m * n))
    flat = np.sort(rng.choice(m * n, count, replace=False)) if count else np.zeros(0, np.int64)
    rows, cols = flat // n, flat % n
    if edges:                                # first and last column, in rows 0 and m-1 only
        rows, cols = np.array([0, 0, m - 1]), np.array([0, n - 1, n - 1])
    values = (rng.normal(0, 0.05, rows.size)).astype(F16)
    if values.size >= 2:
        values[0], values[1] = F16(-0.0), np.uint16(0x0003).view(F16)   # -0.0 and 3 * 2^-24
    return np.stack([rows, cols]), values


def _layer(case_id: str, density: float, sparse: str, perm: str, *, edges: bool = False, m: int = M, n: int = N,
           nonnegative: bool = False) -> dict[str, np.ndarray]:
    rng = _rng(case_id)
    dense = _dense(rng, m, n, nonnegative=nonnegative)
    (rows, cols), values = _outliers(rng, density, m, n, edges)
    row_offsets, col_vals = csr_offsets(rows, m), merge_col_vals(cols, values)
    if sparse == "ptcsr":
        row_offsets, col_vals = csr_to_ptcsr(row_offsets, col_vals, m)
    order = rng.permutation(n) if perm == "act_order" else np.arange(n)
    return {"dense_weights": dense, "row_offsets": row_offsets, "col_vals": col_vals,
            "in_perm": pack_perm(order)}


def _case(name: str, tensors: dict, features: tuple[str, ...], ops=("dequantize", "matmul"),
          m: int = M, n: int = N) -> Case:
    return Case(id=f"spqr/read/{name}", format="spqr", ops=ops, inputs=tensors, params={"m": m, "n": n},
                clauses=("SPQR-5.1", "SPQR-5.2", "SPQR-5.3", "SPQR-2.1", "SPQR-3.3", "SPQR-4.1"), features=features)


def _degenerate_dense(rng: np.random.Generator, m: int = M, n: int = N) -> np.ndarray:
    """Statistics that make -0.0: first-level scale ``W_s_s * s_code`` negative, +0 or -0 by tile, zero
    point ``z = z_code`` (W_z_s = 1, W_z_z = 0), 40 % of codes equal to it, and permuted column 0 all
    ``q == z`` under a negative scale (so Wp[:, 0] is -0.0 in every row)."""
    ti, tj = m // TILE, n // TILE
    z_code = rng.integers(0, 8, (m, tj))
    q = rng.integers(0, 8, (m, n))
    same = rng.random((m, n)) < 0.4
    same[:, 0] = True
    q = np.where(same, np.repeat(z_code, TILE, axis=1), q)
    w_s_s = np.resize(np.array([-2.0 ** -9, 0.0, -0.0, 2.0 ** -9], F16), (ti, tj))
    w_s_s[:, 0] = F16(-2.0 ** -8)
    zeros, ones = np.zeros((ti, tj), F16), np.ones((ti, tj), F16)
    return pack_dense(q, rng.integers(1, 8, (m, tj)), z_code, w_s_s, zeros, ones, zeros)


def _signed_zero_layer(kind: str) -> dict[str, np.ndarray]:
    rng = _rng(f"spqr/signed_zeros/{kind}")
    dense = _degenerate_dense(rng)
    if kind == "degenerate_stats":                 # no outliers at all: every -0.0 must survive
        rows, cols, values = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, F16)
    else:                                          # outliers in half the rows: -0.0 values, and real ones
        rows = np.repeat(np.arange(0, M, 2), np.where(np.arange(0, M, 2) % 4 == 0, 3, 1))
        cols = np.concatenate([[5, 9, 40] if r % 4 == 0 else [17] for r in range(0, M, 2)])
        values = np.where(np.arange(rows.size) % 2 == 0, F16(-0.0), F16(0.25)).astype(F16)
    row_offsets, col_vals = csr_offsets(rows, M), merge_col_vals(cols, values)
    if kind == "padding_onto_negative_zero":       # padding (column 0, +0.0) lands on Wp[r, 0] = -0.0
        row_offsets, col_vals = csr_to_ptcsr(row_offsets, col_vals, M)
    return {"dense_weights": dense, "row_offsets": row_offsets, "col_vals": col_vals,
            "in_perm": pack_perm(rng.permutation(N))}


def _signed_zero_cases() -> Iterator[Case]:
    for kind, sparse in (("degenerate_stats", "csr"), ("negative_zero_outliers", "csr"), ("padding_onto_negative_zero", "ptcsr")):
        yield Case(id=f"spqr/read/{sparse}_signed_zeros_{kind}", format="spqr", ops=("dequantize",),
                   inputs=_signed_zero_layer(kind), params={"m": M, "n": N},
                   clauses=("KC-2.4", "SPQR-5.1", "SPQR-5.2", "SPQR-5.3"),
                   features=(f"outliers:{sparse}", "perm:act_order", "zeros:signed"))


def _float32_empty_case() -> Case:
    t = _layer("spqr/csr_float32_empty", 0.0, "csr", "act_order")
    t["col_vals"] = np.zeros(0, np.float32)       # spqr_quant's merge_col_val: torch.zeros(0)
    return Case(id="spqr/read/csr_0_float32_empty_col_vals", format="spqr", ops=("dequantize", "matmul"),
                inputs=t, params={"m": M, "n": N}, clauses=("SPQR-7.2", "SPQR-2.1", "SPQR-5.1"),
                features=("outliers:csr", "density:0", "perm:act_order", "col_vals:float32_empty"))


def _set_so_byte(dense: np.ndarray, row: int, value: int) -> np.ndarray:
    """dense_weights with the SO byte (bits 54..61) of tile (0, 0), row ``row`` replaced."""
    u = dense.view(np.uint64).copy()
    u[row] = (u[row] & ~np.uint64(0xFF << 54)) | np.uint64(value << 54)
    return u.view(np.int64)


def _spoil(t: dict[str, np.ndarray], how: str) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """A copy of layer ``t`` (CSR or PTCSR, 32 x 64, outliers in row 0) broken as ``how`` says."""
    t = {k: np.array(v) for k, v in t.items()}
    params = {"m": M, "n": N}
    ro, cv = t["row_offsets"], t["col_vals"]
    if how == "m_disagrees":
        params["m"] = 48
    elif how == "dense_short":
        t["dense_weights"] = t["dense_weights"][:-1]
    elif how == "so_copies":
        byte = int((t["dense_weights"].view(np.uint64)[0] >> np.uint64(54)) & np.uint64(0xFF))
        t["dense_weights"] = _set_so_byte(t["dense_weights"], 1, byte ^ 0x01)
    elif how == "reserved_bits":
        t["dense_weights"] = (t["dense_weights"].view(np.uint64) | np.uint64(1 << 62)).view(np.int64)
    elif how == "stats_nonfinite":                 # W_s_s of tile (0, 0) = NaN: SO bytes 0 and 1 in rows 0..3
        for row, byte in ((0, 0x00), (1, 0x00), (2, 0x7E), (3, 0x7E)):
            t["dense_weights"] = _set_so_byte(t["dense_weights"], row, byte)
    elif how == "row_offsets_length":
        t["row_offsets"] = np.append(ro, ro[-1]).astype(np.int32)
    elif how == "row_offsets_start":
        ro[0] = 1
    elif how == "row_offsets_monotonic":         # [0, 3, 4, 3, ...]: row 1 ends after row 2 starts
        ro[2] = ro[3] + 1
    elif how == "row_offsets_end":               # one entry fewer than row_offsets[-1] counts
        t["col_vals"] = cv[:-1]
    elif how == "column_range":
        cv[0] = merge_col_vals([N], split_col_vals(cv[:1])[1])[0]
    elif how == "value_nonfinite":
        cv[1] = merge_col_vals(split_col_vals(cv[1:2])[0], np.array([np.inf], F16))[0]
    elif how == "ptcsr_stride":
        t["row_offsets"], t["col_vals"] = np.append(ro[:-1], ro[-1] + 1).astype(np.int32), np.append(cv, cv[-1:])
    elif how == "ptcsr_padding":                   # row 0's second slot padding, its third a real entry
        cv[16] = 0
    elif how == "perm_duplicate":
        p = t["in_perm"].view(np.uint16).copy()
        p[1] = p[0]
        t["in_perm"] = p.view(np.int32)
    elif how == "perm_int64":
        t["in_perm"] = t["in_perm"].view(np.uint16).astype(np.int64)
    return t, params


# (name, clause, sparse layout, how, description): one per MUST-reject rule of spec/spqr.md
INVALID = (
    ("m_disagrees", "SPQR-2.1", "csr", "m = 48 given for a 32-row layer"),
    ("dense_weights_short", "SPQR-2.1", "csr", "dense_weights one word short of m*n/16"),
    ("so_copies_differ", "SPQR-2.3", "csr", "the two copies of a second-order byte differ"),
    ("reserved_bits", "SPQR-2.4", "csr", "bit 62 of every dense word set"),
    ("stats_nonfinite", "SPQR-2.5", "csr", "a NaN second-level scale"),
    ("row_offsets_length", "SPQR-3.1", "csr", "row_offsets of length m + 2"),
    ("row_offsets_start", "SPQR-3.2", "csr", "row_offsets[0] = 1"),
    ("row_offsets_monotonic", "SPQR-3.2", "csr", "row_offsets decreasing"),
    ("row_offsets_end", "SPQR-3.2", "csr", "row_offsets ending one short of len(col_vals)"),
    ("column_range", "SPQR-3.3", "csr", "an outlier in column n"),
    ("value_nonfinite", "SPQR-3.4", "csr", "an infinite outlier value"),
    ("ptcsr_stride", "SPQR-3.5", "ptcsr", "a PTCSR block of 16 w + 1 entries"),
    ("ptcsr_padding", "SPQR-3.6", "ptcsr", "a real PTCSR entry after a padding slot of its row"),
    ("perm_duplicate", "SPQR-4.2", "csr", "in_perm repeating an index"),
    ("perm_int64", "SPQR-7.3", "csr", "in_perm as int64 [n] (SpQR PR #47)"),
)
HOW = {"dense_weights_short": "dense_short", "so_copies_differ": "so_copies", "perm_duplicate": "perm_duplicate"}


def _invalid_base(sparse: str) -> dict[str, np.ndarray]:
    """A 32 x 64 layer whose row 0 holds three outliers (PTCSR: rows 1..15 padded to three slots)."""
    rng = _rng(f"spqr/invalid/{sparse}")
    rows, cols = np.array([0, 0, 0, 5, 17]), np.array([3, 20, 41, 7, 63])
    values = rng.normal(0, 0.05, 5).astype(F16)
    row_offsets, col_vals = csr_offsets(rows, M), merge_col_vals(cols, values)
    if sparse == "ptcsr":
        row_offsets, col_vals = csr_to_ptcsr(row_offsets, col_vals, M)
    return {"dense_weights": _dense(rng, M, N), "row_offsets": row_offsets, "col_vals": col_vals,
            "in_perm": pack_perm(rng.permutation(N))}


def _invalid_cases() -> Iterator[Case]:
    for name, clause, sparse, description in INVALID:
        t, params = _spoil(_invalid_base(sparse), HOW.get(name, name))
        yield Case(id=f"spqr/read/invalid/{sparse}_{name}", format="spqr", ops=("dequantize", "matmul"), inputs=t,
                   params=params, clauses=(clause, "KC-4.2"), features=(f"outliers:{sparse}", "input:nonconforming"),
                   expect="reject", aux={"nominal_shape": np.array([M, N], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


def cases() -> Iterator[Case]:
    """Every reference-made SpQR case, in a fixed order."""
    for sparse in ("csr", "ptcsr"):
        for density_name, density in DENSITIES.items():
            for perm in ("identity", "act_order"):
                name = f"{sparse}_{density_name}_{perm}"
                yield _case(name, _layer(f"spqr/{name}", density, sparse, perm),
                            (f"outliers:{sparse}", f"density:{density_name}", f"perm:{perm}"))
        name = f"{sparse}_edge_columns"
        yield _case(name, _layer(f"spqr/{name}", 0.0, sparse, "act_order", edges=True),
                    (f"outliers:{sparse}", "density:edges", "perm:act_order", "outliers:edge_columns"))
    yield _case("csr_16x1024_nonnegative",
                _layer("spqr/accumulation", 0.0, "csr", "identity", m=16, n=1024, nonnegative=True),
                ("outliers:csr", "density:0", "perm:identity", "x:nonnegative", "k:1024"), ops=("matmul",),
                m=16, n=1024)
    yield from _signed_zero_cases()
    yield _float32_empty_case()
    yield from _invalid_cases()


def reference(case: Case) -> np.ndarray:
    """float16 (m, n) in original column order, spqr_quant 0.2.0's operation sequence (SPQR-5); a real
    tool's case carries its own expected values."""
    if "expected" in case.aux:
        return case.aux["expected"]
    return dequantize(dict(case.inputs), m=case.params["m"], n=case.params["n"])


# -- known misreadings (spec/kernels.md KC-5) -----------------------------------------------------------


def _outlier_matrix(t: dict, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(float16 dense matrix of the stored outliers, mask of where they are) in permuted columns."""
    cols, vals = split_col_vals(t["col_vals"])
    rows = entry_rows(np.asarray(t["row_offsets"]), cols.size, m)
    real = fp16_bits(vals) != 0                          # PTCSR padding is the all-zero entry
    o, mask = np.zeros((m, n), F16), np.zeros((m, n), bool)
    o[rows[real], cols[real]] = vals[real]
    mask[rows[real], cols[real]] = True
    return o, mask


def misreadings(case: Case) -> Iterator[tuple[str, str, np.ndarray]]:
    """(clause, what the subject did, W) of known wrong SpQR decodes, most specific first (KC-5)."""
    if case.expect != "values" or "expected" in case.aux or "col_vals:float32_empty" in case.features:
        return
    t, m, n = dict(case.inputs), case.params["m"], case.params["n"]
    from .codec import unpack_perm

    perm = unpack_perm(t["in_perm"])
    unpermute = lambda wp: np.ascontiguousarray(wp[:, np.argsort(perm)])  # noqa: E731  W[:, perm[k]] = Wp[:, k]
    yield "SPQR-5.3", "Wp, the permuted column order (spqr_quant's dequantize()), not W", dequantize(t, m=m, n=n, permuted=True)
    dense = decode_dense(unpack_dense(t["dense_weights"], m, n))
    o, mask = _outlier_matrix(t, m, n)
    if mask.any():
        yield "SPQR-5.2", "outliers substituted for the dense value, not added (the SpQR repository's legacy " \
                          "decoder, SPQR-7.7)", unpermute(np.where(mask, o, dense))
        yield "SPQR-5.2", "the outliers left out (the dense part alone)", unpermute(dense)
