"""``qformats conformance checkpoint`` judges readers relative to the writer (GPTQ-4.1, 4.3, 8.5).

Held against the real writers' vectors (fixtures/third_party/gptq, AutoGPTQ 0.7.1 and GPTQModel
7.7.0): each zero-0 layer is saved as a checkpoint whose config names its writer, and our per-reader
verdicts are compared with what the real readers decoded (``read.<reader>.<writer>``) against the
weights meant (``truth``). Those arrays came from the real tools, not from qformats.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conformance.checkpoint import check_checkpoint, to_text

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "gptq"
MANIFEST = {e["case_id"]: e for e in json.loads((ROOT / "manifest.json").read_text())["layers"]}
ZERO0 = ["b4_asym_g32_k128_n64_z0", "b3_asym_g32_k64_n96_z0"]
LAYER = "model.layers.0.mlp.up_proj"
QZEROS = {"autogptq": "autogptq.qzeros", "gptqmodel_v1": "gptqmodel_v1.qzeros"}
QWEIGHT = {"autogptq": "autogptq.qweight", "gptqmodel_v1": "gptqmodel.qweight"}
# What each real writer puts in quantize_config.json (AutoGPTQ 0.7.1 BaseQuantizeConfig.to_dict keys;
# GPTQModel's meta.quantizer), GPTQ-6.2, GPTQ-8.5.
CONFIGS = {
    "autogptq": {"damp_percent": 0.01, "desc_act": False, "static_groups": False, "true_sequential": True,
                 "is_marlin_format": False, "model_name_or_path": None, "model_file_base_name": None,
                 "quant_method": "gptq"},
    "gptqmodel_v1": {"desc_act": False, "quant_method": "gptq", "checkpoint_format": "gptq",
                     "meta": {"quantizer": ["gptqmodel:7.7.0"]}},
    "none": {"desc_act": False, "quant_method": "gptq", "checkpoint_format": "gptq"},
}


def _checkpoint(tmp: Path, case_id: str, writer: str, config: str) -> tuple[Path, dict[str, np.ndarray]]:
    t = load_file(ROOT / MANIFEST[case_id]["file"])
    entry = MANIFEST[case_id]
    save_file({f"{LAYER}.qweight": t[QWEIGHT[writer]], f"{LAYER}.qzeros": t[QZEROS[writer]],
               f"{LAYER}.scales": t["scales"], f"{LAYER}.g_idx": t["g_idx"]}, str(tmp / "model.safetensors"))
    cfg = CONFIGS[config] | {"bits": entry["bits"], "group_size": entry["group_size"], "sym": entry["sym"]}
    (tmp / "quantize_config.json").write_text(json.dumps(cfg))
    return tmp, t


def _mismatches(t: dict[str, np.ndarray], reader: str, writer: str, keep: np.ndarray | None = None) -> int:
    differ = t[f"read.{reader}.{writer}"] != t["truth"]                  # (K, N), both from the real tools
    return int(np.count_nonzero(differ if keep is None else differ & keep))


def _overwritten(t: dict[str, np.ndarray], bits: int) -> np.ndarray:
    """(K, N): weights whose zero point AutoGPTQ's bleed overwrote, from the true zeros alone: a field
    above a zero point 0 in the same word (field k of a 32-column block starts in word 3k // 32 ... at
    bit b*k, GPTQ-2.3)."""
    zeros = t["zeros"]
    g, n = zeros.shape
    lost = np.zeros_like(zeros, bool)
    word = np.array([(bits * (c % 32)) // 32 + (c // 32) * bits for c in range(n)])
    for c in range(n):
        lower = [d for d in range(n) if word[d] == word[c] and d < c]
        lost[:, c] = (zeros[:, lower] == 0).any(axis=1) if lower else False
    return lost[t["g_idx"]]


@pytest.mark.parametrize("case_id", ZERO0)
def test_gptqmodel_written_zero0_names_gptqmodel_correct(tmp_path, case_id):
    """GPTQ-4.3: GPTQModel's reader round-trips GPTQModel's v1 zero 0; every other reader is wrong in
    exactly the weights the real AutoGPTQ readers got wrong."""
    path, t = _checkpoint(tmp_path, case_id, "gptqmodel_v1", "gptqmodel_v1")
    table = check_checkpoint(str(path))
    assert table["writer"]["writer"] == "gptqmodel" and table["writer"]["basis"] == "metadata"
    readers = table["readers"]
    assert readers["gptqmodel"]["verdict"] == "correct" and _mismatches(t, "gptqmodel", "gptqmodel_v1") == 0
    for reader in ("autogptq_cuda_old", "autogptq_cuda"):
        assert readers[reader]["verdict"] == "wrong"
        assert readers[reader]["wrong_weights"] == _mismatches(t, reader, "gptqmodel_v1") > 0


@pytest.mark.parametrize("case_id", ZERO0)
def test_autogptq_written_zero0_says_what_the_bleed_destroyed(tmp_path, case_id):
    """GPTQ-4.1: under AutoGPTQ's bleed the overwritten weights are unknowable for every reader; outside
    them each reader is wrong exactly where the real reader differs from the truth."""
    path, t = _checkpoint(tmp_path, case_id, "autogptq", "autogptq")
    table = check_checkpoint(str(path))
    assert table["writer"]["writer"] == "autogptq" and table["writer"]["basis"] == "provenance keys"
    lost = _overwritten(t, MANIFEST[case_id]["bits"])
    assert lost.any()
    for reader in ("autogptq_cuda_old", "autogptq_cuda", "gptqmodel"):
        row = table["readers"][reader]
        assert row["unknowable_weights"] == int(lost.sum())
        assert row["wrong_weights"] == _mismatches(t, reader, "autogptq", ~lost)
    assert "overwritten by the writer" in to_text(table)


def test_unknown_writer_gives_one_verdict_per_plausible_writer(tmp_path):
    """No quantizer named, GPTQModel's bytes: AutoGPTQ's bleed is ruled out by the bytes; GPTQModel and a
    masked writer remain and mean different weights, so each reader is judged against each."""
    path, t = _checkpoint(tmp_path, "b4_asym_g32_k128_n64_z0", "gptqmodel_v1", "none")
    table = check_checkpoint(str(path))
    assert not table["writer"]["known"] and table["writer"]["plausible"] == ["gptqmodel", "masked"]
    by_writer = {v["writer"]: v["readers"] for v in table["verdicts"]}
    assert set(by_writer) == {"gptqmodel", "masked"} and table["readers"] == {}
    assert by_writer["gptqmodel"]["gptqmodel"]["verdict"] == "correct"
    assert by_writer["masked"]["gptqmodel"]["verdict"] == "wrong"
    assert by_writer["masked"]["autogptq_cuda_old"]["verdict"] == "correct"     # (f + 1) & 15 undoes the mask
    text = to_text(table)
    assert "if written by GPTQModel" in text and "if written by a masked writer" in text


def test_named_autogptq_refuted_by_the_bytes_is_unknown(tmp_path):
    """A config with AutoGPTQ's keys over GPTQModel's borrow bytes: the bytes are not AutoGPTQ's, so the
    writer is unknown, saying why."""
    path, _ = _checkpoint(tmp_path, "b4_asym_g32_k128_n64_z0", "gptqmodel_v1", "autogptq")
    claim = check_checkpoint(str(path))["writer"]
    assert not claim["known"] and "not bytes its OR-bleed writes" in claim["detail"]


@pytest.mark.parametrize(("quantizer", "writer"), [
    ("gptqmodel:0.8.5", "autogptq"), ("gptqmodel:0.9.0", "gptqmodel_legacy_int3"),
    ("gptqmodel:6.0.3", "gptqmodel_legacy_int3"), ("gptqmodel:7.0.0", "gptqmodel"), ("gptqmodel:7.7.0", "gptqmodel"),
])
def test_gptqmodel_version_decides_its_convention(quantizer, writer):
    """GPTQ-4.5: GPTQModel before 0.9.0 wrote as AutoGPTQ; 0.9.0 - 6.x used the legacy 3-bit constants."""
    from qformats.formats.gptq.layout import parse_config
    from qformats.formats.gptq.writers import named_writer

    config = parse_config({"bits": 4, "quant_method": "gptq", "meta": {"quantizer": quantizer}})[0]
    assert named_writer(config).writer == writer
