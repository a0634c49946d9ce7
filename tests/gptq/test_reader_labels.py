"""How each emulated reader treats the checkpoint_format label and what it cannot read (GPTQ-4.2).

AutoGPTQ 0.7.1 never reads checkpoint_format (its BaseQuantizeConfig.from_pretrained keeps only its
dataclass fields, auto_gptq/modeling/_base.py at tag v0.7.1), so v2 zeros labelled gptq_v2 are read
with its v1 rule; Marlin is selected only for symmetric checkpoints (vLLM gptq_marlin, sym required).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from conformance.checkpoint import check_checkpoint, to_text
from qformats.formats import gptq
from qformats.formats.gptq.quirks import READERS

AUTOGPTQ = ("autogptq_cuda_old", "autogptq_cuda", "autogptq_cuda_kernel", "exllama")


def _layer(zeros: np.ndarray, version: str = "v2") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 16, (128, zeros.shape[1]))
    return dict(gptq.pack(codes, zeros, np.full(zeros.shape, 0.5, np.float16), bits=4, version=version).tensors)


@pytest.mark.parametrize("reader", AUTOGPTQ)
def test_autogptq_readers_ignore_the_v2_label(reader):
    """Told v2, an AutoGPTQ 0.7.1 reader applies its v1 rule: every zero point one too high."""
    qzeros = gptq.pack(np.zeros((32, 8), np.int64), np.full((1, 8), 5), np.ones((1, 8), np.float16), bits=4,
                       version="v2").qzeros
    assert READERS[reader].effective_zeros(qzeros, 4, 8, "v2").tolist() == [[6] * 8]


def _checkpoint(tmp: Path, layer: dict[str, np.ndarray], **config) -> Path:
    save_file({f"model.layers.0.mlp.up_proj.{k}": v for k, v in layer.items()}, str(tmp / "model.safetensors"))
    (tmp / "quantize_config.json").write_text(json.dumps({"bits": 4, "group_size": 32, "quant_method": "gptq",
                                                          "desc_act": False, **config}))
    return tmp


def test_v2_checkpoint_labelled_v2_is_read_wrongly_by_autogptq(tmp_path):
    """A conforming gptq_v2 checkpoint: vLLM and GPTQModel correct, AutoGPTQ's readers wrong everywhere
    (they read it, as v1), never "cannot read it"."""
    zeros = np.random.default_rng(2).integers(1, 16, (4, 64))
    table = check_checkpoint(str(_checkpoint(tmp_path, _layer(zeros), checkpoint_format="gptq_v2", sym=False)))
    readers = table["readers"]
    assert readers["vllm_gptq_gemm"]["verdict"] == readers["gptqmodel"]["verdict"] == "correct"
    for reader in AUTOGPTQ:
        assert (readers[reader]["verdict"], readers[reader]["wrong_weights"]) == ("wrong", 128 * 64), reader


def test_marlin_cannot_read_an_asymmetric_checkpoint(tmp_path):
    """sym: false: Marlin is "cannot read it (asymmetric ...)", not wrong in thousands of weights."""
    zeros = np.random.default_rng(3).integers(1, 16, (4, 64))
    table = check_checkpoint(str(_checkpoint(tmp_path, _layer(zeros), checkpoint_format="gptq_v2", sym=False)))
    marlin = table["readers"]["marlin"]
    assert (marlin["verdict"], marlin["unreadable_because"]) == ("cannot read",
                                                                 "asymmetric: it reads symmetric layers only")
    assert "marlin" in to_text(table) and "cannot read it (asymmetric: it reads symmetric layers only)" in to_text(table)


def test_cannot_read_is_a_sentence_not_a_fragment():
    """The reason names the width the reader reads, never "one of [...] for reader '...' (...)"."""
    assert READERS["exllama"].why_not(3, "v1") == "3-bit: it reads 4-bit layers only"
    assert READERS["marlin"].why_not(2, "v2") == "2-bit: it reads 4 and 8-bit layers only"
    assert READERS["marlin"].why_not(4, "v1", sym=None) is None
    assert all(READERS[r].why_not(4, "v2") is None for r in AUTOGPTQ)


def test_malformed_layer_is_not_judged_and_never_crashes(tmp_path):
    """g_idx out of range and scales of the wrong shape (which crashed the table): every reader
    "not judged", naming the constraint; the validator's findings stay the verdict."""
    layer = _layer(np.full((4, 64), 8), version="v1")
    layer["g_idx"] = layer["g_idx"].copy()
    layer["g_idx"][5] = 99
    (tmp_path / "a").mkdir()
    table = check_checkpoint(str(_checkpoint(tmp_path / "a", layer)))
    assert table["verdict"] == "invalid"
    assert {r["verdict"] for r in table["readers"].values()} == {"not judged"}
    assert "[gptq.g_idx.range]" in table["readers"]["gptqmodel"]["not_judged_because"]
    layer = _layer(np.full((4, 64), 8), version="v1")
    layer["scales"] = layer["scales"][:, :32]
    (tmp_path / "b").mkdir()
    table = check_checkpoint(str(_checkpoint(tmp_path / "b", layer)))
    assert "[tensor.shape]" in table["readers"]["marlin"]["not_judged_because"]
    assert "every reader: not judged" in to_text(table)


