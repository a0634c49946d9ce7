"""spec/schemas/ is generated from the pydantic models and must not drift (spec/README.md)."""

import json
from pathlib import Path

import jsonschema
import pytest

from qformats import schema

SCHEMAS = Path(__file__).resolve().parents[1] / "spec" / "schemas"
GOLDEN_GPTQ = Path(__file__).resolve().parents[1] / "fixtures" / "third_party" / "gptq" / "checkpoints"


@pytest.mark.parametrize("name", schema.available_formats())
def test_committed_schema_equals_generated(name):
    """A test fails when the committed schema differs from what the models generate."""
    committed = SCHEMAS / f"{name}.json"
    assert committed.exists(), f"run `python -m qformats.schema` to create {committed}"
    assert committed.read_text() == schema.schema_text(name)


@pytest.mark.parametrize("name", schema.available_formats())
def test_schema_is_valid_json_schema(name):
    """Each published schema is itself a valid draft 2020-12 document."""
    jsonschema.Draft202012Validator.check_schema(schema.schema_for(name))


def test_real_gptq_config_validates_against_the_schema():
    """GPTQ-6: the config GPTQModel 7.7.0 wrote validates against the published GPTQConfig schema."""
    doc = schema.schema_for("gptq")
    config = json.loads((GOLDEN_GPTQ / "e2e_b4_sym_g32_gptq" / "quantize_config.json").read_text())
    validator = jsonschema.Draft202012Validator({**doc, "$ref": "#/$defs/GPTQConfig"})
    validator.validate(config)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**config, "bits": 5})


@pytest.mark.parametrize("name", sorted(schema.DOCUMENTS))
def test_committed_document_schema_equals_generated(name):
    """spec/schemas/report.json (the CLI's --json documents) equals what qformats/documents.py generates."""
    committed = SCHEMAS / f"{name}.json"
    assert committed.exists(), f"run `python -m qformats.schema` to create {committed}"
    assert committed.read_text() == schema.schema_text(name)
    jsonschema.Draft202012Validator.check_schema(schema.schema_for(name))


def test_report_schema_is_printed_by_the_schema_command(capsys):
    """`qformats schema report` prints the documents' schema; `qformats schema` alone stays the formats."""
    from qformats.cli import main

    assert main(["schema", "report"]) == 0
    assert set(json.loads(capsys.readouterr().out)["$defs"]) >= {"ValidateReport", "InspectReport", "CouldNotRun"}
