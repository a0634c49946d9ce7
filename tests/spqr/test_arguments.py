"""Bad arguments, tensor variants and legacy-dict errors of the SpQR package (spec/spqr.md §2-§10)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.errors import QFormatsError
from qformats.formats import spqr
from qformats.formats.spqr import codec, outliers

LAYERS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "spqr_quant" / "layers")
                .glob("*.safetensors"))
RELEASE = ("dense_weights", "row_offsets", "col_vals", "in_perm")
CSR = LAYERS[0]     # p01: CSR, 64 x 128, 83 outliers
EMPTY_PTCSR = LAYERS[5]   # p06: PTCSR, 48 x 96, no outliers


def _golden(path: Path = CSR) -> dict[str, np.ndarray]:
    t = load_file(path)
    return {k: t[k].copy() for k in RELEASE}


def _legacy(path: Path = CSR) -> dict[str, np.ndarray]:
    return {k[len("legacy."):]: v.copy() for k, v in load_file(path).items() if k.startswith("legacy.")}


def _error(fn, *args, **kw) -> QFormatsError:
    with pytest.raises(QFormatsError) as exc:
        fn(*args, **kw)
    return exc.value


# -- layer arguments (SPQR-2.1) ---------------------------------------------------------------

@pytest.mark.parametrize("fn", [spqr.check_layer, spqr.dequantize, spqr.to_csr, spqr.outlier_count,
                                spqr.portability_findings, spqr.to_compact], ids=lambda f: f.__name__)
@pytest.mark.parametrize("value", [pytest.param(None, id="none"), pytest.param([1, 2], id="list")])
def test_non_mapping_layer_is_an_argument_error(fn, value) -> None:
    """QF-2.6: a layer that is neither an SpQRLayer nor a mapping of its tensors is argument.invalid."""
    assert _error(fn, value).code == "argument.invalid"


def test_built_layer_is_checked_against_given_dimensions() -> None:
    """SPQR-2.1: given m and n MUST agree with the tensors, also for an already built SpQRLayer."""
    layer = spqr.SpQRLayer(_golden())
    assert _error(spqr.dequantize, layer, m=48).code == "tensor.shape"
    assert spqr.outlier_count(layer, m=64, n=128) == 83


@pytest.mark.parametrize("fn", [spqr.check_layer, spqr.dequantize], ids=lambda f: f.__name__)
@pytest.mark.parametrize("kw", [pytest.param({"m": 64.0}, id="m-float"), pytest.param({"m": "64"}, id="m-str"),
                                pytest.param({"n": 128.0}, id="n-float"), pytest.param({"n": True}, id="n-bool")])
def test_dimensions_must_be_integers(fn, kw) -> None:
    """QF-2.6: m and n are integers or None; 64.0, '64' and True are argument.invalid."""
    assert _error(fn, spqr.SpQRLayer(_golden()), **kw).code == "argument.invalid"


def test_non_contiguous_in_perm_is_read() -> None:
    """SPQR-4.1: a strided int32 in_perm decodes exactly like its contiguous copy."""
    t = _golden()
    want = spqr.dequantize(t)
    t["in_perm"] = np.repeat(t["in_perm"], 2)[::2]
    assert not t["in_perm"].flags.c_contiguous
    np.testing.assert_array_equal(spqr.dequantize(t).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("name", RELEASE)
def test_byte_swapped_tensor_is_refused(name: str) -> None:
    """SPQR-2.1: a tensor in non-native byte order ('>i8' names itself int64) is tensor.dtype."""
    t = _golden()
    t[name] = t[name].astype(t[name].dtype.newbyteorder(">"))
    assert _error(spqr.check_layer, t).code == "tensor.dtype"


def test_unexpected_tensor() -> None:
    """SPQR-2.1: a release layer MUST consist of exactly the four tensors."""
    t = _golden()
    t["scales"] = np.zeros(4, np.float16)
    err = _error(spqr.check_layer, t)
    assert (err.code, err.tensor) == ("tensor.unexpected", "scales")


N24 = {"dense_weights": np.zeros(16, np.int64), "row_offsets": np.zeros(2, np.int32),
       "col_vals": np.zeros(0, np.int32), "in_perm": codec.pack_perm(np.arange(24))}


@pytest.mark.parametrize("call", [
    pytest.param(lambda: spqr.check_layer(N24), id="layer-n-24"),
    pytest.param(lambda: spqr.quantize(np.zeros((24, 16), np.float32)), id="quantize-m-24"),
])
def test_dims(call) -> None:
    """SPQR-2.1: m and n MUST be positive multiples of 16 with n <= 65536."""
    assert _error(call).code == "spqr.dims"


def test_float32_empty_col_vals_only_with_csr() -> None:
    """SPQR-7.2: float32[0] col_vals is spqr_quant's empty *CSR* set; with PTCSR row_offsets it is tensor.dtype."""
    t = _golden(EMPTY_PTCSR)
    assert spqr.check_layer(t)["sparse"] == "ptcsr"
    t["col_vals"] = np.zeros(0, np.float32)
    assert _error(spqr.check_layer, t).code == "tensor.dtype"


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_outlier_count_matches_upstream(path: Path) -> None:
    """SPQR-3.8: outlier_count is the upstream quantizer's outlier count (for CSR also row_offsets[-1])."""
    t, nnz = _golden(path), _legacy(path)["outliers_matrix.values"].size
    if t["row_offsets"].size == _legacy(path)["quant_weights"].shape[0] + 1:
        assert int(t["row_offsets"][-1]) == nnz
    assert spqr.outlier_count(t) == nnz


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS   # p03 is the float32[0] variant
                                  if p.stem != "p03_csr_identity_32x64_nooutliers"])
