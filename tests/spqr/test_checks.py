"""Validation rules and real-world quirks of the SpQR release layout (spec/spqr.md §2-§7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.errors import QFormatsError
from qformats.formats import spqr
from qformats.formats.spqr import quirks

LAYERS = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "spqr_quant" / "layers"
RELEASE = ("dense_weights", "row_offsets", "col_vals", "in_perm")


def _golden(stem: str) -> dict[str, np.ndarray]:
    t = load_file(LAYERS / f"{stem}.safetensors")
    return {k: t[k].copy() for k in RELEASE}


CSR = "p01_csr_actorder_64x128_1pct"      # 64 x 128, 83 outliers
PTCSR = "p02_ptcsr_identity_128x256_1pct"  # 128 x 256


def _code(t: dict, **kw) -> str:
    with pytest.raises(QFormatsError) as exc:
        spqr.check_layer(t, **kw)
    return exc.value.code


def _set_reserved(t):
    t["dense_weights"][5] |= np.int64(1) << np.int64(62)


def _so_mismatch(t):
    t["dense_weights"][2] ^= np.int64(1) << np.int64(54)


def _nan_stat(t):
    # row 0 and 1 of tile (0, 0) carry SO byte 0 and 1: W_s_s = 0x7e00 (NaN) in both copies
    for k, byte in ((0, 0x00), (1, 0x00), (2, 0x7E), (3, 0x7E)):
        w = t["dense_weights"][k].view(np.uint64)
        t["dense_weights"][k] = ((w & ~np.uint64(0xFF << 54)) | np.uint64(byte << 54)).view(np.int64)


def _ro_start(t):
    t["row_offsets"][0] = 1


def _ro_decreasing(t):
    t["row_offsets"][10] = t["row_offsets"][11] + 1


def _ro_end(t):
    t["col_vals"] = t["col_vals"][:-1]


def _ro_length(t):
    t["row_offsets"] = t["row_offsets"][:-1]


def _column_range(t):
    t["col_vals"][0] = (t["col_vals"][0] & ~0xFFFF) | 200   # n = 128


def _value_nan(t):
    t["col_vals"][3] = np.int32(0x7E00 << 16 | 5)


def _sign_extended(t):
    t["col_vals"][3] = np.uint32(0xFFFF8005).view(np.int32)


def _not_permutation(t):
    t["in_perm"][0] = t["in_perm"][1]


def _bad_dtype(t):
    t["row_offsets"] = t["row_offsets"].astype(np.int64)


@pytest.mark.parametrize("mutate, code", [
    pytest.param(_set_reserved, "spqr.dense.reserved_bits", id="reserved-bit-62"),
    pytest.param(_so_mismatch, "spqr.dense.so_mismatch", id="so-byte-copies-differ"),
    pytest.param(_nan_stat, "spqr.stats.nonfinite", id="second-level-nan"),
    pytest.param(_ro_start, "spqr.row_offsets.start", id="row-offsets-start"),
    pytest.param(_ro_decreasing, "spqr.row_offsets.monotonic", id="row-offsets-decrease"),
    pytest.param(_ro_end, "spqr.row_offsets.end", id="row-offsets-end"),
    pytest.param(_ro_length, "spqr.row_offsets.length", id="row-offsets-length"),
    pytest.param(_column_range, "spqr.outliers.column_range", id="column-at-least-n"),
    pytest.param(_value_nan, "spqr.outliers.nonfinite", id="outlier-nan"),
    pytest.param(_sign_extended, "spqr.outliers.sign_extended", id="sign-extended-column"),
    pytest.param(_not_permutation, "spqr.in_perm.not_permutation", id="perm-duplicate"),
    pytest.param(_bad_dtype, "tensor.dtype", id="row-offsets-int64"),
])
def test_structural_errors_csr(mutate, code: str) -> None:
    """SPQR-11: each broken rule of a CSR layer is reported with its own code."""
    t = _golden(CSR)
    mutate(t)
    assert _code(t) == code


def test_error_message_names_tensor_constraint_and_value() -> None:
    """SPQR-2.4: the reserved-bits error names the tensor, the rule and the offending word."""
    t = _golden(CSR)
    _set_reserved(t)
    with pytest.raises(QFormatsError) as exc:
        spqr.check_layer(t)
    assert exc.value.tensor == "dense_weights"
    assert str(exc.value).startswith("'dense_weights' must be zero in bits 62-63 (got 0x1 at word 5)")


def test_ptcsr_stride() -> None:
    """SPQR-3.5: every PTCSR block holds a multiple of 16 entries."""
    t = _golden(PTCSR)
    t["row_offsets"][1:] += 1
    t["col_vals"] = np.concatenate([t["col_vals"], np.zeros(1, np.int32)])
    assert _code(t) == "spqr.ptcsr.stride"


def test_ptcsr_entry_after_padding() -> None:
    """SPQR-3.6: a PTCSR entry after a padding slot of its row is rejected."""
    t = _golden(PTCSR)
    ro, cv = t["row_offsets"], t["col_vals"]
    width = (ro[1] - ro[0]) // 16
    lane = int(np.flatnonzero(cv[ro[0] + 16 * (width - 1): ro[1]] == 0)[0])
    cv[ro[0] + 16 * (width - 1) + lane] = np.int32(0x3C00 << 16 | 1)   # fill the last slot of a short row
    cv[ro[0] + lane] = 0                                                  # and empty its first
    assert _code(t) == "spqr.ptcsr.padding"


@pytest.mark.parametrize("m, n, code", [
    pytest.param(64, 130, "tensor.shape", id="n-disagrees-with-in-perm"),
    pytest.param(48, None, "tensor.shape", id="m-disagrees-with-dense"),
])
def test_given_dimensions_must_agree(m, n, code) -> None:
    """SPQR-2.1: given m and n must agree with the tensor lengths."""
    assert _code(_golden(CSR), m=m, n=n) == code


def test_missing_tensor() -> None:
    """SPQR-2.1: all four tensors are required."""
    t = _golden(CSR)
    del t["in_perm"]
    assert _code(t) == "tensor.missing"


def test_config_shape_mismatch() -> None:
    """SPQR-6.2: tensor lengths must equal the config's declared shapes."""
    t = _golden(CSR)
    cfg = {"quant_method": "spqr", "bits": 3, "beta1": 16, "beta2": 16,
           "shapes": {f"m.{k}.shape": int(t[k].size) for k in RELEASE} | {"m.col_vals.shape": 82}}
    assert _code(t, config=cfg, module="m") == "spqr.config.shape_mismatch"


