"""Reports (DESIGN.md §6): the JSON contract, JUnit XML that validates, text, and the CLI's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import xmlschema

from conformance import run_kernel
from conformance.report import to_json, to_junit, to_text

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).with_name("junit.xsd")))
CASES = r"gptq_v1/read/b4_(sym|asym)_g32_(trivial|act_order)|gptq_v1/read/b4_asym_g32_zero0_field0"


@pytest.fixture(scope="module")
def mixed():
    """A run with passes, failures and an expected failure (g_idx ignored by the mutant)."""
    return run_kernel("gptq_bugs:g_idx_ignored", fmt="gptq_v1", op="dequantize", pattern=CASES)


def test_json_report_has_the_contract_keys(mixed):
    """DESIGN.md §6: {"subject", "format", "op", "counts": {status: n}, "cases": [{"id", "status", "clauses", "detail"}]}."""
    doc = json.loads(to_json(mixed))
    assert {"subject", "format", "op", "counts", "cases"} <= set(doc)
    assert set(doc["counts"]) == {"pass", "fail", "error", "not-applicable", "expected-failure", "warning"}
    assert all({"id", "status", "clause", "clauses", "detail"} <= set(c) for c in doc["cases"])
    assert all(c["clause"] == c["clauses"][0] for c in doc["cases"])      # the attributed clause first (KC-5)
    assert doc["counts"]["fail"] == 2 and doc["counts"]["pass"] == 3


def test_junit_report_validates_against_the_schema(mixed):
    """--junit writes JUnit XML that the schema accepts, one testcase per case, failures counted."""
    xml = to_junit(mixed)
    SCHEMA.validate(xml)
    assert xml.count("<testcase ") == len(mixed.cases) and 'failures="2"' in xml


def test_the_schema_accepts_pytests_own_junit_output(tmp_path):
    """The schema is not tailored to us: pytest's own --junitxml output (failure, skip, xfail) validates."""
    (tmp_path / "test_x.py").write_text("import pytest\ndef test_ok(): pass\ndef test_bad(): assert 0\n"
                                        "@pytest.mark.skip(reason='r')\ndef test_skip(): pass\n"
                                        "@pytest.mark.xfail\ndef test_xf(): assert 0\n")
    out = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={out}", str(tmp_path)],
                   capture_output=True, cwd=tmp_path)
    SCHEMA.validate(str(out))


def test_schema_rejects_a_testcase_without_a_name():
    """The schema has teeth: a <testcase> must be named."""
    assert not SCHEMA.is_valid('<testsuites><testsuite name="s" tests="1"><testcase/></testsuite></testsuites>')


def test_text_report_names_the_case_the_clause_and_the_mismatch(mixed):
    """A failure names the case, the clause and the first mismatching indices with both values."""
    text = to_text(mixed)
    assert "DOES NOT CONFORM" in text
    line = next(l for l in text.splitlines() if l.strip().startswith("FAIL"))
    assert "gptq_v1/read/b4_" in line and "GPTQ-5.3" in line and "mismatched; first: [" in line and "expected" in line
    assert "clauses exercised" in text


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qformats", "conformance", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_cli_exit_codes_and_junit_file(tmp_path):
    """Exit 0 when every case conforms, 1 when one fails, 2 when the run cannot start; --junit writes the file."""
    ok = _cli("kernel", "conformance.reference:spqr_dequantize", "--format", "spqr", "--junit", str(tmp_path / "j.xml"))
    assert ok.returncode == 0 and "CONFORMS" in ok.stdout
    SCHEMA.validate(str(tmp_path / "j.xml"))
    bad = _cli("kernel", "spqr_bugs:permutation_not_applied", "--format", "spqr", "--json",
               cwd=Path(__file__).parents[1] / "mutants")
    assert bad.returncode == 1 and json.loads(bad.stdout)["counts"]["fail"] > 0
    missing = _cli("kernel", "no_such_module:f", "--format", "spqr")
    assert missing.returncode == 2 and "importable" in missing.stderr and "Traceback" not in missing.stderr


def test_cli_checkpoint_table_for_the_mislabelled_golden_checkpoint():
    """GPTQModel wrote v2 zeros under checkpoint_format "gptq": every reader of qzeros decodes it wrongly,
    Marlin (which ignores qzeros) correctly; exit 1 (invalid)."""
    path = Path(__file__).parents[2] / "fixtures/third_party/gptq/checkpoints/neg_b4_sym_v2_zeros_labelled_gptq"
    done = _cli("checkpoint", str(path), "--json")
    assert done.returncode == 1
    readers = json.loads(done.stdout)["readers"]
    assert readers["marlin"]["verdict"] == "correct"
    assert {name for name, r in readers.items() if r["verdict"] == "wrong"} == set(readers) - {"marlin"}
    assert readers["vllm_gptq_gemm"]["layers_wrong"] == 14


