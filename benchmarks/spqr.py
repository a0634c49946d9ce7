"""Decode throughput of qformats' SpQR reference decoder: a 4096x4096 release layer, 1% outliers.

The layer is generated on the fly (random codes and statistics, uniformly placed outliers), never
stored. Prints weights decoded per second for CSR and PTCSR, best of a few runs.
"""

from __future__ import annotations

import time

import numpy as np

from qformats.formats import spqr
from qformats.formats.spqr import codec


def make_layer(m: int = 4096, n: int = 4096, rate: float = 0.01, seed: int = 0, sparse: str = "csr"):
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 8, (m, n))
    sc, zc = rng.integers(0, 8, (m, n // 16)), rng.integers(0, 8, (m, n // 16))
    stats = [(rng.random((m // 16, n // 16)) * 0.01 + 0.001).astype(np.float16),
             (-rng.random((m // 16, n // 16)) * 2).astype(np.float16),
             (rng.random((m // 16, n // 16)) + 0.1).astype(np.float16),
             (-rng.random((m // 16, n // 16)) * 2).astype(np.float16)]
    rows, cols = np.nonzero(rng.random((m, n)) < rate)
    ro = codec.csr_offsets(rows, m)
    cv = codec.merge_col_vals(cols, rng.standard_normal(cols.size).astype(np.float16))
    if sparse == "ptcsr":
        ro, cv = codec.csr_to_ptcsr(ro, cv, m)
    return spqr.SpQRLayer({"dense_weights": spqr.pack_dense(q, sc, zc, *stats), "row_offsets": ro,
                           "col_vals": cv, "in_perm": codec.pack_perm(rng.permutation(n))})


def main(repeats: int = 3) -> None:
    for sparse in ("csr", "ptcsr"):
        layer = make_layer(sparse=sparse)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            spqr.dequantize(layer)
            best = min(best, time.perf_counter() - t0)
        nnz, size = spqr.outlier_count(layer), layer.m * layer.n
        print(f"spqr dequantize {layer.m}x{layer.n} {sparse:5s} outliers={nnz} ({100 * nnz / size:.2f}%): "
              f"{best * 1e3:.1f} ms, {size / best / 1e6:.1f} M weights/s")


if __name__ == "__main__":
    main()
