"""FP4 checkpoints written by compressed-tensors 0.20.0 and the gpt-oss layout (spec/fp4.md): valid, every tensor
checked, decoded bit-exactly as the libraries decode them, from Python and from the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from fp4_fixtures import CHECKPOINTS, expected, read_st
from qformats.containers.checkpoint import open_checkpoint
from qformats.formats.fp4 import decode_module
from qformats.validate import group_layers, validate

ALL = ("ct_nvfp4", "ct_mxfp4", "gpt_oss_mxfp4", "modelopt_nvfp4", "modelopt_mxfp4")


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ALL])
def test_real_checkpoint_is_valid_with_every_tensor_checked(name):
    """FP4-5.3: each module is claimed by the FP4 room, so every tensor counts as checked (CKPT-5.1, --deep)."""
    report = validate(str(CHECKPOINTS / name), deep=True, jobs=1)
    assert (report.verdict, report.findings) == ("valid", [])
    assert report.summary["tensors_checked"] == report.summary["tensors"]
    assert report.summary["modules_not_checked"] == 0


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in ALL])
def test_decode_is_bit_exact_with_the_library(name):
    """FP4-3.1, FP4-3.7, FP4-3.8, FP4-4.1, FP4-4.2: the reference decode equals the library's own bfloat16 weights
    bit for bit, signed zeros included (gpt-oss: transformers returns (E, in, out), qformats nn.Linear's
    (E, out, in))."""
    want = expected(name)
    got = {}
    with open_checkpoint(str(CHECKPOINTS / name)) as ckpt:
        for group in group_layers(ckpt.tensor_names(), ckpt.config)[0]:
            for suffix, w in decode_module(ckpt, group).items():
                key = f"{group.name}.{suffix}"
                got[key] = w if suffix == "weight" else w.transpose(0, 2, 1)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == np.float32
        np.testing.assert_array_equal(got[key].view(np.uint32), want[key].view(np.uint32), err_msg=key)


@pytest.mark.parametrize(("name", "module"), [pytest.param(n, m, id=n) for n, m in (
    ("ct_nvfp4", "model.layers.1.self_attn.k_proj"), ("ct_mxfp4", "model.layers.1.self_attn.k_proj"),
    ("modelopt_nvfp4", "model.layers.0.self_attn.k_proj"), ("modelopt_mxfp4", "model.layers.0.self_attn.v_proj"))])
def test_cli_decode_is_bit_exact_with_the_library(name, module, tmp_path):
    """FP4-3.1, FP4-3.7, FP4-4.1, FP4-4.2: ``qformats decode PATH --tensor NAME -o OUT`` writes the library's own
    weights for the ragged 8-row layers."""
    out = tmp_path / "w.safetensors"
    run = subprocess.run([sys.executable, "-m", "qformats", "decode", str(CHECKPOINTS / name), "--tensor", module,
                          "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    dtype, shape, raw = read_st(out)[f"{module}.weight"]
    assert (dtype, shape) == ("F32", [8, 32])
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint32).reshape(shape),
                                  expected(name)[f"{module}.weight"].view(np.uint32))


def test_cli_validate_json_names_the_layouts():
    """FP4-1.1: ``inspect``/``validate --json`` rows say the layout, group size and bits per weight."""
    run = subprocess.run([sys.executable, "-m", "qformats", "validate", str(CHECKPOINTS / "ct_nvfp4"), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    row = json.loads(run.stdout)["layers"][0]
    assert {k: row[k] for k in ("layer", "format", "group_size", "bits_per_weight", "in_features", "out_features")} \
        == {"layer": "model.layers.0.mlp.down_proj", "format": "ct_nvfp4", "group_size": 16, "bits_per_weight": 4.5,
            "in_features": 64, "out_features": 32}


def test_cli_decode_writes_both_gpt_oss_projections_bit_exact(tmp_path):
    """FP4-3.8: ``qformats decode`` writes a gpt-oss experts module as two (E, out, in) weights, the transpose of
    transformers' (E, in, out), bit for bit."""
    module = "model.layers.0.mlp.experts"
    out = tmp_path / "w.safetensors"
    run = subprocess.run([sys.executable, "-m", "qformats", "decode", str(CHECKPOINTS / "gpt_oss_mxfp4"), "--tensor",
                          module, "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    written = read_st(out)
    want = expected("gpt_oss_mxfp4")
    assert sorted(written) == [f"{module}.down_proj", f"{module}.gate_up_proj"]
    for name, (dtype, shape, raw) in written.items():
        assert (dtype, shape) == ("F32", list(want[name].transpose(0, 2, 1).shape))
        np.testing.assert_array_equal(np.frombuffer(raw, np.uint32).reshape(shape),
                                      want[name].transpose(0, 2, 1).view(np.uint32), err_msg=name)
