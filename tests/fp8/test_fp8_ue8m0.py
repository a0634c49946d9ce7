"""FP8-2.2: transformers' scale_fmt "ue8m0" (DeepSeek-V4 style F8_E8M0 weight_scale_inv), written by transformers
5.24.0's Fp8Quantize (fixtures/third_party/fp8/PROVENANCE.md); decoded as its Fp8Dequantize decodes it."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.cli import main
from qformats.layers import round_to
from qformats.validate import validate

from . import st_edit as st

UE8M0 = "hf_fp8_block_ue8m0"
DOWN = "model.layers.0.mlp.down_proj"


def _bits(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float32).view(np.uint32)


def test_ue8m0_checkpoint_is_valid_and_decodes_as_transformers(tmp_path):
    """FP8-2.2: F8_E8M0 weight_scale_inv, 2^(e-127); Fp8Dequantize's bfloat16 is FP8-5.1's value rounded once."""
    report = validate(str(st.CHECKPOINTS / UE8M0), deep=True, jobs=1)
    assert (report.verdict, report.format, report.summary["layers"], report.summary["warnings"]) == (
        "valid", "fp8_deepseek", 2, 0)
    out = tmp_path / "w.safetensors"
    want = st.expected(UE8M0)
    args = ["decode", str(st.CHECKPOINTS / UE8M0), "-o", str(out)]
    for tensor in want:
        args += ["--tensor", tensor]
    assert main(args) == 0
    got = load_file(str(out))
    for tensor, (value, precision) in want.items():
        assert np.array_equal(_bits(round_to(got[tensor], precision)), _bits(value)), tensor


def test_ue8m0_nan_byte_is_invalid(tmp_path):
    """FP8-2.2 / FP8-6.4: "the byte 0xFF is NaN"."""
    ckpt = st.copy(tmp_path, UE8M0)

    def spoil(t):
        a = st.array(t[f"{DOWN}.weight_scale_inv"])
        a[0, 1] = 0xFF
        t[f"{DOWN}.weight_scale_inv"] = ("F8_E8M0", list(a.shape), a.tobytes())
    st.edit(ckpt, spoil)
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("fp8.scale.nonfinite", f"{DOWN}.weight_scale_inv")]
    assert "must be finite (got nan at [0, 1], 1 non-finite)" in report.findings[0].message


@pytest.mark.parametrize(("fmt", "name"), [("float", UE8M0), ("ue8m0", "hf_fp8_block")])
def test_scale_dtype_against_scale_fmt_is_a_warning(tmp_path, fmt, name):
    """FP8-2.2: "A scale whose dtype disagrees with scale_fmt ... is a warning, fp8.scale.fmt_mismatch"."""
    ckpt = st.copy(tmp_path, name)
    cfg = st.config(ckpt)
    cfg["quantization_config"]["scale_fmt"] = fmt
    st.set_config(ckpt, cfg)
    report = validate(str(ckpt))
    assert report.verdict == "valid"
    assert [f.code for f in report.findings if f.severity == "warning"] == ["fp8.scale.fmt_mismatch"] * (
        2 if name == UE8M0 else 1)


def test_unknown_scale_fmt_is_a_config_error(tmp_path):
    """FP8-2.2: scale_fmt is "float" or "ue8m0" (transformers raises ValueError on any other)."""
    ckpt = st.copy(tmp_path, UE8M0)
    cfg = st.config(ckpt)
    cfg["quantization_config"]["scale_fmt"] = "e8m0"
    st.set_config(ckpt, cfg)
    report = validate(str(ckpt))
    assert "fp8.config.invalid" in {f.code for f in report.findings if f.severity == "error"}


def test_e8m0_scale_outside_the_fp8_layout_is_a_dtype_error(tmp_path):
    """FP8-6.3: F8_E8M0 scales belong to the fp8 layout; a compressed-tensors weight_scale of that dtype is refused."""
    ckpt = st.copy(tmp_path, "ct_fp8_tensor")
    q = "model.layers.0.self_attn.q_proj"
    st.edit(ckpt, lambda t: t.__setitem__(f"{q}.weight_scale", ("F8_E8M0", [1], bytes([120]))))
    report = validate(str(ckpt))
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("fp8.scale.dtype", f"{q}.weight_scale")]
