"""CKPT-5: a verdict about the whole checkpoint. Every tensor is checked or named as unchecked, unquantized
tensors get the checks their dtype allows, and a checkpoint missing a layer or a module is not VALID.

The checkpoints are built from GPTQModel's real 2-layer llama checkpoint (fixtures/third_party/gptq), whose
config.json says ``num_hidden_layers: 2``, ``hidden_size: 128``, ``vocab_size: 256``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.completeness import completeness
from qformats.inventory import FLOAT_DTYPES, nonfinite_counts
from qformats.validate import validate

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
REAL = ROOT / "third_party" / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq"
PLAIN = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
         "model.layers.0.post_attention_layernorm.weight", "model.layers.1.input_layernorm.weight",
         "model.layers.1.post_attention_layernorm.weight", "model.norm.weight"]


def _edited(tmp_path: Path, edit, config: dict | None = None) -> Path:
    """A copy of the real checkpoint whose tensors ``edit`` rewrites (a dict name -> array in, out)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(REAL, ckpt)
    tensors = edit(load_file(REAL / "model.safetensors"))
    save_file(tensors, ckpt / "model.safetensors")
    if config is not None:
        whole = json.loads((REAL / "config.json").read_text())
        (ckpt / "config.json").write_text(json.dumps({**whole, **config}))
    return ckpt


def _with_value(name: str, index: tuple, value: float):
    def edit(t):
        arr = t[name].copy()
        arr[index] = value
        return {**t, name: arr}
    return edit


def _without(prefix: str):
    return lambda t: {k: v for k, v in t.items() if not k.startswith(prefix)}


def _nan_embedding_inf_norm(t):
    return _with_value("model.norm.weight", (7,), np.inf)(_with_value("model.embed_tokens.weight", (3, 5), np.nan)(t))


def _codes(report) -> list[tuple[str, str, str | None]]:
    return [(f.code, f.severity, f.tensor) for f in report.findings]


# -- CKPT-5.2 ------------------------------------------------------------------------------------------------

def test_deep_finds_nan_embedding_and_inf_norm(tmp_path, capsys):
    """CKPT-5.2: "With --deep every element of an unquantized float tensor MUST be finite" (issue 28's case)."""
    ckpt = _edited(tmp_path, _nan_embedding_inf_norm)
    assert main(["validate", "--deep", "--jobs", "1", str(ckpt)]) == 1
    report = validate(str(ckpt), deep=True, jobs=1)
    bad = [f for f in report.findings if f.code == "ckpt.float.nonfinite"]
    assert [(f.clause, f.tensor, f.count, f.message) for f in bad] == [
        ("CKPT-5.2", "model.embed_tokens.weight", 1, "'model.embed_tokens.weight' (F16, not quantized) has 1 non-finite "
         "element (1 NaN); first at [3, 5]; every reader loads it as it is"),
        ("CKPT-5.2", "model.norm.weight", 1, "'model.norm.weight' (F16, not quantized) has 1 non-finite element "
         "(1 +inf); first at [7]; every reader loads it as it is")]
    assert capsys.readouterr().out.splitlines()[0] == \
        f"{ckpt}: INVALID (gptq, 14 layers, 62 of 62 tensors checked, 2 errors, 0 warnings)"


