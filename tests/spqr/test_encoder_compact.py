"""Reference encoder and the compact (delta) outlier coding: properties (spec/spqr.md §9, §10)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.numpy import load_file

from qformats.errors import QFormatsError
from qformats.formats import spqr
from qformats.formats.spqr import codec, encoder, outliers

LAYERS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "spqr_quant" / "layers")
                .glob("*.safetensors"))
RELEASE = ("dense_weights", "row_offsets", "col_vals", "in_perm")


def _weights(seed: int, m: int = 32, n: int = 64, spikes: float = 0.01) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, n)) * 0.02
    w[rng.random((m, n)) < spikes] *= 20
    return w.astype(np.float16)


def _outlier_mask(layer) -> np.ndarray:
    ro, cv = spqr.to_csr(layer)
    cols, _ = codec.split_col_vals(cv)
    mask = np.zeros((layer.m, layer.n), bool)
    mask[codec.entry_rows(ro, cols.size, layer.m), cols] = True
    return mask


@settings(deadline=None, max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), shape=st.sampled_from([(16, 16), (32, 48), (48, 32)]))
def test_error_bounded_per_group(seed: int, shape) -> None:
    """SPQR-10.5: without outliers, |decode - w| <= s/2 + distance to the group's range, plus fp16 rounding."""
    w = _weights(seed, *shape)
    layer = spqr.quantize(w, tau=float("inf"))
    f = spqr.unpack_dense(layer.dense_weights, *shape)
    rows = lambda a: np.repeat(a, 16, axis=0).astype(np.float64)  # noqa: E731
    s = rows(f.w_s_s) * (f.s_code - rows(f.w_s_z))               # [m, n/16], decoded first-level scale
    z = rows(f.w_z_s) * (f.z_code - rows(f.w_z_z))
    s, z = np.repeat(s, 16, axis=1), np.repeat(z, 16, axis=1)
    lo, hi = np.minimum(-z * s, (7 - z) * s), np.maximum(-z * s, (7 - z) * s)
    outside = np.maximum(lo - w, 0) + np.maximum(w - hi, 0)
    err = np.abs(spqr.dequantize(layer, permuted=True).astype(np.float64) - w)
    assert np.all(err <= 0.5 * np.abs(s) * (1 + 2**-8) + outside + 2**-9 * (np.abs(w) + np.abs(s) * 8) + 2**-24)


@settings(deadline=None, max_examples=10)
@given(seed=st.integers(0, 2**31 - 1))
def test_outliers_reduce_error(seed: int) -> None:
    """SPQR-10.4: with statistics fitted on all weights, outliers only lower the error, entry by entry."""
    w = _weights(seed)
    base = spqr.quantize(w, tau=float("inf"), fit="all")
    with_out = spqr.quantize(w, tau=0.5, fit="all")
    e0 = np.abs(spqr.dequantize(base).astype(np.float64) - w)
    e1 = np.abs(spqr.dequantize(with_out).astype(np.float64) - w)
    mask = _outlier_mask(with_out)[:, np.argsort(codec.unpack_perm(with_out.in_perm))]
    assert np.all(e1[~mask] == e0[~mask])
    assert mask.any() and np.all(e1[mask] < e0[mask])
    assert (e1 ** 2).sum() <= (e0 ** 2).sum()


def test_spiky_layer_error_drops_with_outliers() -> None:
    """SPQR-10.3: on a layer with x20 spikes, the default encoder's outliers cut the relative error."""
    w = _weights(7, 64, 128, spikes=0.005).astype(np.float64)
    rel = lambda lay: np.linalg.norm(spqr.dequantize(lay) - w) / np.linalg.norm(w)  # noqa: E731
    assert rel(spqr.quantize(w, tau=0.5)) < 0.75 * rel(spqr.quantize(w, tau=float("inf")))


