"""Each corruption spec/fp4.md names, built from the real fixtures: INVALID (or the warning) with a finding naming
tensor, clause and value; the whole finding asserted."""

from __future__ import annotations

import numpy as np
import pytest

from fp4_fixtures import corrupted, f32, read_st
from qformats.containers.checkpoint import open_checkpoint
from qformats.errors import QFormatsError
from qformats.formats.fp4 import decode_module
from qformats.validate import group_layers, validate

NV, MX, OSS = "ct_nvfp4", "ct_mxfp4", "gpt_oss_mxfp4"
DOWN = "model.layers.0.mlp.down_proj"
GLOBAL = f"{DOWN}.weight_global_scale"
SCALE = f"{DOWN}.weight_scale"


def _set(index: int, byte: int):
    def edit(raw: np.ndarray) -> np.ndarray:
        raw[index] = byte
        return raw
    return edit


def _findings(path) -> tuple[str, list[dict]]:
    report = validate(str(path), jobs=1)
    return report.verdict, [f.model_dump() for f in report.findings]


def _one(code, severity, clause, tensor, message, count=None) -> dict:
    one = {"code": code, "severity": severity, "clause": clause, "tensor": tensor, "message": message}
    return one if count is None else {**one, "count": count}


@pytest.mark.parametrize(("value", "shown"), [pytest.param(0.0, "0.0", id="zero"),
                                              pytest.param(float("nan"), "nan", id="nan"),
                                              pytest.param(float("inf"), "inf", id="inf"),
                                              pytest.param(-21504.0, "-21504.0", id="negative")])
def test_global_scale_not_finite_positive_is_invalid(tmp_path, value, shown):
    """FP4-3.2: the NVFP4 global scale must be finite and positive (readers divide by it)."""
    path = corrupted(tmp_path, NV, {GLOBAL: ("F32", [1], f32(value))})
    assert _findings(path) == ("invalid", [_one(
        "fp4.global_scale.invalid", "error", "FP4-3.2", GLOBAL,
        f"'{GLOBAL}' must be a finite positive float32 (got {shown}); readers divide by it (FP4-3.2)")])


def test_input_global_scale_zero_is_invalid(tmp_path):
    """FP4-3.2: a static activation global scale of 0 is refused too."""
    tensor = f"{DOWN}.input_global_scale"
    path = corrupted(tmp_path, NV, {tensor: ("F32", [1], f32(0.0))})
    assert _findings(path) == ("invalid", [_one(
        "fp4.global_scale.invalid", "error", "FP4-3.2", tensor,
        f"'{tensor}' must be a finite positive float32 (got 0.0); readers divide by it (FP4-3.2)")])


def test_missing_global_scale_is_invalid(tmp_path):
    """FP4-3.2: an NVFP4 module without weight_global_scale (compressed-tensors only warns and keeps a
    placeholder)."""
    path = corrupted(tmp_path, NV, {GLOBAL: None})
    assert _findings(path) == ("invalid", [_one(
        "fp4.global_scale.missing", "error", "FP4-3.2", GLOBAL,
        f"'{GLOBAL}' must be present: NVFP4 decodes w = e2m1 * weight_scale / weight_global_scale (FP4-3.2) "
        "(got missing)")])


@pytest.mark.parametrize("byte", [pytest.param(0x7F, id="0x7F"), pytest.param(0xFF, id="0xFF")])
def test_ue4m3_nan_block_scale_is_invalid(tmp_path, byte):
    """FP4-3.3: a UE4M3 block-scale byte 0x7F or 0xFF is NaN."""
    path = corrupted(tmp_path, NV, {SCALE: _set(5, byte)})         # row 1, block 1 of a (32, 4) grid
    assert _findings(path) == ("invalid", [_one(
        "fp4.scale.nan", "error", "FP4-3.3", SCALE,
        f"'{SCALE}' holds 1 UE4M3 NaN bytes (0x7F, 0xFF); compressed-tensors decodes their blocks to NaN "
        f"(first 0x{byte:02X} at [1, 1])", count=1)])


def test_ue4m3_sign_bit_block_scale_is_invalid(tmp_path):
    """FP4-3.3: a block-scale byte with the sign bit set (0x80 | 0x38 = -1.0 as E4M3FN) is not UE4M3."""
    path = corrupted(tmp_path, NV, {SCALE: _set(6, 0xB8)})
    assert _findings(path) == ("invalid", [_one(
        "fp4.scale.sign", "error", "FP4-3.3", SCALE,
        f"'{SCALE}' holds 1 block-scale bytes with the sign bit set, which UE4M3 does not have; torch reads them "
        "as negative E4M3FN scales and flips the block's signs, ggml as their magnitude (first 0xB8 at [1, 2])",
        count=1)])


