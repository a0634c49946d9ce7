"""`qformats inspect`: fitted rows, no trailing spaces, the g_idx column, every GGUF tensor, clear refusals."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

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
