"""FP8-3.2 / FP8-3.3 / CKPT-4.5: ModelOpt FP8 checkpoints written by nvidia-modelopt 0.47.0 (tensor, channel and
the 4-D block scale of fp8_pb_wo, every 128 x 128 grid ragged) validate, decode as ModelOpt decodes them, and
are read from hf_quant_config.json alone (fixtures/third_party/fp8/PROVENANCE.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qformats.cli import main
from qformats.formats import fp8
from qformats.formats.fp8 import codec
from qformats.tools import read_layer
from qformats.validate import validate

from . import st_edit as st

NAMES = {"modelopt_fp8_tensor": ("tensor", []), "modelopt_fp8_channel": ("channel", [160]),
         "modelopt_fp8_block": ("block", [2, 1, 2, 1])}          # q_proj (160, 160): its stored scale shape
Q = "model.layers.0.self_attn.q_proj"


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("name", NAMES)
def test_modelopt_checkpoint_is_valid_with_every_tensor_checked(name):
    """FP8-3.2: every module ModelOpt quantized is claimed as FP8 and checked; --deep reads the rest."""
    report = validate(str(st.CHECKPOINTS / name), deep=True, jobs=1)
    s = report.summary
    assert (report.verdict, report.format, s["layers"], s["errors"]) == ("valid", "fp8", 7, 0)
    assert s["tensors_checked"] == s["tensors"]
    assert {r["format"] for r in report.layers} == {f"fp8_modelopt_{NAMES[name][0]}"}


@pytest.mark.parametrize("name", NAMES)
def test_stored_scale_shape_is_modelopt_s(name):
    """FP8-3.2: "(), (N,), (ceil(N/128), 1, ceil(K/128), 1)": the shapes the fixtures hold."""
    assert list(read_layer(str(st.CHECKPOINTS / name), Q)["weight_scale"].shape) == NAMES[name][1]


@pytest.mark.parametrize("name", NAMES)
def test_modelopt_reading_is_modelopt_s_own_dequantize(name):
    """FP8-3.3: scale rounded to bfloat16, then the product: FP8QTensor.dequantize's bits on every weight."""
    config = fp8.parse_config(st.config(st.CHECKPOINTS / name)["quantization_config"])
    for tensor, (value, precision) in st.expected(name).items():
        module = tensor.removesuffix(".weight")
        scheme = fp8.module_schemes(config, [module])[module]
        layer = read_layer(str(st.CHECKPOINTS / name), module)
        scale = codec.as_grid(layer["weight_scale"], "modelopt", scheme.strategy, *layer["weight"].shape,
                              block=scheme.block)
        got = codec.modelopt_reading(layer["weight"], scale, scheme.strategy, block=scheme.block)
        assert precision == "bfloat16" and np.array_equal(_bits(got), _bits(value)), tensor


def test_fp8_5_1_value_is_within_one_bfloat16_unit_of_modelopt_s():
    """FP8-3.3: the format's value rounded once differs from ModelOpt's double rounding by one unit at most."""
    name = "modelopt_fp8_block"
    out = st.CHECKPOINTS.parent / "expected" / f"{name}.safetensors"
    assert out.is_file()
    for tensor, (value, _) in st.expected(name).items():
        layer = read_layer(str(st.CHECKPOINTS / name), tensor.removesuffix(".weight"))
        scale = codec.as_grid(layer["weight_scale"], "modelopt", "block", *layer["weight"].shape, block=(128, 128))
        w = codec.dequantize({"weight": layer["weight"], "weight_scale": scale}, strategy="block", block=(128, 128))
        ours = (_bits(w) + 0x7FFF + ((_bits(w) >> 16) & 1)) >> 16          # round to nearest even, bfloat16
        assert np.abs(ours.astype(np.int64) - (_bits(value) >> 16).astype(np.int64)).max() <= 1, tensor


def test_cli_decode_of_a_block_module_is_the_format_value(tmp_path):
    """FP8-5.1 on the 4-D grid: `qformats decode` uses the scale of each 128 x 128 cell, ragged edges included."""
    out = tmp_path / "w.safetensors"
    assert main(["decode", str(st.CHECKPOINTS / "modelopt_fp8_block"), "-o", str(out), "--tensor", f"{Q}.weight"]) == 0
    from safetensors.numpy import load_file

    got = load_file(str(out))[f"{Q}.weight"]
    layer = read_layer(str(st.CHECKPOINTS / "modelopt_fp8_block"), Q)
    s = layer["weight_scale"].reshape(2, 2).astype(np.float64)
    e4m3 = np.asarray(fp8.dequantize({"weight": layer["weight"], "weight_scale": np.ones((1,), np.float32)},
                                     strategy="tensor"), np.float64)
    assert got[127, 127] == np.float32(e4m3[127, 127] * s[0, 0]) and got[128, 159] == np.float32(e4m3[128, 159] * s[1, 1])