def test_scale_grid_with_a_column_short_is_invalid(tmp_path):
    """FP4-2.3: weight_scale must be (out, in / 16) for NVFP4."""
    path = corrupted(tmp_path, NV, {SCALE: ("F8_E4M3", [32, 3], bytes(96))})
    assert _findings(path) == ("invalid", [_one(
        "fp4.grid.shape", "error", "FP4-2.3", SCALE,
        f"'{SCALE}' must be shape (32, 4): one scale per 16 weights of each row (FP4-2.3) (got (32, 3))")])


def test_in_features_not_a_multiple_of_the_group_is_invalid(tmp_path):
    """FP4-2.2: K = 2 * weight_packed columns must be a multiple of the group (72 is not of 16)."""
    path = corrupted(tmp_path, NV, {f"{DOWN}.weight_packed": ("U8", [32, 36], bytes(32 * 36)),
                                    SCALE: ("F8_E4M3", [32, 5], bytes(160))})
    assert _findings(path) == ("invalid", [_one(
        "fp4.group.shape", "error", "FP4-2.2", SCALE,
        f"'{SCALE}' must be in_features a multiple of 16 (FP4-2.2) (got 72)")])


def test_fused_shards_with_different_global_scales_warn(tmp_path):
    """FP4-3.5: q/k/v shards whose global scales differ are a warning naming both values (vllm#54974)."""
    k = "model.layers.1.self_attn.k_proj.weight_global_scale"
    path = corrupted(tmp_path, NV, {k: ("F32", [1], f32(30414.498046875))})
    q = "model.layers.1.self_attn.q_proj.weight_global_scale"
    assert _findings(path) == ("valid", [_one(
        "fp4.global_scale.fused_mismatch", "warning", "FP4-3.5", k,
        f"'{k}' is 30414.498046875 where '{q}' is 15207.2490234375: vLLM loads q_proj/k_proj/v_proj as one "
        "layer with one global scale (for MoE w1/w3 it warns and uses w1's for both, vllm#54974), so this shard "
        "decodes scaled by 0.5 (FP4-3.5)")])


def test_mxfp4_e8m0_nan_scale_is_invalid(tmp_path):
    """FP4-3.4: an E8M0 scale byte 0xFF is NaN (OCP MX v1.0)."""
    scale = f"{DOWN}.weight_scale"                       # (32, 2) uint8
    path = corrupted(tmp_path, MX, {scale: _set(3, 0xFF)})
    assert _findings(path) == ("invalid", [_one(
        "fp4.scale.e8m0_nan", "error", "FP4-3.4", scale,
        f"'{scale}' holds 1 E8M0 bytes 0xFF, NaN in OCP MX v1.0; compressed-tensors and transformers decode "
        "them as 2^128 (inf, or 2^127 for a 0.5 element) (first 0xFF at [1, 1])", count=1)])


def test_mxfp4_grid_of_the_nvfp4_group_is_invalid(tmp_path):
    """FP4-2.3: an MXFP4 grid must be (out, in / 32); one of in / 16 columns is refused."""
    scale = f"{DOWN}.weight_scale"
    path = corrupted(tmp_path, MX, {scale: ("U8", [32, 4], bytes([127]) * 128)})
    assert _findings(path) == ("invalid", [_one(
        "fp4.grid.shape", "error", "FP4-2.3", scale,
        f"'{scale}' must be shape (32, 2): one scale per 32 weights of each row (FP4-2.3) (got (32, 4))")])


def test_gpt_oss_e8m0_nan_scale_is_invalid(tmp_path):
    """FP4-3.4: gpt-oss expert scales follow the same E8M0 rule; the finding names the projection tensor."""
    scale = "model.layers.0.mlp.experts.down_proj_scales"          # (2, 64, 1)
    path = corrupted(tmp_path, OSS, {scale: _set(64 + 3, 0xFF)})
    assert _findings(path) == ("invalid", [_one(
        "fp4.scale.e8m0_nan", "error", "FP4-3.4", scale,
        f"'{scale}' holds 1 E8M0 bytes 0xFF, NaN in OCP MX v1.0; compressed-tensors and transformers decode "
        "them as 2^128 (inf, or 2^127 for a 0.5 element) (first 0xFF at [1, 3, 0])", count=1)])


