"""FP8-6: each corruption, made from the real libraries' fixtures, is INVALID (or named, for the warnings)
with a finding that names the tensor, the clause and the value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.validate import validate

from . import st_edit as st

O_PROJ = "model.layers.0.self_attn.o_proj"
Q_PROJ = "model.layers.0.self_attn.q_proj"
DOWN = "model.layers.0.mlp.down_proj"


def _fp8_findings(path) -> tuple[str, list[tuple]]:
    report = validate(str(path))
    return report.verdict, [(f.code, f.severity, f.clause, f.tensor, f.message) for f in report.findings
                            if f.code.startswith("fp8.")]


def _set(name: str, dtype: str, change):
    """A change to one tensor's array (``change(a) -> a``), in whichever shard holds it."""
    def apply(tensors):
        if name not in tensors:
            return False
        tensors[name] = st.entry(dtype, change(st.array(tensors[name])))
    return apply


def test_missing_scale_is_invalid(tmp_path):
    """FP8-6.2: an FP8 weight whose weight_scale is gone (the no-scale read of TensorRT-Model-Connect#1115)."""
    ckpt = st.copy(tmp_path, "ct_fp8_tensor")
    st.edit(ckpt, lambda t: t.pop(f"{Q_PROJ}.weight_scale") and None)
    verdict, found = _fp8_findings(ckpt)
    assert verdict == "invalid"
    assert [f for f in found if f[1] == "error"] == [("fp8.scale.missing", "error", "FP8-6.2", f"{Q_PROJ}.weight",
                      f"'{Q_PROJ}.weight' is FP8 but its module holds no weight_scale nor weight_scale_inv: a reader "
                      "that goes on decodes the bare E4M3 values, up to 448 (NVIDIA/TensorRT-Model-Connect#1115)")]


def test_missing_scale_across_shards_is_invalid(tmp_path):
    """FP8-6.2 in a sharded checkpoint: the scale's shard and the index lose it, the weight's shard keeps it."""
    ckpt = st.copy(tmp_path, "ct_fp8_channel")
    st.edit(ckpt, lambda t: (t.pop(f"{DOWN}.weight_scale") and None) if f"{DOWN}.weight_scale" in t else False)
    index_file = ckpt / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    del index["weight_map"][f"{DOWN}.weight_scale"]
    index_file.write_text(json.dumps(index))
    verdict, found = _fp8_findings(ckpt)
    assert (verdict, [(c, t) for c, _, _, t, _ in found]) == ("invalid", [("fp8.scale.missing", f"{DOWN}.weight")])


def test_the_only_scale_missing_is_invalid_not_could_not_run(tmp_path):
    """FP8-6.2: with no FP8 module left to claim, the config's own format still names the bare weight: INVALID
    (exit 1) with the finding, the weight counted as checked, never decoded."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, lambda t: t.pop(f"{Q_PROJ}.weight_scale_inv") and None)
    report = validate(str(ckpt))
    assert (report.verdict, report.format) == ("invalid", "fp8_deepseek")
    assert [(f.code, f.tensor) for f in report.findings if f.severity == "error"] == [
        ("fp8.scale.missing", f"{Q_PROJ}.weight")]
    assert (report.summary["tensors"], report.summary["tensors_checked"]) == (2, 1)
    assert [row["tensor"] for row in report.summary["not_checked"]] == ["lm_head.weight"]    # float, no --deep


def test_no_fp8_weight_and_no_scale_is_still_could_not_run(tmp_path):
    """QF-5.1: an fp8 config over a checkpoint with no FP8 tensor at all has nothing to judge (exit 2)."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, lambda t: [t.pop(f"{Q_PROJ}.weight_scale_inv"), t.pop(f"{Q_PROJ}.weight")] and None)
    with pytest.raises(QFormatsError) as err:
        validate(str(ckpt))
    assert err.value.code == "checkpoint.empty"


