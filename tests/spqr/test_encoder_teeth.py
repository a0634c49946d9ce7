"""The reference SpQR encoder's arguments, statistics, outliers and GPTQ feedback asserted exactly (issue 33: tests
with teeth; `make mutation MODULE=qformats/formats/spqr/encoder.py`).

Expected values come from hand-worked SPQR-10.2 statistics, or from a replay written here from the text of SPQR-10.2 ..
10.4 (loops over rows and columns, NumPy's own inv / cholesky for U): the replay reads the statistics a decoder sees
(SPQR-5.1, float16 op by op) from the layer's own packed fields, fits the statistics of each group again from the
weights as the clauses describe, and checks every code, statistic and outlier; none comes from the encoder's code.
Dead Hessian columns (zero diagonal) follow GPTQ (H[d, d] = 1 after damping, W[:, d] = 0), as R/eng does.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats import spqr
from qformats.formats.spqr import codec, encoder
from whole_error import refusal, whole

F16, F32 = np.float16, np.float32
W16 = np.ones((16, 16), F32)


# -- arguments (SPQR-10.1) ----------------------------------------------------------------------------

@pytest.mark.parametrize("weight,actual", [(np.ones(16, F32), ("float32", (16,))),
                                           (np.ones((16, 16), np.int64), ("int64", (16, 16)))])
def test_weight_not_a_2d_float_array_is_refused_whole(weight, actual):
    """SPQR-10.1: the weight is a 2-D float array (out, in); a vector or an integer matrix is not."""
    assert whole(lambda: spqr.quantize(weight)) == refusal("argument.invalid", "weight", "a 2-D float array (out, in)",
                                                           actual)


def test_a_ragged_weight_is_refused_naming_the_weight():
    """SPQR-10.1 / QF-2.6: a ragged list is no array."""
    assert whole(lambda: spqr.quantize([[1.0], [1.0, 2.0]])) == refusal("tensor.dtype", "weight", "an array", "list")


def test_weight_dims_are_checked_naming_the_weight():
    """SPQR-2.1: m = 8 is no multiple of 16."""
    assert whole(lambda: spqr.quantize(np.ones((8, 16), F32))) == refusal(
        "spqr.dims", "weight", "of shape (m, n) with m, n positive multiples of 16 and n <= 65536", (8, 16))


def test_a_nan_weight_is_refused_whole():
    """SPQR-10.1: the weight is finite; the first NaN is named by index."""
    w = W16.copy()
    w[1, 2] = np.nan
    assert whole(lambda: spqr.quantize(w)) == refusal("argument.invalid", "weight", "finite float32", "NaN at [1, 2]")


def test_the_float16_range_is_inclusive():
    """SPQR-10.1: |w| <= 65504 is allowed (65504 is float16's largest value); 65536 at [3, 4] is refused."""
    w = W16.copy()
    w[3, 4] = 65504.0
    assert spqr.quantize(w, tau=float("inf")).m == 16
    w[3, 4] = 65536.0
    assert whole(lambda: spqr.quantize(w)) == refusal(
        "argument.invalid", "weight", "within the float16 range |w| <= 65504", "65536.0 at [3, 4]")


@pytest.mark.parametrize("name,allowed", [("sparse", "'csr' or 'ptcsr'"), ("fit", "'loo' or 'all'"),
                                          ("code_stats", "'decoded' or 'fp32'"),
                                          ("outlier_values", "'additive' or 'spqr'")])
def test_an_unknown_choice_is_refused_whole(name, allowed):
    """SPQR-10.1: each choice argument takes one of its two values."""
    assert whole(lambda: spqr.quantize(W16, **{name: "other"})) == refusal("argument.invalid", name, allowed, "other")


@pytest.mark.parametrize("kw,constraint,actual", [
    ({"tau": "0.2"}, "a number > 0 (inf disables outliers)", "0.2"),
    ({"tau": 0.0}, "a number > 0 (inf disables outliers)", 0.0),
    ({"percdamp": float("inf")}, "a finite number >= 0", float("inf")),
    ({"percdamp": -0.5}, "a finite number >= 0", -0.5)])
def test_bad_numbers_are_refused_whole(kw, constraint, actual):
    """SPQR-10.1: tau a number > 0, percdamp a finite number >= 0."""
    (name, _), = kw.items()
    assert whole(lambda: spqr.quantize(W16, **kw)) == refusal("argument.invalid", name, constraint, actual)


@pytest.mark.parametrize("percdamp", [0.0, 0.5])
def test_percdamp_zero_and_below_one_are_allowed(percdamp):
    """SPQR-10.1: percdamp >= 0, so 0 and 0.5 quantize (with a positive definite Hessian)."""
    assert spqr.quantize(W16, hessian=np.eye(16) * 2, percdamp=percdamp).n == 16


@pytest.mark.parametrize("hessian,actual", [(np.eye(17), ("float64", (17, 17))),
                                            (np.eye(16, dtype=complex), ("complex128", (16, 16))),
                                            ("H", ("str32", ()))])
def test_a_hessian_not_a_real_n_by_n_matrix_is_refused_whole(hessian, actual):
    """SPQR-10.1: the Hessian is a real (n, n) matrix; (17, 17), complex and a string are not."""
    assert whole(lambda: spqr.quantize(W16, hessian=hessian)) == refusal(
        "argument.invalid", "hessian", "a real (16, 16) matrix", actual)


def test_a_ragged_hessian_is_refused_naming_the_hessian():
    """SPQR-10.1 / QF-2.6: a ragged list is no array."""
    assert whole(lambda: spqr.quantize(W16, hessian=[[1.0], [1.0, 2.0]])) == refusal(
        "tensor.dtype", "hessian", "an array", "list")


def test_a_nan_hessian_is_refused_whole():
    """SPQR-10.1: the Hessian is finite."""
    h = np.eye(16)
    h[0, 1] = np.nan
    assert whole(lambda: spqr.quantize(W16, hessian=h)) == refusal(
        "argument.invalid", "hessian", "finite float64", "NaN at [0, 1]")


def test_a_hessian_singular_after_damping_is_refused_whole():
    """SPQR-10.3: -I damped by 1 * mean|diag| = 1 is the zero matrix, which has no inverse."""
    assert whole(lambda: spqr.quantize(W16, hessian=-np.eye(16))) == refusal(
        "argument.invalid", "hessian", "positive definite after damping", "singular")


@pytest.mark.parametrize("perm,constraint", [("act_order", "'identity' without a hessian"),
                                             ("random", "'identity', 'act_order' or an index array")])
def test_a_bad_permutation_name_is_refused_whole(perm, constraint):
    """SPQR-10.1: act_order needs the Hessian; other names are unknown."""
    assert whole(lambda: spqr.quantize(W16, perm=perm)) == refusal("argument.invalid", "perm", constraint, perm)


def test_an_explicit_permutation_is_checked_naming_perm():
    """SPQR-10.1: an explicit permutation is a permutation of 0..n-1."""
    assert whole(lambda: spqr.quantize(W16, perm=np.zeros(16, int))) == refusal(
        "argument.invalid", "perm", "a permutation of 0..15", "index 0 appears 16 times")


def test_a_ragged_permutation_is_refused_naming_perm():
    """SPQR-10.1 / QF-2.6: a ragged list is no array."""
    assert whole(lambda: spqr.quantize(W16, perm=[[0], [1, 2]])) == refusal("tensor.dtype", "perm", "an array", "list")


# -- statistics (SPQR-10.2) ---------------------------------------------------------------------------

def test_minmax_params_per_row_in_float32():
    """SPQR-10.2: rows [0 .. 7] and [-2 .. 12] (float64 in): scale (max - min) / 7 = 1 and 2, zero -min / scale
    = 0 and 1, float32 out; 1/3 enters as float32(1/3)."""
    x = np.array([[0.0, 7.0, 3.0], [-2.0, 12.0, 1 / 3]])
    s, z = encoder.minmax_params(x)
    assert (s.dtype, z.dtype) == (F32, F32)
    assert s.tolist() == [1.0, 2.0] and z.tolist() == [0.0, 1.0]
    s, z = encoder.minmax_params(np.array([[1 / 3, 1.0]]))
    assert s.tolist() == [float((F32(1) - F32(1 / 3)) / F32(7))]


@pytest.mark.parametrize("x,scale,zero,want", [
    (0.5 + 2.0 ** -30, 1.0, 0.0, 0),         # x rounds to 0.5 in float32, then half to even
    (1.5, 1 + 2.0 ** -30, 0.0, 2),           # the scale rounds to 1 in float32: 1.5 -> 2
    (0.0, 1.0, 1.5 - 2.0 ** -30, 2),         # the zero rounds to 1.5 in float32: -> 2
    (1.5e-9, 0.0, 0.0, 2),                   # scale 0 is taken as 1e-9: 1.5 -> 2
    (2.5e-9, 1e-12, 0.0, 2),                 # scale below 1e-9 likewise: 2.5 -> 2
    (-3.0, 1.0, 1.0, 0), (100.0, 1.0, 0.0, 7)])
def test_quantize_codes_in_float32_clamped(x, scale, zero, want):
    """SPQR-10.2: clamp(rint(x / max(scale, 1e-9) + zero), 0, 7) in float32, half to even."""
    got = encoder.quantize_codes(np.array([x]), np.array([scale]), np.array([zero]))
    assert got.dtype == F32 and got.tolist() == [want]


def _hand_layer_weight() -> tuple[np.ndarray, list[int], list[int]]:
    """Row r: (j % 8 - k_r) * c_r with c_r = 1 + (r % 8) / 8 and k_r = 3r % 8: scale c_r, zero k_r exactly."""
    c = [1 + (r % 8) / 8 for r in range(16)]
    k = [3 * r % 8 for r in range(16)]
    w = np.array([[(j % 8 - k[r]) * c[r] for j in range(16)] for r in range(16)], F32)
    return w, [r % 8 for r in range(16)], k


def test_a_hand_worked_layer_without_outliers():
    """SPQR-10.2: first level scale c_r, zero k_r; second level over the 16 scales 1 .. 1.875: scale 0.875 / 7 =
    0.125, zero -1 / 0.125 = -8, codes r % 8; over the zeros 0 .. 7: scale 1, zero -0.0, codes k_r. Codes j % 8."""
    w, s_codes, k = _hand_layer_weight()
    layer = spqr.quantize(w, tau=float("inf"))
    f = codec.unpack_dense(layer.dense_weights, 16, 16)
    assert f.q.tolist() == [[j % 8 for j in range(16)]] * 16
    assert f.s_code[:, 0].tolist() == s_codes and f.z_code[:, 0].tolist() == k
    assert [f.w_s_s.item(), f.w_s_z.item(), f.w_z_s.item(), f.w_z_z.item()] == [0.125, -8.0, 1.0, 0.0]
    assert layer.row_offsets.tolist() == [0] * 17 and layer.col_vals.dtype == np.int32 and layer.col_vals.size == 0
    assert codec.unpack_perm(layer.in_perm).tolist() == list(range(16))
    assert np.array_equal(spqr.dequantize(layer).astype(F32), w)


def test_a_float64_weight_is_rounded_to_float32_first():
    """SPQR-10.2 "in float32": w + 2^-30 (float64) quantizes as w."""
    w, _, _ = _hand_layer_weight()
    a = spqr.quantize(w, tau=float("inf"))
    b = spqr.quantize(w.astype(np.float64) + 2.0 ** -30, tau=float("inf"))
    assert np.array_equal(a.dense_weights, b.dense_weights)


# -- the replay (SPQR-10.2 .. 10.4) ---------------------------------------------------------------------

def _minmax(x: np.ndarray) -> tuple[F32, F32]:
    """SPQR-10.2 on one row of values, float32."""
    lo, hi = F32(x.min()), F32(x.max())
    if lo == hi:
        lo, hi = F32(-1), F32(1)
    s = F32((hi - lo) / F32(7))
    return s, F32(-lo / s)


def _code(x, s, z) -> np.ndarray:
    return np.clip(np.rint(F32(x) / np.maximum(F32(s), F32(1e-9)) + F32(z)), 0, 7).astype(F32)


def _recon_err(vals: np.ndarray, d: np.ndarray) -> float:
    s, z = _minmax(vals)
    rec = s * (_code(vals, s, z) - z)
    return float((((rec - vals) / d) ** 2).sum())


def _likely(grp: np.ndarray, d: np.ndarray, threshold: float) -> np.ndarray:
    """SPQR-10.3's leave-one-out test, one row and one left-out weight at a time."""
    m, g = grp.shape
    out = np.zeros((m, g), bool)
    for r in range(m):
        base = _recon_err(grp[r], d)
        for i in range(g):
            others = np.delete(np.arange(g), i)
            out[r, i] = base - _recon_err(grp[r, others], d[others]) > threshold
    return out


def _fit(grp: np.ndarray, likely: np.ndarray) -> dict:
    """SPQR-10.2 both levels on a group (likely outliers replaced by their row's mean of the others)."""
    m = grp.shape[0]
    s1, z1 = np.zeros(m, F32), np.zeros(m, F32)
    for r in range(m):
        keep = ~likely[r]
        mean = F32(grp[r][keep].sum(dtype=F32) / max(keep.sum(), 1)) if keep.any() else F32(0)
        s1[r], z1[r] = _minmax(np.where(likely[r], mean, grp[r]).astype(F32))
    out = {"s_code": np.zeros(m, F32), "z_code": np.zeros(m, F32), "stats": []}
    for t in range(m // 16):
        rows = slice(16 * t, 16 * t + 16)
        ss, sz = _minmax(s1[rows])
        zs, zz = _minmax(z1[rows])
        out["s_code"][rows], out["z_code"][rows] = _code(s1[rows], ss, sz), _code(z1[rows], zs, zz)
        out["stats"].append((ss, sz, zs, zz))
    return out


def _decoded(f, t: int, g: int) -> tuple[np.ndarray, np.ndarray]:
    """SPQR-5.1: per-row scale and zero of tile (t, g) from the stored fields, float16 op by op."""
    rows = slice(16 * t, 16 * t + 16)
    s = f.w_s_s[t, g] * (f.s_code[rows, g].astype(F16) - f.w_s_z[t, g])
    z = f.w_z_s[t, g] * (f.z_code[rows, g].astype(F16) - f.w_z_z[t, g])
    return s.astype(F32), z.astype(F32)


def _replay(w, layer, *, tau, hessian=None, percdamp=1.0, fit="loo", code_stats="decoded", outlier_values="additive"):
    """Check the layer against SPQR-10.2 .. 10.4 column by column; returns the expected outlier mask."""
    m, n = w.shape
    f = codec.unpack_dense(layer.dense_weights, m, n)
    p = codec.unpack_perm(layer.in_perm)
    wp = w.astype(F32)[:, p].astype(np.float64)
    if hessian is None:
        u = np.eye(n)
    else:
        h = np.array(hessian, np.float64)[p][:, p]
        dead = np.diag(h) == 0
        h += np.eye(n) * percdamp * np.abs(np.diag(h)).mean()
        h[dead, dead] = 1
        wp[:, dead] = 0
        h_inv = np.linalg.inv(h)
        u = np.linalg.cholesky((h_inv + h_inv.T) / 2).T
    d = np.diag(u)
    threshold = tau * float(np.mean([np.var(wp[:, j], ddof=1) / d[j] ** 2 for j in range(n)]))
    mask = np.zeros((m, n), bool)
    values = np.zeros((m, n), F16)
    for g in range(n // 16):
        cols = slice(16 * g, 16 * g + 16)
        grp = wp[:, cols].astype(F32)
        likely = (_likely(grp, d[cols].astype(F32), threshold) if fit == "loo" and np.isfinite(threshold)
                  else np.zeros(grp.shape, bool))
        want = _fit(grp, likely)
        assert np.array_equal(f.s_code[:, g], want["s_code"]) and np.array_equal(f.z_code[:, g], want["z_code"])
        for t, st in enumerate(want["stats"]):
            assert [f.w_s_s[t, g], f.w_s_z[t, g], f.w_z_s[t, g], f.w_z_z[t, g]] == [F16(v) for v in st]
        dec = [_decoded(f, t, g) for t in range(m // 16)]
        s_dec, z_dec = np.concatenate([a for a, _ in dec]), np.concatenate([b for _, b in dec])
        if code_stats == "decoded":
            s, z = s_dec, z_dec
        else:                                                   # SPQR-7.8: float32 second-level statistics
            s = np.concatenate([st[0] * (want["s_code"][16 * t:16 * t + 16] - st[1])
                                for t, st in enumerate(want["stats"])]).astype(F32)
            z = np.concatenate([st[2] * (want["z_code"][16 * t:16 * t + 16] - st[3])
                                for t, st in enumerate(want["stats"])]).astype(F32)
        code0 = _code(np.zeros(m), s, z)
        dense0 = (s_dec.astype(F16) * (code0.astype(F16) - z_dec.astype(F16))).astype(F32)
        for j in range(16 * g, 16 * g + 16):
            col = wp[:, j].astype(F32)
            code = _code(col, s, z)
            err = (col - s * (code - z)) / d[j]
            out = err.astype(np.float64) ** 2 > threshold
            assert np.array_equal(f.q[:, j], np.where(out, code0, code)), f"column {j}"
            stored = col - dense0 if outlier_values == "additive" else col
            values[:, j] = np.where(out, stored, 0).astype(F16)
            mask[:, j] = out & (values[:, j] != 0)
            deq = np.where(out, col, s * (code - z))
            if j + 1 < n:
                wp[:, j + 1:] -= np.outer((wp[:, j] - deq) / d[j], u[j, j + 1:])
    ro, cv = spqr.to_csr(layer)
    got_cols, got_vals = codec.split_col_vals(cv)
    rows, cols = np.nonzero(mask)
    assert ro.tolist() == np.concatenate([[0], np.cumsum(mask.sum(1))]).tolist()
    assert got_cols.tolist() == cols.tolist() and got_vals.view(np.uint16).tolist() == values[rows, cols].view(
        np.uint16).tolist()
    return mask


def _spiky(seed: int, m: int = 32, n: int = 32, dtype=F32) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, n)) * 0.02
    w[rng.random((m, n)) < 0.03] *= 20
    return w.astype(dtype)


def _hessian(seed: int, n: int = 32, dead: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4 * n, n)) * (rng.random(n) * 3 + 0.1)
    if dead is not None:
        x[:, dead] = 0
    return x.T @ x


@pytest.mark.parametrize("fit,code_stats,outlier_values", [("loo", "decoded", "additive"), ("all", "fp32", "spqr"),
                                                           ("loo", "fp32", "spqr"), ("all", "decoded", "additive")])
def test_without_a_hessian_every_field_replays(fit, code_stats, outlier_values):
    """SPQR-10.2 .. 10.4 with U = I: statistics, codes, outliers and their values as the clauses say."""
    w = _spiky(1)
    layer = spqr.quantize(w, tau=0.25, fit=fit, code_stats=code_stats, outlier_values=outlier_values)
    assert _replay(w, layer, tau=0.25, fit=fit, code_stats=code_stats, outlier_values=outlier_values).any()


@pytest.mark.parametrize("fit,perm", [("all", "identity"), ("loo", "act_order")])
def test_with_a_hessian_every_field_replays(fit, perm):
    """SPQR-10.3: damping percdamp * mean(diag H), U of (H + damping)^-1, threshold tau * mean(var / U_jj^2), each
    column's error fed back to the later ones through U; column 5 is dead (zero diagonal: GPTQ zeroes it)."""
    w, h = _spiky(2), _hessian(3, dead=5)
    layer = spqr.quantize(w, tau=0.25, hessian=h, perm=perm, percdamp=0.3, fit=fit)
    mask = _replay(w, layer, tau=0.25, hessian=h, percdamp=0.3, fit=fit)
    assert mask.any()


@pytest.mark.parametrize("seed,m,n,dtype,kw", [
    (157, 128, 64, F32, {"fit": "all"}),
    (23, 64, 128, F32, {"fit": "all"}),
    (38, 64, 128, np.float64, {"fit": "loo", "code_stats": "fp32"})])
def test_wider_layers_with_a_hessian_replay_in_float32(seed, m, n, dtype, kw):
    """SPQR-10.2 .. 10.3 "in float32": float32 statistics, weights rounded to float32 first (float64 in) and each
    column's error taken in float32, while the feedback runs in float64; on these layers a float64 column, float64
    decoded statistics or unrounded float64 weights would change a code."""
    w, h = _spiky(seed, m, n, dtype), _hessian(seed + 1000, n)
    _replay(w, spqr.quantize(w, tau=0.25, hessian=h, **kw), tau=0.25, hessian=h, **kw)


def test_with_a_hessian_and_no_outliers_the_feedback_replays():
    """SPQR-10.3 with tau = inf: codes only, every column after the error feedback of the earlier ones."""
    w, h = _spiky(4), _hessian(5)
    layer = spqr.quantize(w, tau=float("inf"), hessian=h)
    assert not _replay(w, layer, tau=float("inf"), hessian=h).any()


def test_ptcsr_holds_the_csr_outliers():
    """SPQR-10.1 / SPQR-3.4: sparse="ptcsr" stores the same outliers as "csr", PTCSR-ordered."""
    w = _spiky(6)
    csr, ptcsr = spqr.quantize(w, tau=0.25), spqr.quantize(w, tau=0.25, sparse="ptcsr")
    assert ptcsr.sparse == "ptcsr" and csr.sparse == "csr"
    want = codec.csr_to_ptcsr(csr.row_offsets, csr.col_vals, 32)
    assert ptcsr.row_offsets.tolist() == want[0].tolist() and ptcsr.col_vals.tolist() == want[1].tolist()
    assert np.array_equal(ptcsr.dense_weights, csr.dense_weights)


def _stored(layer) -> list[tuple[int, int, float]]:
    ro, cv = spqr.to_csr(layer)
    cols, vals = codec.split_col_vals(cv)
    rows = np.repeat(np.arange(layer.m), np.diff(ro))
    return [(int(r), int(c), float(v)) for r, c, v in zip(rows, cols, vals)]


def test_an_outlier_whose_float16_value_is_zero_is_not_stored():
    """SPQR-10.4: weights in [10, 17]; row 0's 1e-9 and row 1's 1.0 are likely outliers (fit "loo"), fitted out of
    the range, and outliers. As R writes them ("spqr") their values are fp16(1e-9) = +0.0, not stored, and 1.0."""
    w = (np.random.default_rng(0).random((16, 16)) * 7 + 10).astype(F32)
    w[0, 3], w[1, 5] = 1e-9, 1.0
    layer = spqr.quantize(w, tau=0.2, outlier_values="spqr")
    assert _stored(layer) == [(1, 5, 1.0)]
    _replay(w, layer, tau=0.2, outlier_values="spqr")
    f = codec.unpack_dense(layer.dense_weights, 16, 16)
    s, z = _decoded(f, 0, 0)
    assert f.q[0, 3] == _code(0.0, s[0], z[0])                           # the outlier's code is the code of 0


def test_a_row_with_one_weight_left_fits_on_it():
    """SPQR-10.3: in this row 15 of 16 weights pass the leave-one-out test (tau 1e-3, the other rows zero); they
    are replaced by the mean of the one left, and the row is fitted on those."""
    row = [-0.2876358926296234, -0.21076706051826477, 2.0817573070526123, 0.35112202167510986, -0.5326155424118042,
           0.6483176946640015, 1.9392356872558594, -0.603768527507782, 1.413316011428833, 0.8027052283287048,
           0.3493998944759369, 0.6715583205223083, 0.3063090741634369, -1.0081435441970825, -0.24681638181209564,
           0.25651875138282776]
    w = np.zeros((16, 16), F32)
    w[0] = row
    threshold = 1e-3 * float(np.var(w.astype(np.float64), axis=0, ddof=1).mean())
    assert _likely(w, np.ones(16, F32), threshold)[0].sum() == 15
    _replay(w, spqr.quantize(w, tau=1e-3), tau=1e-3)


def test_a_dead_column_has_unit_scaled_error():
    """GPTQ / SPQR-10.3: a dead column (zero diagonal) is zeroed and gets H[d, d] = 1 after damping, so U_dd = 1 and
    its error is compared unscaled: with tau putting the threshold at 1.5 times its largest squared error, no weight
    of it is an outlier (with U_dd = 1/sqrt 2 the largest would be)."""
    w, h = _spiky(7), _hessian(8, dead=5)
    f = codec.unpack_dense(spqr.quantize(w, tau=float("inf"), hessian=h, fit="all").dense_weights, 32, 32)
    s, z = np.concatenate([_decoded(f, t, 0)[0] for t in range(2)]), np.concatenate([_decoded(f, t, 0)[1]
                                                                                      for t in range(2)])
    e2 = ((F32(0) - s * (_code(np.zeros(32), s, z) - z)).astype(np.float64) ** 2).max()
    hd = h.copy()
    hd += np.eye(32) * np.abs(np.diag(h)).mean()
    hd[5, 5] = 1
    hi = np.linalg.inv(hd)
    d = np.diag(np.linalg.cholesky((hi + hi.T) / 2).T)
    wz = w.astype(np.float64)
    wz[:, 5] = 0
    tau = 1.5 * e2 / float((np.var(wz, axis=0, ddof=1) / d ** 2).mean())
    layer = spqr.quantize(w, tau=tau, hessian=h, fit="all")
    assert d[5] == 1.0 and e2 > 0
    assert not _replay(w, layer, tau=tau, hessian=h, fit="all")[:, 5].any()


def test_default_tau_is_0_2():
    """SPQR-10.1: tau defaults to 0.2 (on this layer 0.2 and 1.2 pick different outliers)."""
    w = _spiky(9)
    assert _stored(spqr.quantize(w)) == _stored(spqr.quantize(w, tau=0.2)) != _stored(spqr.quantize(w, tau=1.2))
