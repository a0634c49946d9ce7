"""Conformance levels, named readings and failure attribution (spec/kernels.md KC-4, KC-5; issue 21).

The decoders of reading_subjects.py are written from spec/ alone: one follows the field-local wrap of v1
all-ones zero fields, one GPTQModel's word borrow, one reads them as 2^b, one q4_K decoder raises on
non-finite scales. None has a subject file.
"""

from __future__ import annotations

import json
import re

import pytest

from conformance import SubjectDeclaration, run_kernel
from conformance.catalog import pinned_digests
from conformance.report import to_json, to_text
from conformance.runner import judge_case, select_cases
from conformance.subject import Answer
from conformance.worker import load_entry
from qformats.formats.registry import subject_format

# the v1 all-ones cases (8 generated, 4 written by AutoGPTQ and GPTQModel), the non-conforming layers, and
# two conforming layers: enough to judge a reading and a level without the whole matrix
V1 = r"gptq_v1/read/(b4_sym_g32_trivial|b3_asym_short_act_order|.*zero0_field\d+|third_party/.*_z0|invalid/.*)"
GPTQ_RULES = ["GPTQ-2.2", "GPTQ-3.4", "GPTQ-3.5", "GPTQ-5.1", "GPTQ-5.2", "QF-2.2", "QF-3.1"]


def _run(entry, fmt="gptq_v1", pattern=V1, **kwargs):
    return run_kernel(entry, fmt=fmt, op="dequantize", pattern=pattern, jobs=1, **kwargs)


@pytest.fixture(scope="module")
def wrap():
    """The field-local wrap decoder (no input checks) at the decoder level: one run shared by the tests."""
    return _run("reading_subjects:v1_field_local_wrap")


class _InProcess:
    """A subject called in this process, answering as the worker would (attribution tests: no spawn)."""

    def __init__(self, entry: str) -> None:
        self.fn = load_entry(entry)

    def call(self, arrays, scalars) -> Answer:
        try:
            out = self.fn(**arrays, **scalars)
        except Exception as exc:  # noqa: BLE001 - the subject's answer
            return Answer("raised", message=f"{type(exc).__name__}: {exc}")
        return Answer("ok", arrays={"result": out}, dtypes={"result": out.dtype.name})


@pytest.mark.parametrize(("entry", "reading"), [("reading_subjects:v1_field_local_wrap", "field_local_wrap"),
                                                ("reading_subjects:v1_word_borrow", "gptqmodel_word_borrow")])
def test_v1_decoder_following_a_named_reading_conforms_at_decoder_level(entry, reading, wrap):
    """KC-4.1, KC-4.5: no subject file, CONFORMS at the decoder level, the report names the reading."""
    result = wrap if reading == "field_local_wrap" else _run(entry)
    level = result.level()
    assert result.conforms and level["claimed"] == "decoder" and level["reached"] == "decoder"
    assert level["readings"] == {"v1_zero_fields": reading}
    assert f"reading of v1_zero_fields: {reading}" in to_text(result)


def test_the_two_v1_readings_differ_on_five_of_the_twelve_cases(wrap):
    """GPTQ-4.1: the borrow reading is right where the carry has nowhere to go; the wrap elsewhere."""
    ones = [c for c in wrap.cases if c.feature == "v1_zero_fields"]
    both = [c.id for c in ones if set(c.readings) == {"field_local_wrap", "gptqmodel_word_borrow"}]
    assert len(ones) == 12 and len(both) == 7


def test_v1_decoder_reading_all_ones_as_2_to_the_b_does_not_conform():
    """KC-4.4: any other output fails, saying what the subject did, cited to GPTQ-3.4."""
    result = _run("reading_subjects:v1_all_ones_as_2_to_the_bits")
    case = next(c for c in result.cases if c.id == "gptq_v1/read/b4_asym_g32_zero0_field0")
    assert not result.conforms and result.level()["reached"] == "none"
    assert case.status == "fail" and case.clause == "GPTQ-3.4"
    assert "decoded zero point 0 as 16: the f + 1 without wrap reading" in case.detail
    assert case.as_json()["reading"] == {"feature": "v1_zero_fields", "matched": [], "misreading":
                                         "the f + 1 without wrap reading (AutoGPTQ qlinear_cuda, vLLM gptq_gemm)"}


def test_level_report_names_the_misreading_a_subject_follows():
    """KC-4.5, KC-5: an answer matching no named reading is not left at "none of the named readings": the
    report says which known misreading it reproduced, and on how many of the feature's cases."""
    result = _run("reading_subjects:v1_all_ones_as_2_to_the_bits")
    assert result.level()["readings"]["v1_zero_fields"] == (
        "none of the named readings; the f + 1 without wrap reading (AutoGPTQ qlinear_cuda, vLLM gptq_gemm) "
        "on 12 of 12")


def test_q4_k_decoder_raising_on_nonfinite_scales_conforms():
    """KC-4.5: rejecting inf/NaN d is one of the two allowed outcomes (Q4K-3.3); the reading is 'reject'."""
    result = _run("reading_subjects:q4_k_rejecting_nonfinite", fmt="q4_k", pattern=r"q4_k/read/")
    level = result.level()
    assert result.conforms and level["reached"] == "decoder" and level["readings"] == {"nonfinite_scales": "reject"}
    assert level["unenforced"] == ["Q4K-5.2", "Q4K-5.3"]


