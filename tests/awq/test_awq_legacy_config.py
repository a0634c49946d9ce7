"""AWQ-5.1: AutoAWQ 0.1's quant_config.json (no quant_method, AutoAWQ's own keys, version upper-case) is AWQ's,
and a GPTQ quantize_config.json is still GPTQ's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats import tools
from qformats.errors import QFormatsError
from qformats.formats import awq
from qformats.formats.awq.layers import claims
from qformats.validate import validate

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures/third_party/autoawq/checkpoints/gemm_w4_g32"
GPTQ_FIXTURE = ROOT / "fixtures/checkpoints/gptq_v1_sym_4bit"
MODULES = ("model.layers.0.mlp.down_proj", "model.layers.0.mlp.up_proj", "model.layers.0.self_attn.q_proj")
# what AutoAWQ 0.1.0 save_quantized wrote for the fixture's scheme (json.dumps(self.quant_config))
LEGACY = {"zero_point": True, "q_group_size": 32, "w_bit": 4, "version": "GEMM"}


def _without_config_json_label(src: Path, dst: Path, side_file: str, side_config: dict) -> Path:
    """``src`` copied to ``dst`` with config.json's quantization_config moved out, ``side_config`` beside it."""
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    del config["quantization_config"]
    (dst / "config.json").write_text(json.dumps(config))
    (dst / side_file).write_text(json.dumps(side_config))
    return dst


def _legacy(tmp_path: Path, **changes) -> Path:
    return _without_config_json_label(FIXTURE, tmp_path / "legacy", "quant_config.json", {**LEGACY, **changes})


def _decoded(path: Path, out: Path) -> dict[str, np.ndarray]:
    tools.decode(str(path), list(MODULES), str(out))
    return load_file(str(out))


def test_legacy_quant_config_is_claimed_by_awq():
    """AWQ-5.1: "A config without `quant_method` holding `w_bit`, `q_group_size`, `zero_point` and a string
    `version` AutoAWQ writes (`gemm` or one of AWQ-1.2's, any case) is an AWQ config"."""
    assert claims(LEGACY) is True


def test_legacy_quant_config_without_version_is_not_claimed():
    """AWQ-5.1: "[...] and a string `version` AutoAWQ writes [...] is an AWQ config": without one it is not."""
    assert claims({k: v for k, v in LEGACY.items() if k != "version"}) is False


def test_legacy_quant_config_parses_with_the_version_lower_cased():
    """AWQ-5.1: "read as above (`version` lower-cased"; "AutoAWQ's own names `w_bit` and `q_group_size` are
    aliases"."""
    config, findings = awq.parse_config(LEGACY)
    assert (config.quant_method, config.bits, config.group_size, config.zero_point, config.version, findings) == \
        ("awq", 4, 32, True, "gemm", [])


def test_legacy_checkpoint_validates(tmp_path):
    """AWQ-5.1: the legacy config is "read as above": the fixture validates as it does with config.json's, and
    the one finding says which readers miss the config (`awq.config.legacy_only`)."""
    report = validate(str(_legacy(tmp_path)), deep=True, jobs=1)
    assert (report.verdict, report.format, report.summary["layers"]) == ("valid", "awq", 3)
    assert [(f.code, f.severity, f.message) for f in report.findings] == [(
        "awq.config.legacy_only", "warning", "the AWQ config is only in quant_config.json (AutoAWQ 0.1): vLLM reads "
        "it, but AutoAWQ 0.2.9 reads config.json's quantization_config, absent here, and falls back to group size "
        "128, where this checkpoint has 32: its scales do not fit the layers AutoAWQ builds; transformers finds no "
        "quantization config (AWQ-5.1)")]


@pytest.mark.parametrize(("config_json_label", "expected"), [
    pytest.param(False, ["awq.config.legacy_only"], id="quant_config-only"),
    pytest.param(True, [], id="config.json-too"),
])
def test_legacy_only_warning_needs_config_json_unlabelled(tmp_path, config_json_label, expected):
    """AutoAWQ 0.1.6 .. 0.1.8 wrote both files: then every reader finds a config (AWQ-5.1, CKPT-4.4)."""
    ckpt = _legacy(tmp_path, q_group_size=128)
    if config_json_label:
        config = json.loads((ckpt / "config.json").read_text())
        config["quantization_config"] = json.loads((FIXTURE / "config.json").read_text())["quantization_config"]
        (ckpt / "config.json").write_text(json.dumps(config))
    report = validate(str(ckpt))
    assert [f.code for f in report.findings if f.code.startswith("awq.config")] == expected


def test_legacy_only_at_autoawq_default_group_size_says_it_agrees(tmp_path):
    (finding,) = [f for f in validate(str(_legacy(tmp_path, q_group_size=128))).findings
                  if f.code == "awq.config.legacy_only"]
    assert "falls back to group size 128, which is this checkpoint's;" in finding.message


def test_legacy_checkpoint_decodes_as_the_config_json_one(tmp_path):
    """AWQ-5.1: the legacy config is "read as above": every module decodes to the same weights."""
    legacy = _decoded(_legacy(tmp_path), tmp_path / "legacy.safetensors")
    modern = _decoded(FIXTURE, tmp_path / "modern.safetensors")
    assert sorted(legacy) == sorted(modern) == sorted(f"{m}.weight" for m in MODULES)
    assert all(np.array_equal(legacy[name], modern[name]) for name in modern)


def test_legacy_gemv_config_is_another_layout(tmp_path):
    """AWQ-5.1: "a legacy `"GEMV"` is another layout, AWQ-1.2, refused as QF-5.2 says"."""
    with pytest.raises(QFormatsError) as err:
        validate(str(_legacy(tmp_path, version="GEMV")))
    assert str(err.value) == ("'version' must be 'gemm' (this is the AutoAWQ GEMV layout (qweight packed along the "
                              "input axis, split-k scales)) (got gemv) [checkpoint.format.unsupported, QF-5.2]")


def test_gptq_quantize_config_is_not_claimed_by_awq():
    """AWQ-5.1: "GPTQ's `quantize_config.json` (`bits`, `group_size`, `desc_act`, `sym`) holds none of
    AutoAWQ's keys and stays the GPTQ chapter's"."""
    assert claims({"bits": 4, "group_size": 32, "desc_act": False, "sym": True}) is False


def test_gptq_checkpoint_labelled_by_quantize_config_json_still_validates(tmp_path):
    """AWQ-5.1: a GPTQ fixture whose config is an AutoGPTQ quantize_config.json "stays the GPTQ chapter's"."""
    ckpt = _without_config_json_label(GPTQ_FIXTURE, tmp_path / "gptq", "quantize_config.json",
                                      {"bits": 4, "group_size": 32, "desc_act": False, "sym": True})
    report = validate(str(ckpt), deep=True)
    assert (report.verdict, report.format, report.summary["layers"], report.findings) == ("valid", "gptq", 2, [])


@pytest.mark.parametrize("config", [None, [], "awq", 4], ids=["none", "list", "str", "int"])
def test_a_config_that_is_no_object_is_not_claimed(config):
    """claims() answers for any JSON value a config file may hold (found by mutmut)."""
    assert claims(config) is False


def test_legacy_only_warning_holds_for_a_side_file_naming_quant_method(tmp_path):
    """AutoAWQ 0.2.9 reads config.json only: a quant_config.json saying quant_method awq changes nothing."""
    ckpt = _legacy(tmp_path, quant_method="awq")
    assert [f.code for f in validate(str(ckpt), jobs=1).findings] == ["awq.config.legacy_only"]