def test_gpt_oss_scales_grid_mismatch_is_invalid(tmp_path):
    """FP4-2.3, FP4-2.5: *_scales must be (E, out, in / 32) beside *_blocks (E, out, in / 32, 16)."""
    scale = "model.layers.0.mlp.experts.gate_up_proj_scales"       # (2, 64, 2)
    path = corrupted(tmp_path, OSS, {scale: ("U8", [2, 64, 1], bytes([127]) * 128)})
    assert _findings(path) == ("invalid", [_one(
        "fp4.grid.shape", "error", "FP4-2.3", scale,
        f"'{scale}' must be shape (2, 64, 2): one scale per 32 weights of each row (FP4-2.3) (got (2, 64, 1))")])


def test_decode_refuses_a_corrupted_module(tmp_path):
    """FP4-3.2: the reference decode checks first and refuses with the finding's code, never returning NaN."""
    path = corrupted(tmp_path, NV, {GLOBAL: ("F32", [1], f32(0.0))})
    with open_checkpoint(str(path)) as ckpt:
        group = next(g for g in group_layers(ckpt.tensor_names(), ckpt.config)[0] if g.name == DOWN)
        with pytest.raises(QFormatsError) as err:
            decode_module(ckpt, group)
    assert (err.value.code, err.value.tensor) == ("fp4.global_scale.invalid", GLOBAL)


def test_modelopt_weight_scale_2_zero_is_invalid(tmp_path):
    """FP4-3.2, FP4-4.1: ModelOpt's global scale (weight_scale_2, multiplied) must be finite and positive too."""
    tensor = "model.layers.0.mlp.up_proj.weight_scale_2"
    path = corrupted(tmp_path, "modelopt_nvfp4", {tensor: ("F32", [], f32(0.0))})
    assert _findings(path) == ("invalid", [_one(
        "fp4.global_scale.invalid", "error", "FP4-3.2", tensor,
        f"'{tensor}' must be a finite positive float32 (got 0.0); readers multiply by it (FP4-3.2)")])


def test_modelopt_missing_weight_scale_2_is_invalid(tmp_path):
    """FP4-3.2, FP4-4.1: a ModelOpt NVFP4 module without weight_scale_2 is refused."""
    tensor = "model.layers.0.mlp.up_proj.weight_scale_2"
    path = corrupted(tmp_path, "modelopt_nvfp4", {tensor: None})
    assert _findings(path) == ("invalid", [_one(
        "fp4.global_scale.missing", "error", "FP4-3.2", tensor,
        f"'{tensor}' must be present: ModelOpt NVFP4 decodes w = e2m1 * weight_scale * weight_scale_2 (FP4-3.2) "
        "(got missing)")])


def test_modelopt_fused_shards_with_different_scales_warn(tmp_path):
    """FP4-3.5, FP4-4.1: gate/up weight_scale_2 that differ; ModelOpt multiplies, so the factor is own / used."""
    up = "model.layers.0.mlp.up_proj.weight_scale_2"
    gate = "model.layers.0.mlp.gate_proj.weight_scale_2"
    path = corrupted(tmp_path, "modelopt_nvfp4", {up: ("F32", [], f32(2.0 ** -14))})
    verdict, findings = _findings(path)
    assert verdict == "valid" and len(findings) == 1
    used = float(np.frombuffer(read_st(path / "model.safetensors")[gate][2], np.float32)[0])
    assert findings[0] == _one(
        "fp4.global_scale.fused_mismatch", "warning", "FP4-3.5", up,
        f"'{up}' is {2.0 ** -14!r} where '{gate}' is {used!r}: vLLM loads gate_proj/up_proj as one layer with one "
        "global scale (for MoE w1/w3 it warns and uses w1's for both, vllm#54974), so this shard decodes scaled by "
        f"{float(np.float64(2.0 ** -14) / np.float64(used))!r} (FP4-3.5)")


def test_nvfp4_group_with_the_mxfp4_group_size_is_invalid(tmp_path):
    """FP4-5.1: an nvfp4-pack-quantized group must declare group_size 16; each module it covers is refused."""
    import json

    path = corrupted(tmp_path, NV, {})
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 32
    (path / "config.json").write_text(json.dumps(config))
    verdict, findings = _findings(path)
    assert verdict == "invalid"
    assert [f["code"] for f in findings] == ["fp4.config.invalid"] * 14 + ["checkpoint.empty"]
    assert findings[0] == _one(
        "fp4.config.invalid", "error", "FP4-5.1", DOWN,
        f"'{DOWN}' holds FP4 tensors but config group 'group_0' (ct_nvfp4) needs float 4-bit symmetric weights, "
        "strategy tensor_group, group_size 16; it has group_size 32 (FP4-5.1)")
