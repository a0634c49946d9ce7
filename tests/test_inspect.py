"""`qformats inspect`: fitted rows, no trailing spaces, the g_idx column, every GGUF tensor, clear refusals."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from qformats.cli import main
from qformats.inspect import render, rows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_table_fits_its_width_without_trailing_spaces():
    _, table = rows(str(FIXTURES / "checkpoints" / "gptq_v2_asym_3bit_actorder"))
    for width in (100, 80):
        lines = render(table, width)
        assert all(len(line) <= width and line == line.rstrip() for line in lines)
        assert lines[0].split()[:3] == ["layer", "format", "bits"] and "g_idx" in lines[0]
        assert all(line.split()[1] == "gptq_v2" and "act-order" in line for line in lines[1:1 + len(table)])


def test_layer_names_are_never_cut_and_dropped_columns_are_named():
    """At 80 columns the full layer names stay; the columns left out are listed on a last line."""
    _, table = rows(str(FIXTURES / "checkpoints" / "gptq_v2_asym_3bit_actorder"))
    lines = render(table, 80)
    assert [line.split()[0] for line in lines[1:3]] == ["model.layers.0.mlp.down_proj", "model.layers.0.self_attn.q_proj"]
    assert lines[-1] == "(left out to fit 80 columns: zeros say, max|w|, std; --width to widen)"
    assert "zeros say" in render(table, 200)[0] and "…" not in "".join(render(table, 200))


def test_label_column_is_the_zeros_testimony_beside_the_declared_format(tmp_path):
    """The format column is the label (gptq_v1); "zeros say" is the evidence: on a mislabelled checkpoint they differ."""
    _, table = rows(str(FIXTURES / "checkpoints" / "gptq_v2_zeros_labelled_gptq"))
    header, first = render(table, 200)[:2]
    assert "zeros say" in header and "label" not in header
    assert first.split()[1] == "gptq_v1" and first.split()[header.split().index("zeros") + 0] == "v2"


def _gguf_with_q6_k_and_f16(path: Path) -> None:
    """A hand-built GGUF v3: one Q6_K tensor (1 block of 256: 210 bytes) and one F16 (4 x 2)."""
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    q6 = np.zeros(210, np.uint8)                               # d = 0: every weight 0
    f16 = np.arange(8, dtype=np.float16)
    infos = (string("w.q6") + struct.pack("<IQQIQ", 2, 256, 1, 14, 0)
             + string("w.f16") + struct.pack("<IQQIQ", 2, 4, 2, 1, 224))
    head = b"GGUF" + struct.pack("<IQQ", 3, 2, 0) + infos
    head += b"\0" * (-len(head) % 32)
    path.write_bytes(head + q6.tobytes() + b"\0" * 14 + f16.tobytes())


def test_gguf_lists_every_tensor_with_its_type_and_bits(tmp_path, capsys):
    """Not only q4_K: a Q6_K (6.5625 bits per weight) and an F16 tensor, with statistics (gguf-py, plain)."""
    path = tmp_path / "mixed.gguf"
    _gguf_with_q6_k_and_f16(path)
    _, table = rows(str(path))
    by_name = {row["layer"]: row for row in table}
    assert by_name["w.q6"]["format"] == "q6_k" and by_name["w.q6"]["bits_per_weight"] == 6.5625
    assert by_name["w.q6"]["max_abs"] == 0.0
    assert by_name["w.f16"]["format"] == "f16" and by_name["w.f16"]["max_abs"] == 7.0


def test_truncated_file_gets_a_sentence_not_a_blank_table(capsys):
    path = FIXTURES / "containers" / "safetensors" / "truncated_in_data.safetensors"
    assert main(["inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "no layer could be inspected" in out and "st.truncated" in out


def test_wrong_format_is_could_not_run(capsys):
    assert main(["inspect", "--format", "spqr", str(FIXTURES / "checkpoints" / "q4_k.gguf")]) == 2
    assert "'path' must be a GGUF file holding spqr tensors" in capsys.readouterr().err


def _gguf_file(path: Path, kvs: list[bytes], infos: list[bytes], data: bytes) -> str:
    from tests.containers import gguf_builder as gb

    path.write_bytes(gb.gguf(kvs, infos, data))
    return str(path)


def _q4_k_m_labelled(tmp_path: Path) -> str:
    """An F32 [8, 2] (16 elements, 64 bytes) and a q4_K [256, 2] (512 elements, 2 blocks of 144 bytes),
    general.file_type 15 (LLAMA_FTYPE_MOSTLY_Q4_K_M)."""
    from tests.containers import gguf_builder as gb

    return _gguf_file(tmp_path / "labelled.gguf", gb.base_kvs() + [gb.kv_u32("general.file_type", 15)],
                      gb.base_infos(), gb.base_data())


def test_gguf_header_summary_heads_the_table(tmp_path, capsys):
    """GGML-7.1: architecture, file type by llama.cpp's name, tensors, parameters (16 + 512) and bits per
    weight ((64 + 288) bytes x 8 / 528 elements = 5.333)."""
    assert main(["inspect", _q4_k_m_labelled(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "architecture qformats-test, file type MOSTLY_Q4_K_M (15), 2 tensors, 528 parameters, 5.333 bits/weight")


def test_gguf_header_summary_in_json(tmp_path, capsys):
    """GGML-7.1: inspect --json carries the same facts as `header`, bits per weight unrounded to 4 places."""
    assert main(["inspect", "--json", _q4_k_m_labelled(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["header"] == {
        "type": "model", "architecture": "qformats-test", "file_type": 15, "file_type_name": "MOSTLY_Q4_K_M",
        "tensors": 2, "parameters": 528, "bits_per_weight": 5.3333}


def test_file_type_names_are_llama_cpps():
    """GGML-7.1: every llama_ftype name and value as gguf-py's LlamaFileType (which mirrors llama.h) has them."""
    constants = pytest.importorskip("gguf.constants")
    from qformats.gguf_summary import FILE_TYPES, GUESSED, file_type_name

    theirs = {m.value: m.name for m in constants.LlamaFileType if m.name != "GUESSED"}
    assert FILE_TYPES == theirs and constants.LlamaFileType.GUESSED.value == GUESSED
    assert file_type_name(15 | GUESSED) == "MOSTLY_Q4_K_M (guessed)" and file_type_name(4) is None