@pytest.mark.parametrize("cfg", [
    pytest.param({"quant_method": "spqr", "bits": 4, "shapes": {}}, id="bits-4"),
    pytest.param({"quant_method": "spqr", "beta1": 32, "shapes": {}}, id="beta1-32"),
    pytest.param({"quant_method": "gptq", "shapes": {}}, id="other-method"),
])
def test_config_invalid(cfg) -> None:
    """SPQR-6.1: release checkpoints are 3-bit, 16x16, quant_method 'spqr'."""
    with pytest.raises(QFormatsError) as exc:
        spqr.check_config(cfg)
    assert exc.value.code == "spqr.config.invalid"


def test_config_old_key_is_a_warning() -> None:
    """SPQR-7.5: linear_weights_not_to_quantize (before SpQR PR #52) is read and reported."""
    cfg = {"quant_method": "spqr", "linear_weights_not_to_quantize": ["lm_head.weight"], "shapes": {}}
    assert spqr.check_config(cfg).not_converted() == ["lm_head.weight"]
    assert [f.code for f in spqr.config_findings(cfg)] == ["spqr.config.legacy_key"]


def test_int64_in_perm_variant_is_an_error_read_only_as_legacy() -> None:
    """SPQR-7.3: the int64[n] in_perm of SpQR PR #47 is an error (spqr_quant raises on it); the reference
    decoder reads it only with legacy=True, to the same values."""
    t = _golden(CSR)
    ref = spqr.dequantize(t)
    t["in_perm"] = t["in_perm"].view(np.uint16).astype(np.int64)
    with pytest.raises(QFormatsError) as exc:
        spqr.dequantize(t)
    assert exc.value.code == "spqr.in_perm.int64"
    np.testing.assert_array_equal(spqr.dequantize(t, legacy=True).view(np.uint16), ref.view(np.uint16))
    assert [(f.code, f.severity) for f in spqr.portability_findings(t) if f.code == "spqr.in_perm.int64"] == \
        [("spqr.in_perm.int64", "error")]


