"""SpQR conformance cases (spec/spqr.md): release-layout layers built field by field.

Each reader case (``dequantize``, ``matmul``) is a 32 x 64 layer (2 x 4 tiles of 16 x 16) with random
3-bit codes and float16 second-order statistics packed by :func:`pack_dense`, outliers at a chosen
density stored as CSR or PTCSR, and an identity or act-order column permutation::

    sparse {csr, ptcsr} x density {0, 0.3 %, 1 %, 5 %} x permutation {identity, act_order}

Every layer with outliers holds a -0.0 and a float16-subnormal outlier value (SPQR-3.3); edge cases
put outliers in the first and last column and leave most rows empty. A 16 x 1024 layer of
non-negative weights gives long matmul sums. Expected values are the reference decode (SPQR-5),
float16 and bit-exact with spqr_quant 0.2.0.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case
from .codec import csr_offsets, csr_to_ptcsr, dequantize, merge_col_vals, pack_dense, pack_perm
from .layout import TILE

__all__ = ["cases", "reference", "FORMATS"]

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
                clauses=("SPQR-2.1", "SPQR-3.3", "SPQR-4.1", "SPQR-5.1", "SPQR-5.2", "SPQR-5.3"), features=features)


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


def reference(case: Case) -> np.ndarray:
    """float16 (m, n) in original column order, spqr_quant 0.2.0's operation sequence (SPQR-5); a real
    tool's case carries its own expected values."""
    if "expected" in case.aux:
        return case.aux["expected"]
    return dequantize(dict(case.inputs), m=case.params["m"], n=case.params["n"])