def _imatrix(tmp_path: Path, *, typed: bool = True) -> str:
    """What llama-imatrix writes (tools/imatrix/imatrix.cpp save_imatrix), one entry: general.type imatrix,
    its metadata, F32 NAME.in_sum2 [8, 1] and NAME.counts [1, 1]."""
    from tests.containers import gguf_builder as gb

    kvs = [gb.kv_u32("imatrix.chunk_count", 1), gb.kv_u32("imatrix.chunk_size", 512)]
    kvs = ([gb.kv_str("general.type", "imatrix")] if typed else []) + kvs
    infos = [gb.tinfo("blk.0.attn_q.weight.in_sum2", [8, 1], gb.T_F32, 0),
             gb.tinfo("blk.0.attn_q.weight.counts", [1, 1], gb.T_F32, 32)]
    return _gguf_file(tmp_path / "imatrix.gguf", kvs, infos, gb.f32_payload(8) + struct.pack("<f", 512.0))


@pytest.mark.parametrize("command", ["validate", "inspect"])
def test_an_importance_matrix_is_not_called_a_model(command, tmp_path, capsys):
    """CKPT-1.4, GGML-7.1: llama-imatrix's output could not run (exit 2), named an importance matrix."""
    path = _imatrix(tmp_path)
    assert main([command, path]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        f"qformats: {path}: 'path' must be a model checkpoint (got an importance matrix, not a model: general.type "
        "'imatrix', 1 entry of NAME.in_sum2 and NAME.counts tensors as llama-imatrix writes them; give it to "
        "llama-quantize --imatrix) [ckpt.no_model, CKPT-1.4]\n")


def test_an_importance_matrix_without_general_type_is_known_by_its_tensor_names(tmp_path, capsys):
    """GGML-7.1: every tensor NAME.in_sum2 / NAME.counts is an importance matrix even without general.type."""
    path = _imatrix(tmp_path, typed=False)
    assert main(["validate", "--json", path]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "ckpt.no_model" and error["message"].startswith(
        "'path' must be a model checkpoint (got an importance matrix, not a model: general.type 'not given', 1 entry")