@pytest.mark.parametrize(("value", "code", "shown"), [
    pytest.param(np.nan, "fp8.scale.nonfinite", "must be finite (got nan at [0, 0], 1 non-finite)", id="nan"),
    pytest.param(np.inf, "fp8.scale.nonfinite", "must be finite (got inf at [0, 0], 1 non-finite)", id="inf"),
    pytest.param(0.0, "fp8.scale.nonpositive", "must be positive (got 0.0 at [0, 0], 1 not positive)", id="zero"),
    pytest.param(-0.5, "fp8.scale.nonpositive", "must be positive (got -0.5 at [0, 0], 1 not positive)", id="negative"),
])
def test_bad_weight_scale_inv_is_invalid(tmp_path, value, code, shown):
    """FP8-6.4: a NaN, infinite, zero or negative float32 weight_scale_inv (transformers' fixture)."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, _set(f"{Q_PROJ}.weight_scale_inv", "F32", lambda a: np.full_like(a, value)))
    tensor = f"{Q_PROJ}.weight_scale_inv"
    assert _fp8_findings(ckpt) == ("invalid", [(code, "error", "FP8-6.4", tensor, f"'{tensor}' {shown}")])


def test_nan_block_scale_in_bfloat16_is_invalid(tmp_path):
    """FP8-6.4: a NaN in the second block row of compressed-tensors' bfloat16 block scale."""
    ckpt = st.copy(tmp_path, "ct_fp8_block")
    def nan_row(a):
        a[1, 0] = 0x7FC0                           # bfloat16 NaN
        return a
    st.edit(ckpt, _set(f"{O_PROJ}.weight_scale", "BF16", nan_row))
    tensor = f"{O_PROJ}.weight_scale"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.scale.nonfinite", "error", "FP8-6.4", tensor,
                                                f"'{tensor}' must be finite (got nan at [1, 0], 1 non-finite)")])


@pytest.mark.parametrize("byte", [pytest.param(0x7F, id="0x7F"), pytest.param(0xFF, id="0xFF")])
def test_nan_weight_byte_is_invalid(tmp_path, byte):
    """FP8-6.5: an E4M3FN NaN byte in the weight (writers clamp to +-448)."""
    ckpt = st.copy(tmp_path, "ct_fp8_channel")
    def poke(a):
        a[3, 5] = byte
        return a
    st.edit(ckpt, _set(f"{Q_PROJ}.weight", "F8_E4M3", poke))
    tensor = f"{Q_PROJ}.weight"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.weight.nan", "error", "FP8-6.5", tensor,
                                                f"'{tensor}' holds 1 NaN E4M3FN bytes (first 0x{byte:02X} at [3, 5]); "
                                                "writers clamp to +-448")])


def test_block_grid_with_too_few_rows_is_invalid(tmp_path):
    """FP8-6.3: a (1, 1) grid for a 130-row weight whose [128, 128] ceil grid is (2, 1)."""
    ckpt = st.copy(tmp_path, "ct_fp8_block")
    st.edit(ckpt, _set(f"{O_PROJ}.weight_scale", "BF16", lambda a: a[:1]))
    tensor = f"{O_PROJ}.weight_scale"
    assert _fp8_findings(ckpt) == ("invalid", [(
        "fp8.scale.shape", "error", "FP8-6.3", tensor,
        f"'{tensor}' must be [2, 1] for weight (130, 128), strategy block [128, 128] (ceil grid) (got [1, 1]); too "
        "few rows: compressed-tensors 0.20.0 reuses the rows it has and decodes without an error")])


def test_block_size_comes_from_the_config_not_the_grid(tmp_path):
    """FP8-6.3: block_structure [64, 128] makes o_proj's grid (3, 1); the stored (2, 1) contradicts it."""
    ckpt = st.copy(tmp_path, "ct_fp8_block")
    cfg = st.config(ckpt)
    cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["block_structure"] = [64, 128]
    st.set_config(ckpt, cfg)
    tensor = f"{O_PROJ}.weight_scale"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.scale.shape", "error", "FP8-6.3", tensor,
                                                f"'{tensor}' must be [3, 1] for weight (130, 128), strategy block "
                                                "[64, 128] (ceil grid) (got [2, 1]); too few rows: compressed-tensors "
                                                "0.20.0 reuses the rows it has and decodes without an error")])


def test_nonfinite_input_scale_is_invalid(tmp_path):
    """FP8-6.6: compressed-tensors' static input_scale must be finite."""
    ckpt = st.copy(tmp_path, "ct_fp8_tensor")
    k_proj = "model.layers.0.self_attn.k_proj.input_scale"
    st.edit(ckpt, _set(k_proj, "BF16", lambda a: np.full_like(a, 0x7F80)))     # bfloat16 +inf
    verdict, found = _fp8_findings(ckpt)
    assert verdict == "invalid"
    assert ("fp8.input_scale.nonfinite", "error", "FP8-6.6", k_proj,
            f"'{k_proj}' must be finite (got inf at [0], 1 non-finite)") in found


