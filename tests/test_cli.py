"""The `qformats` command line (DESIGN.md §4): exit codes and the schema command."""

import json
import subprocess
import sys

from qformats.cli import main


def test_schema_command_prints_the_gptq_schema(capsys):
    """`qformats schema gptq` prints the JSON Schema generated from the GPTQ models."""
    assert main(["schema", "gptq"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "GPTQConfig" in doc["$defs"]


def test_unknown_format_is_exit_2_without_traceback(capsys):
    """Exit 2: could not run (bad usage), with a one-line message and no traceback."""
    assert main(["schema", "awq"]) == 2
    err = capsys.readouterr().err
    assert "'format' must be one of" in err and "Traceback" not in err


def test_bad_usage_is_exit_2():
    """argparse usage errors exit 2, as the CLI contract requires."""
    result = subprocess.run([sys.executable, "-m", "qformats.cli", "frobnicate"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_strict_verdict_and_exit_code_agree(tmp_path, capsys):
    """--strict with warnings: the text says INVALID (strict: ...), --json says "invalid", exit 1."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/gptq_v1_sym_4bit/model.safetensors"
    shutil.copy(src, tmp_path / "model.safetensors")             # no config beside it: a warning
    assert main(["validate", "--strict", str(tmp_path / "model.safetensors")]) == 1
    assert "INVALID (strict: 1 warning)" in capsys.readouterr().out
    assert main(["validate", "--strict", "--json", str(tmp_path / "model.safetensors")]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "invalid" and doc["summary"]["strict"] is True


def test_version():
    done = subprocess.run([sys.executable, "-m", "qformats", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "qformats 0.1.0"


def test_schema_without_argument_is_one_json_document(capsys):
    """`qformats schema` prints one object keyed by format, valid JSON as a whole."""
    assert main(["schema"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"gptq", "q4_k", "spqr", "gguf"}


def test_broken_pipe_is_not_an_internal_error():
    """`qformats schema | head -1`: the reader leaving early ends the command quietly, exit 0."""
    done = subprocess.run(f"{sys.executable} -m qformats schema | head -1", shell=True, capture_output=True,
                          text=True)
    assert done.stdout.strip() == "{" and "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_decode_into_an_existing_directory_is_a_usage_error(tmp_path, capsys):
    from pathlib import Path

    ckpt = Path(__file__).resolve().parents[1] / "fixtures/checkpoints/gptq_v1_sym_4bit"
    assert main(["decode", str(ckpt), "--tensor", "model.layers.0.mlp.down_proj", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not an existing directory" in err and "internal error" not in err


def test_help_does_not_cite_documents_users_do_not_have():
    done = subprocess.run([sys.executable, "-m", "qformats", "validate", "--help"], capture_output=True, text=True)
    assert "DESIGN" not in done.stdout


def test_messages_read_as_sentences(tmp_path, capsys):
    """No pydantic text, no "value must", no "1 files"; a parent of checkpoints names them."""
    import shutil
    from pathlib import Path

    from qformats.formats.gptq.layout import parse_config

    import pytest

    from qformats.errors import QFormatsError
    with pytest.raises(QFormatsError) as exc:
        parse_config({"bits": 4, "quant_method": "awq2"})
    assert str(exc.value).startswith("'quant_method' must be 'gptq' (got awq2)")
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert "'path' must be an existing file or directory" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("x")
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures/checkpoints/spqr_csr", tmp_path / "run1")
    assert main(["validate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "got 1 file, none of them weights; checkpoints in subfolders, pass one: run1" in err
    assert "value must" not in err