def test_decoder_without_input_checks_conforms_only_at_decoder_level(wrap):
    """KC-4.1, KC-4.2: the same decoder conforms as a decoder, naming the rules it does not enforce, and
    fails when it claims the validating level, each failure citing its rule."""
    decoder = wrap
    assert decoder.conforms and decoder.level()["unenforced"] == GPTQ_RULES
    assert "a decoder-level pass says nothing about validation" in to_text(decoder)
    invalid = [c for c in decoder.cases if "/invalid/" in c.id]
    assert invalid and {c.status for c in invalid} <= {"not-applicable", "pass"}
    validating = _run("reading_subjects:v1_field_local_wrap", declaration=SubjectDeclaration(level="validating"))
    assert not validating.conforms and validating.level()["reached"] == "decoder"
    failed = {c.id: c for c in validating.cases if c.status == "fail"}
    assert failed["gptq_v1/read/invalid/b4_asym_g32_g_idx_negative"].clause == "GPTQ-5.1"
    assert failed["gptq_v1/read/b4_asym_g32_zero0_field0"].clause == "GPTQ-3.4"
    assert {c.clause for c in failed.values()} == set(GPTQ_RULES)


@pytest.mark.parametrize(("fn", "fmt"), [("conformance.reference:gptq_dequantize_v1", "gptq_v1"),
                                         ("conformance.reference:spqr_dequantize", "spqr"),
                                         ("conformance.reference:awq_gemm_dequantize", "awq_gemm"),
                                         ("conformance.reference:ctensors_pack_dequantize",
                                          "ctensors_pack")])
def test_reference_is_a_validating_decoder(fn, fmt):
    """KC-4.2: the reference rejects every non-conforming input the suite holds."""
    result = run_kernel(fn, fmt=fmt, op="dequantize", pattern=r"/(invalid|read/third)/|zero0|nonfinite",
                        declaration=SubjectDeclaration(level="validating"), jobs=1)
    level = result.level()
    assert result.conforms and level["reached"] == "validating" and level["unenforced"] == [] and level["validation_cases"] > 2


def test_json_carries_the_level_and_an_attributed_clause_per_case(wrap):
    """KC-4.4: ``level`` with claimed, reached, readings, unenforced; each case ``clause`` then ``clauses``."""
    doc = json.loads(to_json(wrap))
    assert doc["level"] == {"claimed": "decoder", "reached": "decoder", "readings": {"v1_zero_fields": "field_local_wrap"},
                            "unenforced": GPTQ_RULES, "zeros": "signed", "validation_cases": 21}
    for case in doc["cases"]:
        assert case["clause"] == case["clauses"][0]
    field0 = next(c for c in doc["cases"] if c["id"] == "gptq_v1/read/b4_asym_g32_zero0_field0")
    assert field0["reading"] == {"feature": "v1_zero_fields", "matched": ["field_local_wrap"]}


def test_numeric_zeros_are_a_lower_level():
    """KC-4.3: +0 == -0 declared passes the signed-zero cases and reaches 'numeric', never 'decoder'."""
    result = run_kernel("gptq_bugs:v2_positive_zeros", fmt="gptq_v2", op="dequantize", pattern=r"signed_zeros",
                        declaration=SubjectDeclaration(zeros="numeric"), jobs=1)
    assert result.conforms and result.level()["reached"] == "numeric" and result.level()["claimed"] == "numeric"


@pytest.mark.parametrize(("entry", "fmt", "case_id", "clause"), [
    ("gptq_bugs:v1_without_plus_one", "gptq_v1", "gptq_v1/read/b4_sym_g32_act_order", "GPTQ-3.3"),
    ("gptq_bugs:g_idx_ignored", "gptq_v1", "gptq_v1/read/b4_sym_g32_act_order", "GPTQ-5.3"),
    ("gptq_bugs:v2_positive_zeros", "gptq_v2", "gptq_v2/read/b4_asym_g32_signed_zeros_negative_scales", "KC-2.4"),
    ("spqr_bugs:permutation_not_applied", "spqr", "spqr/read/csr_1pct_act_order", "SPQR-5.3"),
    ("spqr_bugs:outliers_substituted", "spqr", "spqr/read/csr_1pct_identity", "SPQR-5.2"),
    ("q4k_bugs:plus_min", "q4_k", "q4_k/read/random_bits_0", "Q4K-3.1"),
    ("q4k_bugs:nibbles_as_consecutive_pairs", "q4_k", "q4_k/read/random_bits_0", "Q4K-1.5"),
], ids=lambda v: v if isinstance(v, str) and ":" in v else None)
def test_failure_names_the_clause_its_mismatch_violates_first(entry, fmt, case_id, clause):
    """KC-5: a permutation bug cites SPQR-5.3, v1 read as v2 cites GPTQ-3.3 (not GPTQ-3.4), ..."""
    (chosen,) = select_cases(fmt, "dequantize", f"^{re.escape(case_id)}$")
    case = judge_case(chosen, "dequantize", subject_format(fmt), SubjectDeclaration(), _InProcess(entry), pinned_digests())
    assert case.status == "fail" and case.clause == clause and case.attributed[0] == clause
