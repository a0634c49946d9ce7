"""SpQR's Triton kernels over prepared planes (spec/kernels.md KC-7.6), in the interpreter.

The dense part is decoded in registers and the outliers applied as a sparse patch of final weights. Expected
values come from the NumPy reference (``qformats.formats.spqr``, bit-exact with spqr_quant 0.2.0) and, for
the matmul, from QF-4.6's bound around ``x @ W.T`` in float64; the patch's positions from the reference's
own dense decode (``codec.decode_dense``) compared with its full decode.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.spqr")   # before triton: it selects the interpreter without a GPU

from conformance.compare import within_bound  # noqa: E402
from qformats.formats import spqr as ref  # noqa: E402
from qformats.formats.spqr import codec  # noqa: E402
from reference_kernels import _int4, _splitk  # noqa: E402
from reference_kernels import spqr  # noqa: E402

F16 = np.float16
SHAPES = [pytest.param(48, 80, id="48x80"), pytest.param(80, 48, id="80x48"), pytest.param(16, 208, id="16x208"),
          pytest.param(32, 1152, id="32x1152")]


def _layer(seed: int, m: int, n: int, *, sparse: str = "csr", density: float = 0.02, extra=(), empty=(),
           scale: float = 2.0 ** -6) -> dict:
    """Random codes and statistics; outliers at ``density`` outside rows 1, m-1 and ``empty``; row 0 holds
    columns 0 and n-1, with -0.0 and a float16 subnormal; then (row, column, value) ``extra`` entries after
    their row's sorted ones, in the order given (storage order); act-order permutation."""
    rng = np.random.default_rng(seed)
    ti, tj = m // 16, n // 16
    stat = lambda lo, hi: rng.uniform(lo, hi, (ti, tj)).astype(F16)  # noqa: E731
    dense = codec.pack_dense(rng.integers(0, 8, (m, n)), rng.integers(0, 8, (m, tj)), rng.integers(0, 8, (m, tj)),
                             stat(scale / 64, scale), stat(0, 7), stat(0.5, 1.5), stat(0, 7))
    flat = rng.choice(m * n, int(density * m * n), replace=False)
    rows, cols = flat // n, flat % n
    keep = ~np.isin(rows, [1, m - 1, *empty])
    rows, cols = np.concatenate([[0, 0], rows[keep]]), np.concatenate([[0, n - 1], cols[keep]])
    vals = rng.normal(0, 0.5, rows.size).astype(F16)
    vals[0], vals[1] = F16(-0.0), np.uint16(0x0003).view(F16)
    entries = sorted(zip(rows.tolist(), cols.tolist(), vals.tolist())) + list(extra)
    r, c, v = (np.array(a) for a in zip(*sorted(entries, key=lambda e: e[0])))   # stable: extras stay in order
    row_offsets, col_vals = codec.csr_offsets(r.astype(np.int64), m), codec.merge_col_vals(c, v.astype(F16))
    if sparse == "ptcsr":
        row_offsets, col_vals = codec.csr_to_ptcsr(row_offsets, col_vals, m)
    return {"dense_weights": dense, "row_offsets": row_offsets, "col_vals": col_vals,
            "in_perm": codec.pack_perm(rng.permutation(n))}


def _x(batch: int, n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (batch, n)).astype(F16)


@pytest.mark.parametrize("sparse", ["csr", "ptcsr"])
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_dequantize_is_the_reference_bit_for_bit(m, n, sparse):
    """SPQR-5.1..5.3, KC-7.6: dense tile in registers, the patch written over it, original column order."""
    layer = _layer(m * n, m, n, sparse=sparse)
    got = spqr.dequantize(**layer, m=m, n=n)
    assert got.dtype == F16
    assert np.array_equal(got.view(np.uint16), ref.dequantize(layer, m=m, n=n).view(np.uint16))