def test_without_deep_the_float_tensors_are_named_not_checked(tmp_path, capsys):
    """CKPT-5.1: "A tensor whose values were not read is named, with the reason, never counted as checked"."""
    ckpt = _edited(tmp_path, _nan_embedding_inf_norm)
    assert main(["validate", "-v", str(ckpt)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{ckpt}: VALID (gptq, 14 layers, 56 of 62 tensors checked (not checked: 6 float; -v names "
                      "them), 0 errors, 0 warnings)")
    assert out[1:] == ["not checked:", "  6 tensors: not quantized: its values are read with --deep (CKPT-5.2)",
                       "    " + ", ".join(PLAIN),
                       "  generation_config.json, quant_log.csv, tokenizer.json, tokenizer_config.json: not a weight "
                       "or quantization config file: not read"]


def test_summary_counts_by_kind(tmp_path):
    """CKPT-5.1: the summary's ``tensors``, ``tensors_checked``, ``tensors_by_kind`` and ``not_checked``."""
    s = validate(str(REAL)).summary
    assert (s["tensors"], s["tensors_checked"], s["tensors_by_kind"]) == \
        (62, 56, {"quantized": {"total": 56, "checked": 56}, "float": {"total": 6, "checked": 0}})
    assert [e["tensor"] for e in s["not_checked"]] == PLAIN
    deep = validate(str(REAL), deep=True, jobs=1).summary
    assert (deep["tensors_checked"], deep["not_checked"]) == (62, [])


@pytest.mark.parametrize("path", [
    pytest.param(REAL, id="gptq"),
    pytest.param(ROOT / "checkpoints" / "spqr_csr", id="spqr"),
    pytest.param(ROOT / "checkpoints" / "awq_gemm", id="awq"),
    pytest.param(ROOT / "checkpoints" / "ctensors_w4_asym", id="ctensors"),
    pytest.param(ROOT / "checkpoints" / "q4_k_m.gguf", id="gguf"),
])
def test_every_format_reports_the_same_summary_keys(path):
    """CKPT-5.1: "the same summary keys for every format"; the counts add up."""
    s = validate(str(path)).summary
    assert {"tensors", "tensors_checked", "tensors_by_kind", "not_checked", "container"} <= set(s)
    assert s["tensors"] == sum(v["total"] for v in s["tensors_by_kind"].values())
    assert s["tensors_checked"] == sum(v["checked"] for v in s["tensors_by_kind"].values())
    assert s["tensors"] - s["tensors_checked"] == len(s["not_checked"])


@pytest.mark.parametrize("dtype", sorted(FLOAT_DTYPES))
def test_nonfinite_counts_agree_with_numpy_on_every_code(dtype):
    """CKPT-5.2's table: every raw code of the dtype (all 2^8 or 2^16, or float specials for wider types) is
    classified as NumPy (or, for BF16 and the F8 kinds, the bit definitions of OFP8 / OCP MX) classifies it."""
    bits = FLOAT_DTYPES[dtype]
    width = np.dtype(bits.uint).itemsize
    if width <= 2:
        raw = np.arange(1 << (8 * width), dtype=np.dtype(bits.uint))
    else:
        fl = {8: np.float64, 4: np.float32}[width]
        raw = np.array([0.0, -0.0, 1.5, np.nan, -np.nan, np.inf, -np.inf, 3.0e38, 1e-45], fl).view(bits.uint)
    nan, pinf, ninf, first = nonfinite_counts(raw, bits)
    expected = _independent_classes(dtype, raw)
    assert (nan, pinf, ninf) == expected
    assert (first >= 0) == (sum(expected) > 0)


def _independent_classes(dtype: str, raw: np.ndarray) -> tuple[int, int, int]:
    if dtype in ("F16", "F32", "F64", "C64"):
        values = raw.view({"F16": np.float16, "F32": np.float32, "C64": np.float32, "F64": np.float64}[dtype])
    elif dtype == "BF16":
        values = (raw.astype(np.uint32) << 16).view(np.float32)      # bfloat16 is float32's top half
    elif dtype == "F8_E5M2":
        values = (raw.astype(np.uint16) << 8).view(np.float16)      # E5M2 is float16's top byte
    else:
        nan = {"F8_E4M3": {0x7F, 0xFF}, "F8_E4M3FNUZ": {0x80}, "F8_E5M2FNUZ": {0x80}, "F8_E8M0": {0xFF}}[dtype]
        return sum(int(v) in nan for v in raw), 0, 0
    return int(np.isnan(values).sum()), int((values == np.inf).sum()), int((values == -np.inf).sum())


@pytest.mark.parametrize("position", [0, 15, 16, 17, 63])
def test_the_scan_finds_a_nan_on_either_side_of_a_chunk_boundary(monkeypatch, position):
    """CKPT-5.2: the scan is chunked (bounded memory); a NaN at, before and after a boundary is found once."""
    import qformats.inventory as inventory

    monkeypatch.setattr(inventory, "SCAN_BYTES", 32)       # 16 float16 values per chunk
    values = np.ones(64, np.float16)
    values[position] = np.nan
    assert inventory.nonfinite_counts(values, FLOAT_DTYPES["F16"]) == (1, 0, 0, position)


# -- CKPT-5.3 ------------------------------------------------------------------------------------------------

def test_an_embedding_that_contradicts_the_config_is_invalid(tmp_path):
    """CKPT-5.3: "an unquantized tensor whose shape contradicts config.json is an error"."""
    ckpt = _edited(tmp_path, lambda t: {**t, "model.embed_tokens.weight": t["model.embed_tokens.weight"][:200]})
    found = [f for f in validate(str(ckpt)).findings if f.code == "ckpt.tensor.config_shape"]
    assert [(f.severity, f.tensor, f.message) for f in found] == [(
        "error", "model.embed_tokens.weight", "'model.embed_tokens.weight' has shape [200, 128], but config.json "
        "(vocab_size 256, hidden_size 128) makes it [256, 128]; transformers refuses to load it (size mismatch)")]


def test_a_norm_of_the_config_width_is_not_a_finding():
    """CKPT-5.3: shapes that agree with the config give no finding (the real checkpoint)."""
    assert not [f for f in validate(str(REAL)).findings if f.code.startswith("ckpt.tensor.config")]


# -- CKPT-5.4 .. 5.6 ------------------------------------------------------------------------------------------

def test_a_deleted_module_is_missing(tmp_path, capsys):
    """CKPT-5.5: every tensor of model.layers.1.mlp.up_proj deleted is INVALID (issue 28's case)."""
    ckpt = _edited(tmp_path, _without("model.layers.1.mlp.up_proj."))
    assert main(["validate", str(ckpt)]) == 1
    assert [(f.code, f.clause, f.severity, f.tensor, f.message) for f in validate(str(ckpt)).findings] == [(
        "ckpt.module.missing", "CKPT-5.5", "error", "model.layers.1.mlp.up_proj",
        "'model.layers.1.mlp.up_proj' is missing: other layers of 'model.layers' hold 'mlp.up_proj' beside the "
        "modules this layer has (missing from 1 layer: 1)")]


def test_a_deleted_layer_is_missing_against_num_hidden_layers(tmp_path):
    """CKPT-5.4: "every layer index below num_hidden_layers MUST hold a tensor"."""
    ckpt = _edited(tmp_path, _without("model.layers.1."))
    assert _codes(validate(str(ckpt))) == [("ckpt.layer.missing", "error", "model.layers.1")]
    assert validate(str(ckpt)).findings[0].message == ("1 layer of 'model.layers' has no tensor at all: 1 "
                                                       "(config.json's num_hidden_layers says 2; 1 present)")


def test_a_layer_past_num_hidden_layers_is_a_warning(tmp_path):
    """CKPT-5.4: layers at or past num_hidden_layers (+ num_nextn_predict_layers) are a warning."""
    ckpt = _edited(tmp_path, lambda t: t, config={"num_hidden_layers": 1})
    assert _codes(validate(str(ckpt))) == [("ckpt.layer.extra", "warning", "model.layers.1")]


def test_multi_token_prediction_layers_the_config_declares_are_not_extra(tmp_path):
    """CKPT-5.4: DeepSeek-V3's ``num_nextn_predict_layers`` layers follow the decoder's and are expected."""
    ckpt = _edited(tmp_path, lambda t: t, config={"num_hidden_layers": 1, "num_nextn_predict_layers": 1})
    assert _codes(validate(str(ckpt))) == []


def test_a_whole_absent_block_is_a_warning(tmp_path):
    """CKPT-5.5: a sub-block absent from a layer is a warning (hybrid architectures differ by whole blocks)."""
    ckpt = _edited(tmp_path, _without("model.layers.1.self_attn."))
    assert _codes(validate(str(ckpt))) == [("ckpt.block.absent", "warning", "model.layers.1.self_attn")]


def test_partner_tensors_without_their_anchor_are_invalid(tmp_path):
    """CKPT-5.6: qzeros, scales and g_idx of a module whose qweight is gone is an error; its tensors unchecked."""
    ckpt = _edited(tmp_path, lambda t: {k: v for k, v in t.items() if k != "model.layers.0.self_attn.k_proj.qweight"})
    report = validate(str(ckpt))
    assert _codes(report) == [("ckpt.module.partial", "error", "model.layers.0.self_attn.k_proj")]
    assert report.findings[0].message == ("'model.layers.0.self_attn.k_proj' holds g_idx, qzeros, scales of a gptq "
                                          "module but no qweight: the module cannot be decoded, and a reader that "
                                          "skips it leaves the layer unquantized")
    assert report.summary["tensors_by_kind"]["quantized"] == {"total": 55, "checked": 52}


def test_layers_that_differ_both_ways_are_other_kinds_of_layer():
    """CKPT-5.5: dense and MoE layers (DeepSeek's first_k_dense_replace) are neither subset: no finding."""
    dense = [f"model.layers.0.mlp.{m}" for m in ("gate_proj", "up_proj", "down_proj")]
    moe = [f"model.layers.1.mlp.{m}" for m in ("gate", "experts.0.up_proj", "experts.1.up_proj")]
    assert completeness(dense + moe + ["model.layers.0.input_layernorm", "model.layers.1.input_layernorm"],
                        {"num_hidden_layers": 2}) == []


def test_a_missing_expert_is_a_missing_module():
    """CKPT-5.5: an expert absent from one layer, present in the others, is missing (ik_llama.cpp#2437's kind)."""
    names = [f"model.layers.{i}.mlp.experts.{e}.up_proj" for i in range(3) for e in range(4) if (i, e) != (2, 3)]
    found = completeness(names, {"num_hidden_layers": 3})
    assert [(f.code, f.tensor, f.count) for f in found] == [
        ("ckpt.module.missing", "model.layers.2.mlp.experts.3.up_proj", 1)]


def test_a_gap_is_missing_without_a_config():
    """CKPT-5.4: without num_hidden_layers, an index below the largest present one with no tensor is missing."""
    found = completeness(["model.layers.0.mlp", "model.layers.2.mlp"], None)
    assert [(f.code, f.message) for f in found] == [
        ("ckpt.layer.missing", "1 layer of 'model.layers' has no tensor at all: 1 (layer 2 is present; 2 present)")]


# -- GGUF ------------------------------------------------------------------------------------------------------

gguf = pytest.importorskip("gguf")


def _gguf(path: Path, blocks: int, names: list[str]) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(blocks)
    for name in names:
        writer.add_tensor(name, np.ones((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_gguf_blocks_are_counted_against_block_count(tmp_path):
    """CKPT-5.4: a GGUF file's ``blk.N`` against ``{arch}.block_count``, the same rule as num_hidden_layers."""
    path = _gguf(tmp_path / "short.gguf", 3, [f"blk.{i}.{m}.weight" for i in range(2) for m in ("attn_q", "ffn_up")])
    report = validate(str(path))
    assert [(f.code, f.tensor, f.message) for f in report.findings] == [(
        "ckpt.layer.missing", "blk.2", "1 layer of 'blk' has no tensor at all: 2 (the GGUF header's block_count "
        "says 3; 2 present)")]


def test_gguf_module_missing_from_one_block(tmp_path):
    """CKPT-5.5 on GGUF names: blk.1 without ffn_up beside its attn_q."""
    names = ["blk.0.attn_q.weight", "blk.0.ffn_up.weight", "blk.1.attn_q.weight", "blk.1.ffn_norm.weight",
             "blk.0.ffn_norm.weight"]
    report = validate(str(_gguf(tmp_path / "m.gguf", 2, names)))
    assert [(f.code, f.tensor) for f in report.findings] == [("ckpt.module.missing", "blk.1.ffn_up")]
    assert report.summary["tensors_by_kind"] == {"float": {"total": 5, "checked": 5}}


# -- CT-5.2: config targets that match nothing -------------------------------------------------------------------

def test_a_compressed_tensors_target_matching_no_module_is_a_warning(tmp_path):
    """CT-5.2: "A config group target that is a module name or a regular expression and matches no module of
    the checkpoint is a warning"; class targets are not judged."""
    ckpt = tmp_path / "ct"
    shutil.copytree(ROOT / "checkpoints" / "ctensors_w4_asym", ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    group = next(iter(config["quantization_config"]["config_groups"].values()))
    group["targets"] = [*group["targets"], "re:.*\\.experts\\.\\d+\\.up_proj$", "model.layers.9.mlp.up_proj", "Conv2d"]
    (ckpt / "config.json").write_text(json.dumps(config))
    found = [(f.code, f.severity, f.tensor) for f in validate(str(ckpt)).findings]
    assert found == [("ctensors.config.target_unmatched", "warning", "re:.*\\.experts\\.\\d+\\.up_proj$"),
                     ("ctensors.config.target_unmatched", "warning", "model.layers.9.mlp.up_proj")]


# -- the sweep: no verdict line claims a tensor it did not check ---------------------------------------------------

def _fixture_checkpoints() -> list[Path]:
    """Every checkpoint under fixtures/ (a .gguf file or a directory holding .safetensors) and the samples."""
    found = set(ROOT.rglob("*.gguf")) | {p.parent for p in ROOT.rglob("*.safetensors")}
    return sorted(found)


@pytest.mark.parametrize("path", _fixture_checkpoints(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_verdict_line_claims_a_tensor_it_did_not_check(path, capsys):
    """CKPT-5.1 over every fixture: the verdict line's "C of N tensors checked" is the summary's count, each
    tensor not checked is named with a reason, and --deep checks at least what the plain run checked."""
    from qformats.errors import QFormatsError
    from qformats.report import to_text

    try:
        plain, deep = validate(str(path), jobs=1), validate(str(path), deep=True, jobs=1)
    except QFormatsError as err:           # could not run (QF-5.1): no verdict, nothing claimed
        assert err.code in ("checkpoint.empty", "checkpoint.format.unsupported", "ckpt.no_model")
        return
    for report in (plain, deep):
        s = report.summary
        assert s["tensors_checked"] + len(s["not_checked"]) == s["tensors"]
        assert all(entry["reason"] for entry in s["not_checked"])
        said = "unreadable: 0 tensors checked" if s["container"] == "unreadable" else \
            f"{s['tensors_checked']} of {s['tensors']} tensor"
        assert said in to_text(report).splitlines()[0]
    assert deep.summary["tensors_checked"] >= plain.summary["tensors_checked"]
    assert {e["tensor"] for e in deep.summary["not_checked"]} <= {e["tensor"] for e in plain.summary["not_checked"]}


def test_a_projection_that_contradicts_the_config_is_invalid(tmp_path):
    """CKPT-5.3: a quantized k_proj of a llama must have num_key_value_heads * head_dim outputs (2 * 32 = 64)."""
    ckpt = _edited(tmp_path, lambda t: t, config={"num_key_value_heads": 4})
    found = [(f.code, f.tensor, f.message) for f in validate(str(ckpt)).findings]
    assert found == [("ckpt.tensor.config_shape", f"model.layers.{i}.self_attn.{m}_proj",
                      f"'model.layers.{i}.self_attn.{m}_proj' is a 128 -> 64 projection (in -> out), but config.json "
                      "makes it 128 -> 128; transformers refuses to load it (size mismatch)")
                     for i in (0, 1) for m in ("k", "v")]


def test_projections_of_other_architectures_are_not_judged(tmp_path):
    """CKPT-5.3: "Other architectures ... are not judged" (a model_type outside the llama-shaped list)."""
    ckpt = _edited(tmp_path, lambda t: t, config={"num_key_value_heads": 4, "model_type": "deepseek_v3"})
    assert validate(str(ckpt)).findings == []


@pytest.mark.parametrize("path", _fixture_checkpoints(), ids=lambda p: str(p.relative_to(ROOT)))
def test_inspect_json_and_conformance_checkpoint_count_what_validate_counts(path, capsys):
    """CKPT-5.1: inspect --json carries validate's summary, and conformance checkpoint's verdict line says the
    same "C of N tensors checked" as validate's (one accounting, every command)."""
    from conformance.checkpoint import check_checkpoint
    from qformats.errors import QFormatsError
    from qformats.report import scope

    try:
        report = validate(str(path), jobs=1)
    except QFormatsError:
        return
    code = main(["inspect", "--json", str(path)])        # inspect decodes every layer: validate --deep's count
    doc = json.loads(capsys.readouterr().out)
    deep = validate(str(path), deep=True, jobs=1)
    assert code == deep.exit_code()
    assert {k: doc["summary"][k] for k in ("tensors", "tensors_checked", "not_checked")} == \
        {k: deep.summary[k] for k in ("tensors", "tensors_checked", "not_checked")}
    table = check_checkpoint(str(path))
    assert (table["tensors"], table["tensors_checked"]) == (report.summary["tensors"], report.summary["tensors_checked"])
    assert table["scope"] == scope(report.summary, names="validate -v names them")


# -- GPTQ-6.6: dynamic rules that decide nothing ------------------------------------------------------------------

def test_a_dynamic_rule_deciding_no_module_is_a_warning(tmp_path):
    """GPTQ-6.6: "A rule that decides no module of the checkpoint ... does nothing in any reader" (warning);
    a "-:" rule naming an unquantized module and a rule deciding some modules are in use."""
    rules = {"-:model\\.embed_tokens": {}, "+:.*\\.mlp\\.up_proj": {"bits": 4, "group_size": 32},
             "+:.*\\.mlp\\.(up|down)_proj": {"bits": 4, "group_size": 32}, "+:.*experts": {"bits": 4}}
    whole = json.loads((REAL / "config.json").read_text())
    ckpt = _edited(tmp_path, lambda t: t, config={"quantization_config": {**whole["quantization_config"],
                                                                          "dynamic": rules}})
    (ckpt / "quantize_config.json").unlink()
    found = [(f.code, f.severity, f.message) for f in validate(str(ckpt)).findings]
    assert found == [("gptq.config.dynamic_unused", "warning", "dynamic rule '+:.*experts' decides no module of this "
                      "checkpoint (it matches none, or an earlier rule decides each it matches); readers never "
                      "apply it")]