def test_tensor_specs_match_spqr_quant_files(path: Path) -> None:
    """SPQR-2.1: tensor_specs gives the dtypes and shapes spqr_quant 0.2.0 writes."""
    t = _golden(path)
    m, n = _legacy(path)["quant_weights"].shape
    sparse = "csr" if t["row_offsets"].size == m + 1 else "ptcsr"
    specs = spqr.tensor_specs(m, n, t["col_vals"].size, sparse=sparse)
    assert [(s.name, s.dtype, s.shape) for s in specs] == [(k, t[k].dtype.name, t[k].shape) for k in RELEASE]


# -- config (SPQR-6.1) ------------------------------------------------------------------------

def test_config_without_shapes_is_invalid() -> None:
    """SPQR-6.1: quantization_config MUST have shapes (HF builds its placeholders from it)."""
    err = _error(spqr.check_config, {"quant_method": "spqr", "bits": 3, "beta1": 16, "beta2": 16})
    assert (err.code, err.tensor) == ("spqr.config.invalid", "shapes")


@pytest.mark.parametrize("value", [pytest.param(None, id="none"), pytest.param(["bits"], id="list")])
def test_config_findings_need_a_mapping(value) -> None:
    """SPQR-6.1: a quantization_config that is not a mapping is spqr.config.invalid, not a traceback."""
    assert _error(spqr.config_findings, value).code == "spqr.config.invalid"


# -- packing helpers (SPQR-2.2, SPQR-3.2) -----------------------------------------------------

def _fields(**change) -> list[np.ndarray]:
    f = {"q": np.zeros((16, 16), np.uint8), "s_code": np.zeros((16, 1), np.uint8),
         "z_code": np.zeros((16, 1), np.uint8)} | {k: np.zeros((1, 1), np.float16) for k in ("a", "b", "c", "d")}
    return list((f | change).values())


@pytest.mark.parametrize("change", [
    pytest.param({"q": np.full((16, 16), 8)}, id="q-8"),
    pytest.param({"z_code": np.full((16, 1), -1)}, id="z-negative"),
    pytest.param({"s_code": np.full((16, 1), 2.5)}, id="s-float"),
])
def test_pack_dense_refuses_codes_outside_3_bits(change) -> None:
    """SPQR-2.2: codes are 3-bit fields; code 8 would spill into the next field."""
    assert _error(spqr.pack_dense, *_fields(**change)).code == "bits.value_range"