def test_a_position_sums_its_entries_in_storage_order():
    """SPQR-5.2: repeated entries of one position are added in storage order (an unsorted CSR row, another
    column's entry between them): 1e-4, then 2048 and -2048 round the small one away differently."""
    extra = [(2, 5, 1e-4), (2, 9, 0.25), (2, 5, 2048.0), (2, 5, -2048.0), (3, 7, -2048.0), (3, 7, 2048.0)]
    layer = _layer(3, 32, 64, extra=extra)
    want = ref.dequantize(layer, m=32, n=64)
    assert np.array_equal(spqr.dequantize(**layer, m=32, n=64).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("sparse", ["csr", "ptcsr"])
def test_the_patch_holds_exactly_the_positions_outliers_change(sparse):
    """KC-7.6: a patch entry per position whose final weight differs in bits from its dense value (so -0.0 and
    PTCSR padding added to a nonzero weight leave none), at its original column, with the final weight."""
    m, n = 48, 80
    layer = _layer(11, m, n, sparse=sparse)
    wp = ref.dequantize(layer, m=m, n=n, permuted=True)
    dense = codec.decode_dense(codec.unpack_dense(layer["dense_weights"], m, n))
    changed = wp.view(np.uint16) != dense.view(np.uint16)
    p = spqr.prepare(**{k: torch.from_numpy(np.array(v)) for k, v in layer.items()}, m=m, n=n).planes
    assert np.diff(p.patch_ro.numpy()).tolist() == changed.sum(axis=1).tolist()
    perm = codec.unpack_perm(layer["in_perm"])
    r, k = np.nonzero(changed)
    want = sorted(zip(r.tolist(), perm[k].tolist(), wp[r, k].view(np.uint16).tolist()))
    e = p.patch_cv.numpy().view(np.uint32)[:int(p.patch_ro[-1])]
    rows = np.repeat(np.arange(m), np.diff(p.patch_ro.numpy()))
    assert sorted(zip(rows.tolist(), (e & 0xFFFF).tolist(), (e >> 16).tolist())) == want


def test_no_float32_buffer_the_size_of_the_layer():
    """KC-7.6: the prepared layer holds 4.75-bit planes, the patch and a split-K workspace of (16, 16, out)."""
    m, n = 32, 1152
    p = spqr.prepare(**_layer(5, m, n), m=m, n=n).planes
    sizes = {name: (tuple(t.shape), t.dtype) for name, t in vars(p).items() if isinstance(t, torch.Tensor)}
    assert sizes["codes"] == ((n // 8, m), torch.int32) and sizes["stats"] == ((n // 16, m), torch.uint8)
    assert sizes["so"] == ((n // 16, m // 16, 4), torch.float16)
    assert sizes["workspace"] == ((_splitk.MAX_SPLIT, _splitk.MAX_SPLIT_BATCH, m), torch.float32)


@pytest.mark.parametrize("batch", [1, 5, 16, 20])
@pytest.mark.parametrize(("m", "n"), SHAPES)
def test_matmul_within_the_bound(m, n, batch):
    """QF-4.6 (W as the reference's float16 W, no rounding allowance): split-K dense part plus the patch."""
    layer = _layer(m + n, m, n, sparse="ptcsr" if batch % 2 else "csr")
    x = _x(batch, n)
    got = spqr.matmul(**layer, m=m, n=n, x=x)
    judged = within_bound(got, "float16", x, ref.dequantize(layer, m=m, n=n), w_rounding=False)
    assert judged.ok, judged.detail


def test_the_test_shapes_split_k():
    """The shapes above run several K slices in the interpreter (else the reduction would go untested)."""
    p = spqr.prepare(**_layer(1, 32, 1152), m=32, n=1152).planes
    assert p.gemv.split > 1 and p.batch.split > 1


def _prepared(m: int, n: int, seed: int = 9):
    layer = _layer(seed, m, n)
    return layer, spqr.prepare(**{k: torch.from_numpy(np.array(v)) for k, v in layer.items()}, m=m, n=n)


@pytest.mark.parametrize(("attr", "batch", "candidates"),
                         [("gemv", 1, _int4.GEMV_CANDIDATES), ("batch", 16, _int4.BATCH_CANDIDATES)])
def test_every_candidate_plan_is_within_the_bound_and_reproducible(attr, batch, candidates):
    """QF-4.6 for each tile plan the GPU tuner may pick (reduce-once and per-step, several slices); two calls
    of one plan give the same bits (fixed-order slices, no atomics)."""
    m, n = 32, 512
    layer, p = _prepared(m, n)
    x = torch.from_numpy(_x(batch, n, seed=3))
    w = ref.dequantize(layer, m=m, n=n)
    for cand in candidates:
        plan = _splitk.make_plan(cand, n, m, p.planes.block_k, _splitk.INTERPRETER_SMS)
        object.__setattr__(p.planes, attr, plan)
        first, second = spqr.matmul_prepared(p, x).numpy(), spqr.matmul_prepared(p, x).numpy()
        judged = within_bound(first, "float16", x.numpy(), w, w_rounding=False)
        assert judged.ok, (plan, judged.detail)
        assert np.array_equal(first.view(np.uint16), second.view(np.uint16)), plan


@pytest.mark.parametrize("batch", [1, 16, 20])
def test_outliers_that_cancel_their_dense_weights_give_exact_zeros(batch):
    """QF-4.6's model, exactly: a row whose every weight is an outlier cancelling its dense value is 0, so its
    outputs must be 0 (the bound is 0 there). A patch of differences (x wd added, then subtracted) would leave
    float32 rounding residue; the dense part skips patched positions instead."""
    m, n = 32, 208
    base = _layer(4, m, n, empty=(6,), scale=1.0)      # |wd| up to ~50: float32 residue would show
    dense = codec.decode_dense(codec.unpack_dense(base["dense_weights"], m, n))
    extra = [(6, k, float(-dense[6, k])) for k in range(n)]
    layer = _layer(4, m, n, extra=extra, empty=(6,), scale=1.0)
    w = ref.dequantize(layer, m=m, n=n)
    assert not w[6].any()
    x = _x(batch, n)
    got = spqr.matmul(**layer, m=m, n=n, x=x)
    assert not got[:, 6].any()
    judged = within_bound(got, "float16", x, w, w_rounding=False)
    assert judged.ok, judged.detail