def test_column_above_32767_is_a_portability_warning() -> None:
    """SPQR-7.1: an outlier column >= 32768 is valid here but reported (spqr_quant reads int16)."""
    n = 32784
    t = {"dense_weights": np.zeros(16 * n // 16, np.int64), "row_offsets": np.r_[0, np.ones(16, np.int32)].astype(np.int32),
         "col_vals": spqr.codec.merge_col_vals([40000 - 7232], [1.0]), "in_perm": spqr.codec.pack_perm(np.arange(n))}
    assert spqr.check_layer(t)["n"] == n
    codes = [f.code for f in spqr.portability_findings(t)]
    assert "spqr.outliers.column_signed" in codes


def test_spqr_quant_sign_extension_is_caught() -> None:
    """SPQR-7.1: merge_col_val's sign extension turns column 40000's value into 0xffff, which is rejected."""
    cv = quirks.spqr_quant_merge_col_val(np.array([40000]), np.array([1.0], np.float16))
    assert int(cv.view(np.uint32)[0]) >> 16 == 0xFFFF
    n = 40000 + 16 - 40000 % 16
    t = {"dense_weights": np.zeros(n, np.int64), "row_offsets": np.r_[0, np.ones(16)].astype(np.int32),
         "col_vals": cv, "in_perm": spqr.codec.pack_perm(np.arange(n))}
    assert _code(t) == "spqr.outliers.sign_extended"


def test_from_legacy_refuses_columns_spqr_quant_would_corrupt() -> None:
    """SPQR-7.1: from_legacy does not write an outlier column >= 32768."""
    n = 32768 + 16
    legacy = {"quant_weights": np.zeros((16, n), np.int8), "quant_layer_scale": np.zeros((n // 16, 1, 16), np.int8),
              "quant_layer_zeros": np.zeros((n // 16, 1, 16), np.int8), "perm": np.arange(n, dtype=np.int32),
              "outliers_matrix.indices": np.array([[0], [32770]]), "outliers_matrix.values": np.ones(1, np.float16)}
    for key in ("quant_layer_scale_qq_scale", "quant_layer_scale_qq_zero", "quant_layer_zero_qq_scale",
                "quant_layer_zero_qq_zero"):
        legacy[key] = np.ones((n // 16, 1, 1), np.float16)
    with pytest.raises(QFormatsError) as exc:
        spqr.from_legacy(legacy)
    assert exc.value.code == "spqr.outliers.column_signed"


def test_reserved_bit_corrupts_spqr_quant_second_order_word() -> None:
    """SPQR-7.4: spqr_quant's host decoder ORs unmasked bits 62-63 into the next SO byte."""
    dense = np.zeros(64 * 128 // 16, np.int64)
    dense[5] = np.int64(1) << np.int64(62)   # row 5 of tile (0, 0) carries SO byte 2; bit 62 spills into byte 3
    assert int(quirks.host_second_order_word(dense, 64, 128)[0, 0]) == 1 << 24


def test_unsorted_csr_row_is_a_warning() -> None:
    """SPQR-3.7: CSR columns SHOULD strictly ascend within a row."""
    t = _golden(CSR)
    ro = t["row_offsets"]
    r = int(np.flatnonzero(np.diff(ro) >= 2)[0])
    t["col_vals"][ro[r]:ro[r] + 2] = t["col_vals"][ro[r]:ro[r] + 2][::-1].copy()
    assert "spqr.outliers.unsorted" in [f.code for f in spqr.portability_findings(t)]


def test_layer_is_frozen() -> None:
    """SPQR-2.1: a constructed layer's arrays are read-only."""
    layer = spqr.SpQRLayer(_golden(CSR))
    with pytest.raises(ValueError):
        layer.dense_weights[0] = 0
