"""AWQ GEMM (spec/awq.md): the packing order, the decode, conversion to and from GPTQ, the checkpoint side."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.errors import QFormatsError
from qformats.formats import awq, gptq
from qformats.validate import validate

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures/third_party/autoawq/checkpoints/gemm_w4_g32"
EXPECTED = ROOT / "fixtures/third_party/autoawq/expected/gemm_w4_g32.safetensors"


def _layer(k=64, n=16, group_size=32, seed=0):
    rng = np.random.default_rng(seed)
    g = 1 if group_size == -1 else k // group_size
    return (rng.integers(0, 16, (k, n)), rng.integers(0, 16, (g, n)),
            rng.uniform(0.01, 1.0, (g, n)).astype(np.float16))


def test_awq_2_3_worked_example_word():
    """AWQ-2.3 worked example: columns 0..7 holding codes 0..7 pack to 0x75316420."""
    word = awq.pack(np.arange(8)[None, :], np.zeros((1, 8), int), np.ones((1, 8), np.float16), group_size=-1).qweight
    assert int(word.view(np.uint32)[0, 0]) == 0x75316420


def test_awq_3_1_worked_example_decode():
    """AWQ-3.1 worked example: code 9, zero 3, scale 0.5 -> 3.0; code 0, zero 15 -> -7.5."""
    codes = np.array([[9, 0, 0, 0, 0, 0, 0, 0]]).repeat(1, 0)
    zeros = np.array([[3, 15, 0, 0, 0, 0, 0, 0]])
    w = awq.dequantize(awq.pack(codes, zeros, np.full((1, 8), 0.5, np.float16), group_size=-1))
    assert w.dtype == np.float32 and w.shape == (8, 1)
    assert w[0, 0] == 3.0 and w[1, 0] == -7.5


def test_unpack_inverts_pack():
    codes, zeros, scales = _layer()
    got_codes, got_zeros = awq.unpack(awq.pack(codes, zeros, scales, group_size=32))
    assert np.array_equal(got_codes, codes) and np.array_equal(got_zeros, zeros)


def test_to_gptq_v2_is_lossless():
    """AWQ-4.1: the GPTQ v2 layer decodes to the same float32 weights, bit for bit."""
    layer = awq.pack(*_layer(), group_size=32)
    g = awq.to_gptq(layer)
    assert np.array_equal(np.ascontiguousarray(gptq.dequantize(g, bits=4, version="v2")), awq.dequantize(layer))
    back = awq.from_gptq(g, bits=4, version="v2")
    assert all(np.array_equal(getattr(back, t), getattr(layer, t)) for t in ("qweight", "qzeros", "scales"))


def test_to_gptq_v1_refuses_zero_point_0():
    codes, zeros, scales = _layer()
    zeros[0, 3] = 0
    with pytest.raises(QFormatsError) as err:
        awq.to_gptq(awq.pack(codes, zeros, scales, group_size=32), version="v1")
    assert err.value.code == "gptq.zero.v1_unrepresentable" and err.value.tensor == "zeros"


def test_from_gptq_refuses_act_order():
    codes, zeros, scales = _layer()
    g_idx = (np.arange(64) // 32)[::-1].astype(np.int32)
    g = gptq.pack(codes, zeros, scales, bits=4, version="v2", g_idx=g_idx, group_size=32)
    with pytest.raises(QFormatsError) as err:
        awq.from_gptq(g, bits=4, version="v2", group_size=32)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("awq.convert.unrepresentable", "g_idx",
                                                                    "a permuted g_idx")


def test_from_gptq_refuses_three_bits():
    rng = np.random.default_rng(1)
    g = gptq.pack(rng.integers(0, 8, (64, 32)), rng.integers(0, 8, (2, 32)), np.ones((2, 32), np.float16), bits=3,
                  version="v2", group_size=32)
    with pytest.raises(QFormatsError) as err:
        awq.from_gptq(g, bits=3, version="v2", group_size=32)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("awq.convert.unrepresentable", "bits", 3)


def test_from_gptq_refuses_a_short_last_group():
    rng = np.random.default_rng(2)
    g = gptq.pack(rng.integers(0, 16, (96, 8)), rng.integers(0, 16, (2, 8)), np.ones((2, 8), np.float16), bits=4,
                  version="v2", group_size=64)
    with pytest.raises(QFormatsError) as err:
        awq.from_gptq(g, bits=4, version="v2", group_size=64)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("awq.convert.unrepresentable", "group_size", 64)


def test_group_size_must_divide_in_features():
    """AWQ-2.2 at the limit (64 / 32) and one past it (64 / 48)."""
    codes, zeros, scales = _layer()
    assert awq.pack(codes, zeros, scales, group_size=32).qzeros.shape == (2, 2)
    with pytest.raises(QFormatsError) as err:
        awq.pack(codes, zeros[:1], scales[:1], group_size=48)
    assert (err.value.code, err.value.tensor, err.value.actual) == ("awq.group.shape", "group_size", 48)


def test_pack_refuses_a_code_of_16():
    codes, zeros, scales = _layer()
    codes[5, 2] = 16
    with pytest.raises(QFormatsError) as err:
        awq.pack(codes, zeros, scales, group_size=32)
    assert (err.value.code, err.value.tensor) == ("awq.codes.range", "codes") and "[5, 2]" in str(err.value)


def test_nonfinite_scale_is_refused():
    codes, zeros, scales = _layer()
    layer = dict(awq.pack(codes, zeros, scales, group_size=32).tensors)
    layer["scales"] = layer["scales"].copy()
    layer["scales"][1, 3] = np.inf
    with pytest.raises(QFormatsError) as err:
        awq.dequantize(layer)
    assert (err.value.code, err.value.tensor) == ("awq.scales.nonfinite", "scales")


def test_config_other_layout_is_named():
    """AWQ-1.2: version gemv is recognised and refused, not decoded as GEMM."""
    with pytest.raises(QFormatsError) as err:
        awq.parse_config({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMV"})
    assert (err.value.code, err.value.tensor, err.value.actual) == ("awq.config.other_layout", "version", "gemv")


def test_autoawq_checkpoint_decodes_as_autoawq_does():
    """The AutoAWQ 0.2.9 fixture: float32 decode rounded to float16 equals WQLinear_GEMM's own output."""
    expected = load_file(str(EXPECTED))
    tensors = load_file(str(FIXTURE / "model.safetensors"))
    for name, want in expected.items():
        module = name.removesuffix(".weight")
        layer = {t: tensors[f"{module}.{t}"] for t in ("qweight", "qzeros", "scales")}
        assert np.array_equal(awq.dequantize(layer, group_size=32).astype(np.float16).view(np.uint16),
                              want.view(np.uint16)), module


