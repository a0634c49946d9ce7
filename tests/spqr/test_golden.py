"""Third-party golden data: spqr_quant 0.2.0 packer and decoder, SpQR repository quantizer and decoder.

Every expected byte and value below was produced by the upstream tools themselves
(fixtures/third_party/spqr_quant/PROVENANCE.md), never by qformats.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.formats import spqr
from qformats.formats.spqr import quirks

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "spqr_quant"
LAYERS = sorted((ROOT / "layers").glob("*.safetensors"))
CKPT = ROOT / "checkpoints" / "tiny-llama-spqr-csr-actorder"
EXPECTED = ROOT / "checkpoints" / "tiny-llama-spqr-csr-actorder.expected_dequant.safetensors"
RELEASE = ("dense_weights", "row_offsets", "col_vals", "in_perm")


def _case(path: Path) -> tuple[dict, dict]:
    t = load_file(path)
    legacy = {k[len("legacy."):]: v for k, v in t.items() if k.startswith("legacy.")}
    return t, legacy


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
@pytest.mark.parametrize("tensor", RELEASE)
def test_from_legacy_matches_spqr_quant_bytes(path: Path, tensor: str) -> None:
    """SPQR-8.2: from_legacy produces exactly the bytes, dtype and shape spqr_quant's packer writes."""
    t, legacy = _case(path)
    layer = spqr.from_legacy(legacy, sparse="ptcsr" if "_ptcsr_" in path.stem else "csr")
    got, want = getattr(layer, tensor), t[tensor]
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_dequantize_permuted_matches_spqr_quant(path: Path) -> None:
    """SPQR-5: dequantize(permuted=True) equals QuantizedLinear.dequantize() bit for bit."""
    t, _ = _case(path)
    got = spqr.dequantize({k: t[k] for k in RELEASE}, permuted=True)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(_bits(got), _bits(t["dequant_release"]))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_dequantize_original_order(path: Path) -> None:
    """SPQR-5.3: the default column order is the original one, W[:, perm] = permuted decode."""
    t, legacy = _case(path)
    want = np.empty_like(t["dequant_release"])
    want[:, legacy["perm"].astype(np.int64)] = t["dequant_release"]
    np.testing.assert_array_equal(_bits(spqr.dequantize({k: t[k] for k in RELEASE})), _bits(want))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_legacy_decoder_emulation(path: Path) -> None:
    """SPQR-7.7: the SpQR repository's decoder replaces dense values by outliers (layer_weight_dequantization)."""
    t, legacy = _case(path)
    np.testing.assert_array_equal(_bits(quirks.legacy_dequantize(legacy)), _bits(t["dequant_legacy"]))


@pytest.mark.parametrize("path", [pytest.param(p, id=p.stem) for p in LAYERS])
def test_golden_layers_are_valid(path: Path) -> None:
    """SPQR-11: every spqr_quant-written layer passes check_layer."""
    t, legacy = _case(path)
    params = spqr.check_layer({k: t[k] for k in RELEASE})
    assert params == {"m": legacy["quant_weights"].shape[0], "n": legacy["quant_weights"].shape[1],
                      "sparse": "ptcsr" if "_ptcsr_" in path.stem else "csr"}


def test_empty_csr_is_float32_and_reported() -> None:
    """SPQR-7.2: spqr_quant saves an empty CSR outlier set as float32[0]; it is read and reported."""
    t, _ = _case(ROOT / "layers" / "p03_csr_identity_32x64_nooutliers.safetensors")
    assert t["col_vals"].dtype == np.float32 and t["col_vals"].shape == (0,)
    codes = [f.code for f in spqr.portability_findings({k: t[k] for k in RELEASE})]
    assert "spqr.col_vals.float32_empty" in codes


def test_outlier_fraction_matches_upstream_count() -> None:
    """SPQR-3.8: the reported outlier count equals the stored count (83 of 8192 in p01)."""
    t, _ = _case(ROOT / "layers" / "p01_csr_actorder_64x128_1pct.safetensors")
    info = [f for f in spqr.portability_findings({k: t[k] for k in RELEASE}) if f.code == "spqr.outliers.fraction"]
    assert info[0].message.startswith("83 outliers in 8192 weights (1.013%)")


def _checkpoint_modules() -> list[str]:
    keys = load_file(CKPT / "model.safetensors").keys()
    return sorted({k[: -len(".dense_weights")] for k in keys if k.endswith(".dense_weights")})


@pytest.mark.parametrize("module", _checkpoint_modules())
def test_checkpoint_layer_decodes_bit_exact(module: str) -> None:
    """SPQR-5, SPQR-6.2: each checkpoint layer checks against config shapes and decodes bit-exactly."""
    t = load_file(CKPT / "model.safetensors")
    cfg = json.loads((CKPT / "config.json").read_text())["quantization_config"]
    layer = spqr.SpQRLayer({k: t[f"{module}.{k}"] for k in RELEASE}, config=cfg, module=module)
    want = load_file(EXPECTED)[f"{module}.dequant_release"]
    np.testing.assert_array_equal(_bits(spqr.dequantize(layer, permuted=True)), _bits(want))


def test_checkpoint_config_parses() -> None:
    """SPQR-6.1: the converter's quantization_config parses, with its not-converted parameter names."""
    cfg = spqr.check_config(json.loads((CKPT / "config.json").read_text())["quantization_config"])
    assert (cfg.bits, cfg.beta1, cfg.beta2) == (3, 16, 16)
    assert "lm_head.weight" in cfg.not_converted() and len(cfg.shapes) == 14 * 4
