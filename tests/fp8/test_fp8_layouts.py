"""FP8-1 .. FP8-5 beyond the fixtures as written: the DeepSeek layout with a ragged grid, fbgemm_fp8, a config
mixing pack-quantized int and float-quantized groups, and the decode's arithmetic on hand-worked bytes.

The derived checkpoints carry the real libraries' E4M3 bytes and scales (widened exactly where the layout
wants float32); only names, containers and configs change."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import fp8
from qformats.layers import round_to
from qformats.tools import decode
from qformats.validate import validate

from . import st_edit as st

O_PROJ = "model.layers.0.self_attn.o_proj"
CT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "compressed_tensors" / "checkpoints"


def _widened(entry) -> np.ndarray:
    dtype, shape, raw = entry
    a = st.array(entry)
    return (a.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else a.astype(np.float32)


def _deepseek_ragged(tmp_path: Path) -> Path:
    """ct_fp8_block's 130 x 128 o_proj as DeepSeek/transformers fp8: weight_scale_inv float32 (2, 1)."""
    src = st.read(st.CHECKPOINTS / "ct_fp8_block" / "model.safetensors")
    ckpt = tmp_path / "ds"
    ckpt.mkdir()
    scale = st.entry("F32", _widened(src[f"{O_PROJ}.weight_scale"]))
    st.write(ckpt / "model.safetensors", {f"{O_PROJ}.weight": src[f"{O_PROJ}.weight"],
                                          f"{O_PROJ}.weight_scale_inv": scale})
    st.set_config(ckpt, st.config(st.CHECKPOINTS / "hf_fp8_block"))
    return ckpt


def test_ragged_deepseek_grid_is_valid_and_named_for_transformers(tmp_path):
    """FP8-1.3, FP8-6.8: a ceil grid is valid; transformers' CPU reader would take 65-row blocks from it."""
    report = validate(str(_deepseek_ragged(tmp_path)))
    tensor = f"{O_PROJ}.weight_scale_inv"
    assert report.verdict == "valid"
    assert [(f.code, f.severity, f.clause, f.tensor, f.message) for f in report.findings] == [(
        "fp8.block.ragged", "warning", "FP8-6.8", tensor,
        f"'{tensor}': weight (130, 128) does not fill its 128 x 128 block grid [2, 1]; transformers 5.24.0's CPU "
        "Fp8Dequantize derives 65 x 128 blocks where the format means 128 x 128, and decodes other weights without "
        "an error")]


def test_ragged_deepseek_decodes_with_ceil_blocks(tmp_path):
    """FP8-1.3: rows 128 and 129 take the second block row's scale; compressed-tensors' decode of the same bytes
    and scale values (bfloat16, exact products rounded once) is the float32 decode rounded to bfloat16."""
    out = tmp_path / "out.safetensors"
    decode(str(_deepseek_ragged(tmp_path)), [O_PROJ], str(out))
    from safetensors.numpy import load_file
    got = load_file(str(out))[f"{O_PROJ}.weight"]
    want, precision = st.expected("ct_fp8_block")[f"{O_PROJ}.weight"]
    assert np.array_equal(round_to(got, precision), want)