def test_fused_shards_with_different_scales_are_named():
    """FP8-6.7: compressed-tensors' real q/k/v per-tensor scales differ; vLLM re-quantizes to the largest."""
    verdict, found = _fp8_findings(st.CHECKPOINTS / "ct_fp8_tensor")
    assert (verdict, found) == ("valid", [(
        "fp8.fused.scales_differ", "warning", "FP8-6.7", Q_PROJ,
        "'model.layers.0.self_attn': the per-tensor weight scales of the shards vLLM fuses differ (q_proj "
        "0.00111389, k_proj 0.00138092, v_proj 0.00167084); vLLM re-quantizes them to the largest "
        "(requantize_with_max_scale), rounding the others' weights again (vllm#54974)")])


def test_module_the_config_ignores_but_holding_fp8_tensors_is_invalid(tmp_path):
    """FP8-4.2: an expert listed in ignore whose tensors are FP8 contradicts the config."""
    ckpt = st.copy(tmp_path, "ct_fp8_block")
    cfg = st.config(ckpt)
    cfg["quantization_config"]["ignore"].append("model.layers.0.mlp.experts.0.gate_proj")
    st.set_config(ckpt, cfg)
    module = "model.layers.0.mlp.experts.0.gate_proj"
    assert _fp8_findings(ckpt) == ("invalid", [(
        "fp8.config.tensor_mismatch", "error", "FP8-4.2", module,
        f"'{module}' holds weight_scale but ignored by ignore entry '{module}' (compressed-tensors float-quantized)")])


def test_scale_of_another_dtype_is_invalid(tmp_path):
    """FP8-6.3: a weight_scale_inv stored as U8 bytes is refused by dtype: one-byte scales are F8_E8M0 (FP8-2.2)."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, lambda t: t.update({f"{Q_PROJ}.weight_scale_inv": ("U8", [1, 1], b"\x7f")}))
    tensor = f"{Q_PROJ}.weight_scale_inv"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.scale.dtype", "error", "FP8-6.3", tensor,
                                                f"'{tensor}' must be one of F32, BF16, F16, F8_E8M0 (got U8)")])


def test_weight_that_is_not_fp8_is_invalid(tmp_path):
    """FP8-6.1: a module with an FP8 scale whose weight is bfloat16 (a writer that skipped the cast)."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, lambda t: t.update({f"{Q_PROJ}.weight": ("BF16", [128, 128], bytes(2 * 128 * 128))}))
    tensor = f"{Q_PROJ}.weight"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.weight.dtype", "error", "FP8-6.1", tensor,
                                                f"'{tensor}' must be F8_E4M3 (out, in) (got BF16 [128, 128])")])


def test_config_with_a_zero_block_size_is_invalid(tmp_path):
    """FP8-1.1: weight_block_size must be two positive integers."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    cfg = st.config(ckpt)
    cfg["quantization_config"]["weight_block_size"] = [0, 128]
    st.set_config(ckpt, cfg)
    verdict, found = _fp8_findings(ckpt)
    assert (verdict, [(c, t) for c, _, _, t, _ in found]) == ("invalid", [("fp8.config.invalid", "weight_block_size")])


def test_scale_without_its_weight_is_invalid(tmp_path):
    """FP8-6.1: a module holding weight_scale_inv but no weight."""
    ckpt = st.copy(tmp_path, "hf_fp8_block")
    st.edit(ckpt, lambda t: t.pop(f"{Q_PROJ}.weight") and None)
    tensor = f"{Q_PROJ}.weight"
    assert _fp8_findings(ckpt) == ("invalid", [("fp8.weight.missing", "error", "FP8-6.1", tensor,
                                                f"'{Q_PROJ}' holds weight_scale_inv but no weight")])


@pytest.mark.parametrize("value", [["float-quantized"], {"a": 1}], ids=["list", "object"])
def test_a_format_that_is_no_text_is_not_an_internal_error(tmp_path, value):
    """FP8-1.1 on hostile configs: a compressed-tensors `format` that is a list or an object is read as naming no
    FP8 layout (it was an unhashable-type crash in validate, convert and decode)."""
    import shutil

    path = tmp_path / "ckpt"
    shutil.copytree(st.CHECKPOINTS / "ct_fp8_channel", path)
    config = json.loads((path / "config.json").read_text())
    config["quantization_config"]["format"] = value
    for group in config["quantization_config"]["config_groups"].values():
        group["format"] = value
    (path / "config.json").write_text(json.dumps(config))
    try:
        report = validate(str(path))
    except QFormatsError as err:             # could not run is an answer; a TypeError is not
        assert err.code.startswith(("checkpoint.", "ctensors.", "fp8."))
    else:
        assert report.verdict == "invalid"