def test_outlier_code_is_code_of_zero() -> None:
    """SPQR-10.4: the dense code under an outlier is clamp(rint(0/s + z)) with the group statistics."""
    w = _weights(3)
    layer = spqr.quantize(w, tau=0.5, fit="all", code_stats="fp32", outlier_values="spqr")
    f = spqr.unpack_dense(layer.dense_weights, 32, 64)
    mask = _outlier_mask(layer)
    rows = lambda a: np.repeat(a, 16, axis=0).astype(np.float32)  # noqa: E731
    z = np.repeat(rows(f.w_z_s) * (f.z_code - rows(f.w_z_z)), 16, axis=1)
    assert mask.any()
    np.testing.assert_array_equal(f.q[mask], np.clip(np.rint(z[mask]), 0, 7))


def test_hessian_act_order() -> None:
    """SPQR-10.1: act_order is argsort(-diag H), stable: columns by descending diagonal, ties in index order."""
    diag = np.tile([1.0, 3.0, 3.0, 2.0], 4)     # 3s at 1,2,5,6,..., then 2s at 3,7,11,15, then 1s
    layer = spqr.quantize(_weights(1, 32, 16), tau=0.3, hessian=np.diag(diag), perm="act_order")
    assert codec.unpack_perm(layer.in_perm).tolist() == [1, 2, 5, 6, 9, 10, 13, 14, 3, 7, 11, 15, 0, 4, 8, 12]


def test_degenerate_group_rule() -> None:
    """SPQR-10.2: all-equal values get the range (-1, +1): scale fp32(2/7), zero fp32(1 / that) = 3.4999998."""
    s, z = encoder.minmax_params(np.full((1, 16), 0.25, np.float32))
    assert (float(s[0]), float(z[0])) == (float(np.float32(2 / 7)), float(np.float32(3.4999998)))


@settings(deadline=None, max_examples=20)
@given(seed=st.integers(0, 2**31 - 1), m=st.sampled_from([16, 32]), n=st.sampled_from([16, 64, 1024]))
def test_pack_unpack_identity(seed: int, m: int, n: int) -> None:
    """SPQR-2.2: unpack_dense(pack_dense(fields)) returns every field unchanged."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 8, (m, n))
    sc, zc = rng.integers(0, 8, (m, n // 16)), rng.integers(0, 8, (m, n // 16))
    stats = [rng.integers(0, 0x7C00, (m // 16, n // 16)).astype(np.uint16).view(np.float16) for _ in range(4)]
    f = spqr.unpack_dense(spqr.pack_dense(q, sc, zc, *stats), m, n)
    np.testing.assert_array_equal(f.q, q)
    np.testing.assert_array_equal(f.s_code, sc)
    np.testing.assert_array_equal(f.z_code, zc)
    for got, want in zip((f.w_s_s, f.w_s_z, f.w_z_s, f.w_z_z), stats):
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), n=st.sampled_from([32, 512, 4096]), rate=st.sampled_from([0.001, 0.01, 0.2]),
       sparse=st.sampled_from(["csr", "ptcsr"]))
def test_delta_round_trip(seed: int, n: int, rate: float, sparse: str) -> None:
    """SPQR-9.5: release CSR -> compact -> CSR is the identity, from CSR and PTCSR layers alike."""
    rng = np.random.default_rng(seed)
    m = 32
    mask = rng.random((m, n)) < rate
    rows, cols = np.nonzero(mask)
    vals = (rng.standard_normal(rows.size) + 3).astype(np.float16)
    ro = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int32)
    cv = codec.merge_col_vals(cols, vals)
    if sparse == "ptcsr":
        ro_s, cv_s = codec.csr_to_ptcsr(ro, cv, m)
    else:
        ro_s, cv_s = ro, cv
    layer = {"dense_weights": np.zeros(m * n // 16, np.int64), "row_offsets": ro_s, "col_vals": cv_s,
             "in_perm": codec.pack_perm(np.arange(n))}
    ro2, cv2 = outliers.from_compact(outliers.to_compact(layer))
    np.testing.assert_array_equal(ro2, ro)
    assert cv2.tobytes() == cv.tobytes()


def test_virtual_outliers_for_long_gaps() -> None:
    """SPQR-9.4: a gap of 600 columns takes (600-1)//255 = 2 virtual entries of delta 255."""
    layer = {"dense_weights": np.zeros(16 * 1024 // 16, np.int64), "row_offsets": np.r_[0, 2, np.full(15, 2)].astype(np.int32),
             "col_vals": codec.merge_col_vals([10, 610], [1.0, -2.0]), "in_perm": codec.pack_perm(np.arange(1024))}
    data = outliers.to_compact(layer)
    at = 16 + 4 * 17
    assert data[:16] == b"SQD1" + (16).to_bytes(4, "little") + (1024).to_bytes(4, "little") + (4).to_bytes(4, "little")
    assert list(data[at:at + 4]) == [10, 255, 255, 90]
    assert data[at + 4:at + 12] == bytes.fromhex("003c 0000 0000 00c0".replace(" ", ""))
    stats = outliers.compact_stats(data)
    assert (stats["real"], stats["virtual"], stats["index_bits_per_outlier"]) == (2, 2, 16.0)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_golden_outliers_compact_round_trip(path: Path) -> None:
    """SPQR-9.5: every upstream layer's outliers survive compact coding; 8 bits per index (no gap > 255)."""
    t = load_file(path)
    layer = spqr.SpQRLayer({k: t[k] for k in RELEASE})
    data = outliers.to_compact(layer)
    ro, cv = outliers.from_compact(data)
    ro0, cv0 = spqr.to_csr(layer)
    np.testing.assert_array_equal(ro, ro0)
    assert cv.tobytes() == cv0.tobytes()
    if cv0.size:
        assert outliers.compact_stats(data)["index_bits_per_outlier"] == 8.0


def test_one_percent_uniform_outliers_cost_8_to_9_bits() -> None:
    """SPQR-9.6: at 1% uniformly placed outliers the index costs 8-9 bits per real outlier (paper §4.2)."""
    rng = np.random.default_rng(0)
    m, n = 256, 4096
    rows, cols = np.nonzero(rng.random((m, n)) < 0.01)
    layer = {"dense_weights": np.zeros(m * n // 16, np.int64),
             "row_offsets": np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=m))]).astype(np.int32),
             "col_vals": codec.merge_col_vals(cols, np.ones(cols.size, np.float16)),
             "in_perm": codec.pack_perm(np.arange(n))}
    bits = outliers.compact_stats(outliers.to_compact(layer))["index_bits_per_outlier"]
    assert 8.0 < bits < 9.0