def test_autoawq_checkpoint_validates():
    report = validate(str(FIXTURE), deep=True)
    assert (report.verdict, report.format, report.summary["layers"], report.findings) == ("valid", "awq", 3, [])


def test_module_left_unconverted_but_quantized_is_an_error(tmp_path):
    """AWQ-5.2: a modules_to_not_convert entry (substring match, as AutoAWQ applies it) naming a quantized module."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURE, ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"]["modules_to_not_convert"] = ["lm_head", "up_proj"]
    (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert report.verdict == "invalid"
    assert [(f.code, f.tensor) for f in report.findings] == [("awq.config.tensor_mismatch", "model.layers.0.mlp.up_proj")]


def test_gptq_layout_labelled_awq_is_caught(tmp_path):
    """AWQ-6.2: qweight packed along the input axis (K/8, N) under version gemm: the label contradicts the bytes."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    g = gptq.pack(*_layer(k=64, n=32), bits=4, version="v2", group_size=32)
    from safetensors.numpy import save_file
    save_file({f"m.{t}": np.asarray(getattr(g, t)) for t in ("qweight", "qzeros", "scales")}, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "awq", "bits": 4,
                                                                          "group_size": 32, "version": "gemm"}}))
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings] == [("awq.label.mismatch", "m.qweight")]


def test_autoawq_checkpoint_validates_and_decodes_from_the_command_line(tmp_path, capsys):
    """Issue 23, done when: `qformats validate` exits 0 and `qformats decode` writes WQLinear_GEMM's own
    weights (rounded to float16, as it computes) for every module of the AutoAWQ 0.2.9 checkpoint."""
    from qformats.cli import main

    expected = load_file(str(EXPECTED))
    assert main(["validate", str(FIXTURE)]) == 0
    out = tmp_path / "w.safetensors"
    args = [a for name in expected for a in ("--tensor", name.removesuffix(".weight"))]
    assert main(["decode", str(FIXTURE), *args, "-o", str(out)]) == 0
    decoded = load_file(str(out))
    assert sorted(decoded) == sorted(expected)
    for name, want in expected.items():
        assert np.array_equal(decoded[name].astype(np.float16).view(np.uint16), want.view(np.uint16)), name
