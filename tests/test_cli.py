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