@pytest.mark.parametrize("mutate, code", [
    pytest.param(lambda b: b[:-1], "spqr.compact.malformed", id="truncated"),
    pytest.param(lambda b: b"XXXX" + b[4:], "spqr.compact.malformed", id="magic"),
    pytest.param(lambda b: b[:16 + 4 * 17 + 1] + b"\0" + b[16 + 4 * 17 + 2:], "spqr.compact.delta", id="zero-delta"),
    pytest.param(lambda b: b[:16 + 4 * 17] + b"\xff" + b[16 + 4 * 17 + 1:], "spqr.compact.delta", id="past-n"),
])
def test_compact_stream_errors(mutate, code: str) -> None:
    """SPQR-9.3, SPQR-9.4: malformed streams are rejected with a code."""
    layer = {"dense_weights": np.zeros(16 * 256 // 16, np.int64), "row_offsets": np.r_[0, 2, np.full(15, 2)].astype(np.int32),
             "col_vals": codec.merge_col_vals([250, 251], [1.0, 2.0]), "in_perm": codec.pack_perm(np.arange(256))}
    with pytest.raises(QFormatsError) as exc:
        outliers.from_compact(mutate(outliers.to_compact(layer)))
    assert exc.value.code == code


def test_compact_refuses_positive_zero_values() -> None:
    """SPQR-9.5: a CSR entry of +0.0 cannot be told from a virtual outlier."""
    layer = {"dense_weights": np.zeros(16 * 16 // 16, np.int64), "row_offsets": np.r_[0, np.ones(16)].astype(np.int32),
             "col_vals": codec.merge_col_vals([3], [0.0]), "in_perm": codec.pack_perm(np.arange(16))}
    with pytest.raises(QFormatsError) as exc:
        outliers.to_compact(layer)
    assert exc.value.code == "spqr.compact.unrepresentable"
