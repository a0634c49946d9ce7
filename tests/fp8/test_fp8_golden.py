"""FP8-5.2: checkpoints written by compressed-tensors 0.20.0 and transformers 5.24.0 validate, every tensor is
accounted for, and the reference decode is each library's own decode, bit for bit, once rounded as the
library rounds (fixtures/third_party/fp8/PROVENANCE.md)."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.cli import main
from qformats.formats import fp8
from qformats.layers import round_to
from qformats.tools import read_layer
from qformats.validate import validate

from .st_edit import CHECKPOINTS, expected
from .st_edit import config as st_config

CASES = [pytest.param("ct_fp8_tensor", "fp8", 4, id="ct-tensor-bf16"),
         pytest.param("ct_fp8_channel", "fp8", 2, id="ct-channel-fp16-sharded"),
         pytest.param("ct_fp8_block", "fp8", 3, id="ct-block-ragged-moe"),
         pytest.param("ct_fp8_group", "fp8", 2, id="ct-group-fp16"),
         pytest.param("hf_fp8_block", "fp8_deepseek", 1, id="transformers-fp8")]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize(("name", "fmt", "layers"), CASES)
def test_real_checkpoint_is_valid_with_every_tensor_checked(name, fmt, layers):
    """FP8-4.1: every FP8 module is claimed and checked; with --deep the unquantized lm_head is read too."""
    report = validate(str(CHECKPOINTS / name), deep=True, jobs=1)
    s = report.summary
    assert (report.verdict, report.format, s["layers"], s["errors"]) == ("valid", fmt, layers, 0)
    assert (s["tensors_checked"], s["modules_not_checked"]) == (s["tensors"], 0)


def test_moe_expert_modules_are_rows_of_their_own():
    """FP8-4.3: per-expert modules (mlp.experts.N.gate_proj) are checked one by one."""
    rows = validate(str(CHECKPOINTS / "ct_fp8_block")).layers
    assert sorted((r["layer"], r["format"], r["out_features"], r["in_features"]) for r in rows) == [
        ("model.layers.0.mlp.experts.0.gate_proj", "fp8_ct_block", 16, 128),
        ("model.layers.0.mlp.experts.1.gate_proj", "fp8_ct_block", 16, 128),
        ("model.layers.0.self_attn.o_proj", "fp8_ct_block", 130, 128)]


@pytest.mark.parametrize(("name", "fmt", "layers"), CASES)
def test_cli_decode_is_the_library_decode(name, fmt, layers, tmp_path):
    """FP8-5.2: `qformats decode` writes float32 values that, rounded as the library rounds, are its decode."""
    want = expected(name)
    out = tmp_path / "out.safetensors"
    args = ["decode", str(CHECKPOINTS / name), "-o", str(out)]
    for tensor in want:
        args += ["--tensor", tensor]
    assert main(args) == 0
    got = load_file(str(out))
    for tensor, (value, precision) in want.items():
        assert got[tensor].dtype == np.float32
        assert np.array_equal(_bits(round_to(got[tensor], precision)), _bits(value)), tensor


@pytest.mark.parametrize(("name", "fmt", "layers"), CASES)
def test_python_decode_is_the_library_decode(name, fmt, layers):
    """FP8-5.1: fp8.dequantize on a module read with read_layer gives the library's weights (once rounded)."""
    path = str(CHECKPOINTS / name)
    config = fp8.parse_config(st_config(CHECKPOINTS / name)["quantization_config"])
    for tensor, (value, precision) in expected(name).items():
        module = tensor.removesuffix(".weight")
        scheme = fp8.module_schemes(config, [module])[module]
        layer = read_layer(path, module)
        scale = layer[scheme.scale]
        if scale.dtype == np.uint16:                 # bfloat16 bits as the container hands them out
            layer[scheme.scale] = (scale.astype(np.uint32) << 16).view(np.float32)
        w = fp8.dequantize(layer, strategy=scheme.strategy, block=scheme.block, group_size=scheme.group_size,
                           scale_name=scheme.scale)
        assert np.array_equal(_bits(round_to(w, precision)), _bits(value)), tensor


def test_compressed_tensors_rounds_once_to_the_scale_dtype():
    """FP8-5.2: compressed-tensors returns e4m3 x scale in bfloat16; the float32 decode itself differs from it
    (so the comparison above is not vacuous), the once-rounded one does not."""
    want, _ = expected("ct_fp8_block")["model.layers.0.self_attn.o_proj.weight"]
    layer = read_layer(str(CHECKPOINTS / "ct_fp8_block"), "model.layers.0.self_attn.o_proj")
    layer["weight_scale"] = (layer["weight_scale"].astype(np.uint32) << 16).view(np.float32)
    w = fp8.dequantize(layer, strategy="block", block=(128, 128))
    assert np.count_nonzero(w != want) > 0
    assert np.array_equal(round_to(w, "bfloat16"), want)
