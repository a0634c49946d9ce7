"""`validate --json` and `inspect --json`: one schema (spec/schemas/report.json) for every format and outcome.

DESIGN.md §4: `{"path", "verdict", "format", "findings", "layers", "summary"}`; `inspect --json` adds the table's
`rows` and a GGUF file's `header`; a command that could not run (exit 2) still prints one object, so that
scripts parse every outcome.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from qformats.cli import main
from qformats.schema import schema_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUBJECTS = [pytest.param(FIXTURES / "checkpoints" / name, id=fmt) for name, fmt in (
    ("gptq_v1_sym_4bit", "gptq"), ("awq_gemm", "awq"), ("ctensors_w4_asym", "ctensors"), ("spqr_csr", "spqr"),
    ("q4_k_m.gguf", "gguf"), (Path("..") / "containers" / "safetensors" / "truncated_in_data.safetensors",
                              "malformed"))]


def _run(capsys, *argv) -> tuple[int, dict]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    doc = schema_for("report")
    return jsonschema.Draft202012Validator({"$defs": doc["$defs"], "$ref": f"#/$defs/{definition}"})


@pytest.mark.parametrize("path", SUBJECTS)
def test_validate_and_inspect_json_follow_the_one_schema(path, capsys):
    """DESIGN.md §4: both documents validate against spec/schemas/report.json, inspect's keys are validate's
    plus rows and header, and the summary keys are the same."""
    code, validated = _run(capsys, "validate", "--json", str(path))
    _validator("ValidateReport").validate(validated)
    inspect_code, inspected = _run(capsys, "inspect", "--json", str(path))
    _validator("InspectReport").validate(inspected)
    assert code == inspect_code == (0 if validated["verdict"] == "valid" else 1)
    assert set(inspected) == set(validated) | {"rows", "header"}
    assert set(inspected["summary"]) == set(validated["summary"])


def test_every_format_has_the_same_summary_keys(capsys):
    """DESIGN.md §4: one summary shape for GPTQ, AWQ, compressed-tensors, SpQR and GGUF."""
    keys = {}
    for param in SUBJECTS:
        keys[param.id] = set(_run(capsys, "validate", "--json", str(param.values[0]))[1]["summary"])
    assert {fmt: sorted(k ^ keys["gptq"]) for fmt, k in keys.items()} == dict.fromkeys(keys, [])


@pytest.mark.parametrize("command", ["validate", "inspect"])
def test_a_missing_path_still_prints_one_json_object(command, tmp_path, capsys):
    """CKPT-1.1: exit 2, and --json prints the could-not-run object on stdout (the one line stays on stderr)."""
    missing = str(tmp_path / "nothing-here")
    code = main([command, "--json", missing])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    _validator("CouldNotRun").validate(doc)
    assert code == 2 and doc == {"path": missing, "verdict": "could-not-run", "error": {
        "code": "ckpt.path.missing", "clause": "CKPT-1.1", "tensor": "path", "file": missing,
        "message": f"'path' must be an existing file or directory (got {missing})"}}
    assert err == f"qformats: {missing}: {doc['error']['message']} [ckpt.path.missing, CKPT-1.1]\n"


def test_an_internal_error_is_a_could_not_run_object_too(monkeypatch, capsys):
    """DESIGN.md §4 exit 2 (internal error): code and clause null, the exception named in the message."""
    import qformats.validate

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")
    monkeypatch.setattr(qformats.validate, "validate", broken)
    path = str(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")
    assert main(["validate", "--json", path]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out) == {"path": path, "verdict": "could-not-run", "error": {
        "code": None, "clause": None, "tensor": None, "file": None, "message": "internal error: RuntimeError: a bug"}}
    assert err == "qformats: internal error: RuntimeError: a bug\n"


def test_without_json_could_not_run_prints_nothing_on_stdout(tmp_path, capsys):
    """DESIGN.md §4: results on stdout only with --json; the text mode keeps its one line on stderr."""
    assert main(["validate", str(tmp_path / "nothing-here")]) == 2
    assert capsys.readouterr().out == ""