def _fbgemm(tmp_path: Path) -> Path:
    """ct_fp8_channel's modules as fbgemm_fp8: per-row weight_scale widened to float32 (N, 1)."""
    ckpt = tmp_path / "fbgemm"
    ckpt.mkdir()
    tensors = {}
    for f in st.files(st.CHECKPOINTS / "ct_fp8_channel"):
        for name, entry in st.read(f).items():
            tensors[name] = st.entry("F32", _widened(entry)) if name.endswith("weight_scale") else entry
    st.write(ckpt / "model.safetensors", tensors)
    st.set_config(ckpt, {"quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                                 "modules_to_not_convert": ["lm_head"]}})
    return ckpt


def test_fbgemm_per_row_layout_validates_and_decodes(tmp_path):
    """FP8-3.1: fbgemm_fp8 is the channel strategy with float32 scales."""
    ckpt = _fbgemm(tmp_path)
    report = validate(str(ckpt), deep=True, jobs=1)
    assert (report.verdict, report.summary["errors"], report.summary["tensors_checked"]) == \
        ("valid", 0, report.summary["tensors"])
    out = tmp_path / "out.safetensors"
    decode(str(ckpt), ["model.layers.0.*"], str(out))
    from safetensors.numpy import load_file
    got = load_file(str(out))
    for tensor, (want, precision) in st.expected("ct_fp8_channel").items():
        assert np.array_equal(round_to(got[tensor], precision), want), tensor


def test_fbgemm_module_in_modules_to_not_convert_holding_a_scale_is_invalid(tmp_path):
    """FP8-4.2: modules_to_not_convert names a module that holds FP8 tensors."""
    ckpt = _fbgemm(tmp_path)
    cfg = st.config(ckpt)
    cfg["quantization_config"]["modules_to_not_convert"].append("model.layers.0.mlp.down_proj")
    st.set_config(ckpt, cfg)
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("fp8.config.tensor_mismatch", "model.layers.0.mlp.down_proj")]


RENAMED = {"model.layers.0.self_attn.q_proj": "model.layers.0.self_attn.k_proj",
           "model.layers.0.mlp.down_proj": "model.layers.0.mlp.gate_proj"}


def _mixed(tmp_path: Path) -> Path:
    """compressed-tensors' w4 int checkpoint with ct_fp8_channel's FP8 modules beside them as k_proj and
    gate_proj, one config with a pack-quantized group and a float-quantized group."""
    ckpt = tmp_path / "mixed"
    ckpt.mkdir()
    tensors = dict(st.read(CT_FIXTURES / "w4_sym_group32" / "model.safetensors"))
    for f in st.files(st.CHECKPOINTS / "ct_fp8_channel"):
        for name, entry in st.read(f).items():
            module, _, suffix = name.rpartition(".")
            if module in RENAMED:
                tensors[f"{RENAMED[module]}.{suffix}"] = entry
    st.write(ckpt / "model.safetensors", tensors)
    int_cfg = json.loads((CT_FIXTURES / "w4_sym_group32" / "config.json").read_text())
    fp8_cfg = st.config(st.CHECKPOINTS / "ct_fp8_channel")["quantization_config"]
    q = int_cfg["quantization_config"]
    q["config_groups"] = {"group_0": {**q["config_groups"]["group_0"], "targets": ["re:.*(q|up|down)_proj$"]},
                          "group_1": {**fp8_cfg["config_groups"]["group_0"], "targets": ["re:.*(k|gate)_proj$"]}}
    q["format"] = "mixed-precision"
    st.set_config(ckpt, int_cfg)
    return ckpt


def test_mixed_int_and_fp8_config_checks_each_module_by_its_own_rules(tmp_path):
    """FP8-4.3: pack-quantized modules are checked as compressed-tensors int, FP8 modules as FP8."""
    report = validate(str(_mixed(tmp_path)))
    assert report.verdict == "valid", report.findings
    assert sorted((r["layer"], r["format"]) for r in report.layers) == [
        ("model.layers.0.mlp.down_proj", "ct_int4_sym"), ("model.layers.0.mlp.gate_proj", "fp8_ct_channel"),
        ("model.layers.0.mlp.up_proj", "ct_int4_sym"), ("model.layers.0.self_attn.k_proj", "fp8_ct_channel"),
        ("model.layers.0.self_attn.q_proj", "ct_int4_sym")]


def test_mixed_config_decodes_each_module_as_its_library(tmp_path):
    """FP8-4.3: both kinds decode to their library's weights."""
    out = tmp_path / "out.safetensors"
    decode(str(_mixed(tmp_path)), ["model.layers.*"], str(out))
    from safetensors.numpy import load_file
    got = load_file(str(out))
    fp8_want = {f"{RENAMED[k.removesuffix('.weight')]}.weight": v for k, v in st.expected("ct_fp8_channel").items()}
    int_want = st.read(CT_FIXTURES.parent / "expected" / "w4_sym_group32.safetensors")
    for tensor, (want, precision) in fp8_want.items():
        assert np.array_equal(round_to(got[tensor], precision), want), tensor
    for tensor, entry in int_want.items():
        assert np.array_equal(round_to(got[tensor], "bfloat16"), _widened(entry)), tensor


@pytest.mark.parametrize(("byte", "value"), [pytest.param(0x38, 0.5, id="one"), pytest.param(0x7E, 224.0, id="max"),
                                             pytest.param(0x80, -0.0, id="minus-zero"),
                                             pytest.param(0x01, 2.0 ** -10, id="smallest-subnormal")])
def test_decode_is_e4m3_times_scale(byte, value):
    """FP8-5.1 by hand: 0x38 = 1.0, 0x7E = 448, 0x80 = -0, 0x01 = 2^-9 (FE-2), times a scale of 0.5."""
    w = fp8.dequantize({"weight": np.array([[byte]], np.uint8), "weight_scale": np.array([0.5], np.float32)},
                       strategy="tensor")
    assert w.dtype == np.float32 and w.tobytes() == np.float32(value).reshape(1, 1).tobytes()


def test_block_decode_uses_ceil_blocks_by_hand():
    """FP8-1.3: a 3 x 3 weight of 1.0 in 2 x 2 blocks: the grid is (2, 2) and row/column 2 take the last cells."""
    w = fp8.dequantize({"weight": np.full((3, 3), 0x38, np.uint8),
                        "weight_scale": np.array([[1.0, 2.0], [4.0, 8.0]], np.float32)}, strategy="block",
                       block=(2, 2))
    assert w.tolist() == [[1, 1, 2], [1, 1, 2], [4, 4, 8]]


@pytest.mark.parametrize(("n", "k", "block", "grid"), [pytest.param(200, 256, (128, 128), (2, 2), id="200x256"),
                                                        pytest.param(128, 128, (128, 128), (1, 1), id="exact"),
                                                        pytest.param(129, 1, (128, 128), (2, 1), id="one-over")])
def test_block_grid_is_the_ceil_grid(n, k, block, grid):
    """FP8-1.2: (ceil(N / bn), ceil(K / bk))."""
    assert fp8.grid(n, k, "block", block=block) == grid


def test_real_configs_validate_against_the_published_schema():
    """FP8-2.1: the quantization_config transformers 5.24.0 wrote validates against spec/schemas/fp8.json's
    FP8Config; a weight_block_size of three numbers does not."""
    import jsonschema

    from qformats import schema
    doc = schema.schema_for("fp8")
    validator = jsonschema.Draft202012Validator({**doc, "$ref": "#/$defs/FP8Config"})
    config = st.config(st.CHECKPOINTS / "hf_fp8_block")["quantization_config"]
    validator.validate(config)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**config, "weight_block_size": [128, 128, 128]})
