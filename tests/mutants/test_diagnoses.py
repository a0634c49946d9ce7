"""The runner names the misreading a mutant's bug is, and only that one (spec/kernels.md KC-5.1 to KC-5.5).

Each mutant in ``catalogue.DIAGNOSED`` was written by hand from the bug it imitates, apart from the
diagnoses' rewrites (conformance/diagnoses.py); the runner recomputes each candidate misreading with the
reference codecs and must name the mutant's own, on every failing case, or none where none fits.
"""

from __future__ import annotations

import pytest

from catalogue import DIAGNOSED, MUTANTS
from conformance import run_kernel
from conformance.report import diagnosis_line

FORMATS = {m[0]: m[1] for m in MUTANTS}


@pytest.mark.parametrize("entry", sorted(DIAGNOSED), ids=sorted(DIAGNOSED))
def test_runner_names_exactly_the_mutants_misreading(entry):
    """KC-5.5: every failing case names the mutant's misreading (or none), and so does the run's diagnosis line."""
    expected, pattern = DIAGNOSED[entry]
    result = run_kernel(entry, fmt=FORMATS[entry], op="dequantize", pattern=pattern)
    failing = [c for c in result.cases if c.status in ("fail", "error")]
    assert failing, "the mutant must fail on the cases of its pattern"
    assert {c.misreading for c in failing} == {expected}, sorted({(c.id, c.misreading) for c in failing})[:4]
    line = diagnosis_line(result.diagnosis())
    if expected is None:
        assert line == f"diagnosis (KC-5.5): no known misreading explains the {len(failing)} failing cases"
    else:
        clause = result.diagnosis()["explained"][0]["clause"]
        assert line == f"diagnosis (KC-5.5): {expected} ({clause}) explains {len(failing)} of {len(failing)} failing cases"
        assert all(f"({clause})" in c.detail for c in failing)


def test_a_conforming_subject_gets_no_diagnosis():
    """KC-5.5: with no failing case the run names no misreading and prints no diagnosis line."""
    result = run_kernel("conformance.reference:q4_k_dequantize", fmt="q4_k", op="dequantize", pattern=r"random_bits_[01]")
    assert result.conforms and result.diagnosis() == {"failing": 0, "explained": [], "unexplained": 0}
    assert diagnosis_line(result.diagnosis()) is None


def _case(cid: str, status: str, *names: str, clause: str = "GPTQ-3.2"):
    from conformance.runner import CaseResult

    return CaseResult(cid, status, (clause,), "", clause=clause, misreading=names[0] if names else None,
                      misreadings=names)


def test_diagnosis_names_a_misreading_only_for_the_failures_it_explains():
    """KC-5.5: one failing case explained, one not: the line counts each; passes and expected failures count for
    nothing, and a case two misreadings explain counts for the one that explains more of the run."""
    from conformance.diagnoses import NAMES
    from conformance.runner import diagnosis

    fields, halves = NAMES["KC-5.1"], NAMES["KC-5.2"]
    cases = [_case("a", "fail", halves, fields, clause="KC-5.2"), _case("b", "fail", fields, clause="KC-5.1"),
             _case("c", "fail"), _case("d", "pass"), _case("e", "expected-failure", halves)]
    found = diagnosis(cases)
    assert found == {"failing": 3, "explained": [{"misreading": fields, "clause": "KC-5.1", "cases": 2}], "unexplained": 1}
    assert diagnosis_line(found) == (f"diagnosis (KC-5.5): {fields} (KC-5.1) explains 2 of 3 failing cases; "
                                     "no known misreading explains the other 1")
    assert diagnosis_line(diagnosis([_case("c", "fail")])) == "diagnosis (KC-5.5): no known misreading explains it"
    assert diagnosis([_case("r", "error")])["failing"] == 0          # raised: no values to diagnose
