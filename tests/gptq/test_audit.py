"""One GPTQ layer audited as the validator does: structure, label evidence, zero underflow (GPTQ-3.4, 8)."""

from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from qformats.formats import gptq
from qformats.formats.gptq.audit import layer_findings

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "gptq" / "checkpoints"


def golden_layer(checkpoint, module="model.layers.0.self_attn.q_proj"):
    tensors = load_file(ROOT / checkpoint / "model.safetensors")
    return {key.rsplit(".", 1)[1]: value for key, value in tensors.items() if key.startswith(module + ".")}


def test_real_valid_checkpoint_layer_has_no_findings():
    """GPTQ-8.1: GPTQModel 7.7.0's sym 4-bit v1 layer (0x77777777) agrees with its 'gptq' label."""
    findings, summary = layer_findings("q_proj", golden_layer("e2e_b4_sym_g32_gptq"), bits=4,
                                              group_size=32, declared="v1", desc_act=False, sym=True)
    assert findings == []
    assert (summary["evidence"], summary["evidence_method"], summary["g_idx"]) == ("v1", "symmetric-exact", "trivial")


def test_real_v2_zeros_labelled_gptq_is_a_label_mismatch():
    """GPTQ-8.3: v2 zeros (0x88888888) under checkpoint_format 'gptq' -- the "!!!!" bug -- name the fix."""
    findings, _ = layer_findings("q_proj", golden_layer("neg_b4_sym_v2_zeros_labelled_gptq"), bits=4,
                                        group_size=32, declared="v1", desc_act=False, sym=True)
    assert [(f.code, f.severity, f.tensor) for f in findings] == [("gptq.label.mismatch", "error", "q_proj.qzeros")]
    assert "qformats convert PATH --to gptq_v2" in findings[0].message


def test_autogptq_zero_underflow_is_counted_with_its_signature_and_reader_damage():
    """GPTQ-3.4, 8.5: all-ones v1 fields are counted, the AutoGPTQ bleed named, per-reader damage given."""
    rng = np.random.default_rng(0)
    zeros = rng.integers(1, 16, (4, 64))
    zeros[0, 0] = 0  # lowest field of the first word: the bleed turns all 8 fields to all ones
    layer = gptq.pack(rng.integers(0, 16, (128, 64)), zeros, np.ones((4, 64), np.float16), bits=4, writer="autogptq")
    findings, _ = layer_findings("m", layer, bits=4, group_size=32, declared="v1", desc_act=False)
    assert [f.code for f in findings] == ["gptq.zero.v1_unrepresentable"]
    assert findings[0].message.startswith("in 'm' 8 v1 zero fields are all ones (15)")
    assert "\nfix: requantize" in findings[0].message
    assert "autogptq-or-bleed" in findings[0].message and "vllm_gptq_gemm" in findings[0].message


def test_structural_error_becomes_an_error_finding_naming_the_layer():
    """QF-2.3: a malformed layer is reported as a finding with the full tensor name, not raised."""
    layer = dict(golden_layer("e2e_b4_sym_g32_gptq"))
    layer["scales"] = layer["scales"][:, :64]
    findings, _ = layer_findings("q_proj", layer, bits=4, group_size=32, declared="v1", desc_act=False)
    assert [(f.code, f.tensor) for f in findings] == [("tensor.shape", "q_proj.scales")]
    assert findings[0].message.startswith("'q_proj.scales' must be of shape (4, 128)")


def test_nonfinite_scales_are_counted_by_kind():
    """QF-2.4, GPTQ-3.5: NaN, +inf and -inf in one scales tensor: the finding names the first and counts each."""
    rng = np.random.default_rng(0)
    layer = dict(gptq.pack(rng.integers(0, 16, (128, 64)), rng.integers(1, 16, (4, 64)), np.ones((4, 64), np.float16),
                           bits=4).tensors)
    scales = layer["scales"].copy()
    scales[0, 1], scales[1, 2], scales[2, 3], scales[3, 3] = np.nan, np.inf, -np.inf, -np.inf
    layer["scales"] = scales
    findings, _ = layer_findings("m", layer, bits=4, group_size=32, declared="v1", desc_act=False)
    assert [(f.code, f.tensor, f.message) for f in findings] == [(
        "gptq.scales.nonfinite", "m.scales",
        "'m.scales' must be finite float16 (got NaN at [0, 1]; in all 1 NaN, 1 +inf, 2 -inf of 256 values)")]