def test_cli_checkpoint_table_for_a_valid_checkpoint():
    """A conforming 4-bit v1 checkpoint (GPTQModel-written) is read correctly by every emulated reader."""
    path = Path(__file__).parents[2] / "fixtures/third_party/gptq/checkpoints/e2e_b4_sym_g32_gptq"
    done = _cli("checkpoint", str(path))
    assert done.returncode == 0
    assert done.stdout.count("correct in all 14 layers") == 8


def test_python_dash_m_qformats_is_the_command():
    """`python -m qformats` works as the `qformats` script does."""
    done = subprocess.run([sys.executable, "-m", "qformats", "schema", "spqr"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)


# -- runs as data (issue #21): what the JSON report records beside the verdicts ------------------------

def test_json_report_records_suite_subject_and_environment(mixed):
    """--json ties the run to the suite version, the pinned case manifest (sha256 of its bytes), the subject's
    module and function, and this interpreter's platform, Python, numpy and torch; arrays went in as NumPy."""
    import hashlib
    import importlib.metadata
    import platform

    import numpy as np

    import qformats
    from conformance.catalog import DIGESTS

    doc = json.loads(to_json(mixed))
    suite, info, env = doc["suite"], doc["subject_info"], doc["environment"]
    assert (suite["version"], suite["spec_version"], suite["cases"]) == (qformats.__version__, qformats.SPEC_VERSION, 5)
    assert suite["manifest_sha256"] == hashlib.sha256(DIGESTS.read_bytes()).hexdigest()
    assert (info["module"], info["function"], info["package"], info["library"]) == ("gptq_bugs", "g_idx_ignored", None, None)
    assert (env["python"], env["numpy"]) == (platform.python_version(), np.__version__)
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    assert env["torch"] == torch and env["device"]["arrays"] == "numpy" and env["device"]["kind"] == "cpu"
    assert set(doc["case_info"]) == {c["id"] for c in doc["cases"]}
    assert "g_idx:act_order" in doc["case_info"]["gptq_v1/read/b4_sym_g32_act_order"]["features"]


def _recorded(entry: str, ids: list[str]):
    """A run of ``entry`` whose cases all passed: what provenance needs (it never calls the subject)."""
    from conformance.runner import CaseResult, RunResult

    return RunResult(subject=entry, format="gptq_v1", op="dequantize",
                     cases=[CaseResult(i, "pass", ("GPTQ-3.2",), "") for i in ids])


def test_cases_digest_names_the_cases_not_the_subject(mixed):
    """cases_sha256 is the same for two subjects run on the same cases, and differs for another set of cases."""
    ids = [c.id for c in mixed.cases]
    runs = (mixed, _recorded("conformance.reference:gptq_dequantize_v1", ids), _recorded("mylib:deq", ids[:1]))
    digest = [json.loads(to_json(r))["suite"]["cases_sha256"] for r in runs]
    assert digest[0] == digest[1] != digest[2]


def test_json_report_names_the_library_an_adapter_judges():
    """Through qformats' gguf-py adapter the judged library is gguf, at its installed version; the subject's own
    package is qformats."""
    import importlib.metadata

    run = _recorded("conformance.adapters.gguf_py:q4_k_dequantize", [])
    info = json.loads(to_json(run))["subject_info"]
    assert info["library"] == {"name": "gguf", "version": importlib.metadata.version("gguf")}
    assert info["package"]["name"] == "qformats" and info["declaration"] is None


def test_cli_kernel_writes_json_with_provenance_and_the_html_page(tmp_path):
    """`conformance kernel ... --json --html FILE`: the JSON carries the provenance, the page names the subject."""
    done = _cli("kernel", "conformance.reference:spqr_dequantize", "--format", "spqr", "--cases", "^spqr/read/csr_0_identity$",
                "--json", "--html", str(tmp_path / "run.html"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["subject_info"]["entry"] == "conformance.reference:spqr_dequantize" and doc["suite"]["cases"] == 1
    html = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "qformats 0.1.0 reference" in html and "spqr · dequantize" in html