def test_gguf_style_rows_use_tensors_and_every_status():
    """Rows of another format (GGUF tensors): statuses not judged, cannot read, unknowable, correct and
    wrong are each summarised and said; the unit is "tensors", not GPTQ layers."""
    from conformance.checkpoint import _verdicts

    rows = [{"layer": "blk.0.attn_q.weight", "judged_against": "the reference decode", "readers": {
                "a": {"status": "correct"}, "b": {"status": "wrong", "wrong_weights": 3},
                "c": {"status": "cannot read", "detail": "type q1_0 unknown to it"},
                "d": {"status": "unknowable"}, "e": {"status": "not judged", "detail": "not installed"}}},
            {"layer": "blk.0.attn_k.weight", "judged_against": "the reference decode", "readers": {
                "a": {"status": "correct"}, "b": {"status": "correct"}, "c": {"status": "correct"},
                "d": {"status": "correct"}, "e": {"status": "not judged", "detail": "not installed"}}}]
    verdicts = _verdicts(rows, {name: name for name in "abcde"}, None)
    table = {"path": "m.gguf", "verdict": "valid", "format": "q4_k", "scope": "2 of 2 tensors checked", "errors": 0,
             "warnings": 1, "unit": "tensor",
             "writer": None, "verdicts": verdicts, "readers": verdicts[0]["readers"], "layers": rows}
    assert {k: v["verdict"] for k, v in table["readers"].items()} == {
        "a": "correct", "b": "wrong", "c": "cannot read", "d": "unknowable", "e": "not judged"}
    text = to_text(table)
    assert "(q4_k, 2 of 2 tensors checked, 0 errors, 1 warning;" in text and "judged against the reference decode" in text
    assert "real readers on 2 tensors:" in text and "GPTQ" not in text
    assert "  a  correct in all 2 tensors" in text
    assert "  b  wrong in 3 weights of 1 tensor (worst 3 in blk.0.attn_q.weight); correct in 1 tensor" in text
    assert "  c  cannot read it (type q1_0 unknown to it); correct in 1 tensor" in text
    assert "  d  unknowable in 1 tensor; correct in 1 tensor" in text
    assert "  e  not judged (not installed)" in text


def test_checkpoint_text_says_the_precision_a_16_bit_reader_was_judged_at():
    """judge_readers holds a path whose weights are float16 to the reference rounded once to float16; the
    line says so, for correct and wrong alike, and a float32 reader's line says nothing of it."""
    from conformance.checkpoint import _verdicts

    rows = [{"layer": "model.q_proj", "readers": {
                "f16": {"status": "correct", "judged_at": "float16"},
                "bf16": {"status": "wrong", "wrong_weights": 2, "judged_at": "bfloat16"},
                "f32": {"status": "correct", "judged_at": "float32"}}},
            {"layer": "model.k_proj", "readers": {
                "f16": {"status": "correct", "judged_at": "float16"},
                "bf16": {"status": "correct", "judged_at": "bfloat16"},
                "f32": {"status": "correct", "judged_at": "float32"}}}]
    verdicts = _verdicts(rows, {name: name for name in ("f16", "bf16", "f32")}, None)
    table = {"path": "ckpt", "verdict": "valid", "format": "awq", "errors": 0, "warnings": 0, "unit": "layer",
             "writer": None, "verdicts": verdicts, "readers": verdicts[0]["readers"], "layers": rows}
    text = to_text(table)
    assert "  f16   correct in all 2 layers (judged at float16, its weight precision)" in text
    assert ("  bf16  wrong in 2 weights of 1 layer (worst 2 in model.q_proj); correct in 1 layer "
            "(judged at bfloat16, its weight precision)") in text
    assert "  f32   correct in all 2 layers\n" in text + "\n"