@pytest.mark.parametrize(("name", "shape"), [("modelopt_fp8_block", [2, 2]), ("modelopt_fp8_channel", [160, 1])])
def test_the_canonical_grid_shape_is_not_modelopt_s(tmp_path, name, shape):
    """FP8-3.2: "The stored shapes above are the only ones a ModelOpt module may have"."""
    ckpt = st.copy(tmp_path, name)

    def reshape(t):
        t[f"{Q}.weight_scale"] = st.entry("F32", st.array(t[f"{Q}.weight_scale"]).reshape(shape))
    st.edit(ckpt, reshape)
    report = validate(str(ckpt))
    found = [(f.code, f.tensor) for f in report.findings if f.severity == "error"]
    assert (report.verdict, found) == ("invalid", [("fp8.scale.shape", f"{Q}.weight_scale")])
    want = [2, 1, 2, 1] if name == "modelopt_fp8_block" else [160]
    assert f"must be {want} for weight (160, 160)" in report.findings[0].message


def test_a_module_named_in_ignore_that_holds_fp8_is_a_mismatch(tmp_path):
    """FP8-3.2 / FP8-4.2: a module `ignore` names must not hold FP8 scales."""
    ckpt = st.copy(tmp_path, "modelopt_fp8_tensor")
    cfg = st.config(ckpt)
    cfg["quantization_config"]["ignore"].append("*q_proj")
    st.set_config(ckpt, cfg)
    (ckpt / "hf_quant_config.json").unlink()
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("fp8.config.tensor_mismatch", Q)]
    assert "excluded by ignore entry '*q_proj'" in report.findings[0].message


def test_hf_quant_config_alone_names_the_layout(tmp_path):
    """CKPT-4.5: with no quantization_config in config.json, hf_quant_config.json gives the same report."""
    ckpt = st.copy(tmp_path, "modelopt_fp8_block")
    cfg = st.config(ckpt)
    del cfg["quantization_config"]
    st.set_config(ckpt, cfg)
    alone = validate(str(ckpt), deep=True, jobs=1)
    both = validate(str(st.CHECKPOINTS / "modelopt_fp8_block"), deep=True, jobs=1)
    assert (alone.verdict, alone.format, alone.layers) == (both.verdict, both.format, both.layers)
    assert not [f for f in alone.findings if f.code.startswith("ckpt.config")]


def test_the_two_modelopt_files_disagreeing_is_a_conflict(tmp_path):
    """CKPT-4.5 / CKPT-4.4: a quant_algo that differs between config.json and hf_quant_config.json is named."""
    ckpt = st.copy(tmp_path, "modelopt_fp8_tensor")
    side = json.loads((ckpt / "hf_quant_config.json").read_text())
    side["quantization"]["quant_algo"] = "FP8_PER_CHANNEL_PER_TOKEN"
    (ckpt / "hf_quant_config.json").write_text(json.dumps(side))
    conflicts = [f for f in validate(str(ckpt)).findings if f.code == "ckpt.config.conflict"]
    assert len(conflicts) == 1 and "['quant_algo']" in conflicts[0].message


def test_hf_quant_config_quantization_not_an_object_is_refused(tmp_path):
    """CKPT-4.5: "Its quantization MUST be an object or absent (ckpt.config.json)"."""
    ckpt = st.copy(tmp_path, "modelopt_fp8_tensor")
    (ckpt / "hf_quant_config.json").write_text(json.dumps({"quantization": ["FP8"]}))
    report = validate(str(ckpt))
    assert report.verdict == "invalid"
    assert [(f.code, f.tensor, f.message) for f in report.findings] == [
        ("ckpt.config.json", "hf_quant_config.json['quantization']",
         "'hf_quant_config.json['quantization']' must be a JSON object (got list)")]


def test_convert_does_not_carry_hf_quant_config_over(tmp_path):
    """CKPT-4.1: a converted checkpoint keeps no side config of its source's format."""
    from qformats.convert import _write_side_files
    from qformats.containers.checkpoint import open_checkpoint

    stage = tmp_path / "out"
    stage.mkdir()
    with open_checkpoint(str(st.CHECKPOINTS / "modelopt_fp8_tensor")) as ckpt:
        _write_side_files(ckpt, stage, {}, {"quant_method": "fp8"})
    assert sorted(p.name for p in stage.iterdir()) == ["config.json"]