@pytest.mark.parametrize("col", [pytest.param(70000, id="70000"), pytest.param(-1, id="negative")])
def test_merge_col_vals_refuses_columns_outside_16_bits(col: int) -> None:
    """SPQR-3.2: the column is the low 16 bits; 70000 would be stored as 4464."""
    assert _error(codec.merge_col_vals, [col], [1.0]).code == "bits.value_range"


# -- compact stream (SPQR-9.3) ----------------------------------------------------------------

@pytest.mark.parametrize("fn", [outliers.from_compact, outliers.compact_stats], ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", [pytest.param("abc", id="str"), pytest.param(None, id="none"),
                                  pytest.param(10**10, id="int")])
def test_compact_stream_must_be_bytes(fn, data) -> None:
    """SPQR-9.3: the stream is bytes; a str, None or an int (bytes(int) allocates) is argument.invalid."""
    assert _error(fn, data).code == "argument.invalid"


# -- encoder arguments (SPQR-10.1) ------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    pytest.param({"tau": "0.2"}, id="tau-str"),
    pytest.param({"tau": float("nan")}, id="tau-nan"),
    pytest.param({"percdamp": float("nan"), "hessian": np.eye(16)}, id="percdamp-nan"),
    pytest.param({"percdamp": -1.0}, id="percdamp-negative"),
])
def test_quantize_refuses_bad_numbers(kw) -> None:
    """SPQR-10.1: tau is a number > 0 and percdamp a finite number >= 0."""
    assert _error(spqr.quantize, np.ones((16, 16), np.float32), **kw).code == "argument.invalid"


def test_quantize_refuses_weights_beyond_float16() -> None:
    """SPQR-10.1: weights beyond 65504 cannot be held by float16 statistics or outliers."""
    w = np.zeros((16, 16), np.float32)
    w[3, 5] = 70000.0
    err = _error(spqr.quantize, w)
    assert err.code == "argument.invalid" and "70000.0 at [3, 5]" in str(err)


def test_duplicate_permutation_index_is_named() -> None:
    """SPQR-4.2: a permutation with a repeated index names the index, not the (correct) length."""
    perm = np.arange(16)
    perm[1] = 0
    err = _error(spqr.quantize, np.ones((16, 16), np.float32), perm=perm)
    assert err.code == "argument.invalid" and "index 0 appears 2 times" in str(err)


# -- legacy dict (SPQR-8) ---------------------------------------------------------------------

def test_legacy_duplicate_perm() -> None:
    """SPQR-8.1: a legacy perm that is not a permutation is spqr.legacy.invalid, naming the repeated index."""
    legacy = _legacy()
    legacy["perm"][1] = legacy["perm"][0]
    err = _error(spqr.from_legacy, legacy)
    assert err.code == "spqr.legacy.invalid" and f"index {int(legacy['perm'][0])} appears 2 times" in str(err)


def test_legacy_missing_key() -> None:
    """SPQR-8.1: a missing legacy entry is spqr.legacy.invalid."""
    legacy = _legacy()
    del legacy["quant_layer_zeros"]
    err = _error(spqr.from_legacy, legacy)
    assert (err.code, err.tensor) == ("spqr.legacy.invalid", "quant_layer_zeros")


def test_legacy_code_out_of_range() -> None:
    """SPQR-8.1: a legacy 3-bit code outside [0, 7] is spqr.legacy.range."""
    legacy = _legacy()
    legacy["quant_weights"][2, 3] = 8
    assert _error(spqr.from_legacy, legacy).code == "spqr.legacy.range"


@pytest.mark.parametrize("change", [
    pytest.param({"bits": 4}, id="bits-4"),
    pytest.param({"quant_weights": np.zeros((64, 120), np.int8)}, id="n-120"),
])
def test_legacy_unsupported(change) -> None:
    """SPQR-8.2: only b = 3 with 16-wide groups and m, n multiples of 16 convert."""
    assert _error(spqr.from_legacy, _legacy() | change).code == "spqr.legacy.unsupported"
