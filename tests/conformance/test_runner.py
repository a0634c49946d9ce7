"""The runner (DESIGN.md §6): reference subjects pass every case; misbehaving subjects cost one case each."""

from __future__ import annotations

import json

import pytest

from conformance import SubjectDeclaration, load_declaration, run_kernel, select_cases
from conformance.subject import ExpectedFailure
from qformats.errors import QFormatsError

REFERENCE = [
    ("gptq_dequantize_v1", "gptq_v1", "dequantize"), ("gptq_dequantize_v2", "gptq_v2", "dequantize"),
    ("gptq_matmul_v1", "gptq_v1", "matmul"), ("gptq_matmul_v2", "gptq_v2", "matmul"),
    ("gptq_pack_v1", "gptq_v1", "pack"), ("gptq_pack_v2", "gptq_v2", "pack"),
    ("q4_k_dequantize", "q4_k", "dequantize"), ("q4_k_matmul", "q4_k", "matmul"), ("q4_k_quantize", "q4_k", "quantize"),
    ("spqr_dequantize", "spqr", "dequantize"), ("spqr_matmul", "spqr", "matmul"),
    ("awq_gemm_dequantize", "awq_gemm", "dequantize"), ("awq_gemm_matmul", "awq_gemm", "matmul"),
    ("awq_gemm_pack", "awq_gemm", "pack"), ("ctensors_pack_dequantize", "ctensors_pack", "dequantize"),
    ("ctensors_pack_matmul", "ctensors_pack", "matmul"), ("ctensors_pack_pack", "ctensors_pack", "pack"),
]
V2 = "gptq_v2"
FEW = r"gptq_v2/read/b4_sym_g32_(trivial|act_order)"


@pytest.mark.parametrize(("fn", "fmt", "op"), REFERENCE, ids=[r[0] for r in REFERENCE])
def test_reference_subject_passes_every_case(fn, fmt, op):
    """spec/README.md: our NumPy reference, called through the same door, passes 100 % of its matrix."""
    result = run_kernel(f"conformance.reference:{fn}", fmt=fmt, op=op, jobs=2)
    assert result.cases and result.counts["pass"] == len(result.cases), \
        [(c.id, c.status, c.detail) for c in result.cases if c.status != "pass"][:3]


@pytest.mark.parametrize(("subject", "status", "words"), [
    pytest.param("raises", "error", "raised: RuntimeError: kernel exploded", id="raises"),
    pytest.param("crashes", "error", "crashed", id="crashes"),
    pytest.param("wrong_shape", "error", "returned shape (64, 32), expected (32, 64)", id="wrong-shape"),
    pytest.param("wrong_dtype", "error", "returned dtype int32", id="wrong-dtype"),
    pytest.param("returns_none", "error", "result is builtins.NoneType of dtype object", id="returns-none"),
    pytest.param("returns_object", "error", "of dtype object", id="returns-object"),
    pytest.param("chatty", "pass", "", id="prints-to-stdout"),
    pytest.param("float16_result", "pass", "correctly rounded float16", id="float16-correctly-rounded"),
    pytest.param("bfloat16_truncated", "fail", "mismatched", id="truncated-not-rounded"),
    pytest.param("modifies_inputs", "pass", "", id="writes-its-inputs"),
])
def test_misbehaving_subject_costs_one_case(subject, status, words):
    """A subject that raises, crashes or returns the wrong thing gets status error per case; the run goes on."""
    result = run_kernel(f"hostile_subjects:{subject}", fmt=V2, op="dequantize", pattern=FEW)
    assert [c.status for c in result.cases] == [status, status]
    assert words in result.cases[0].detail


def test_hung_subject_is_killed_and_restarted():
    """A case past its time limit is an error ("hung"); the next case runs in a fresh process."""
    result = run_kernel("hostile_subjects:hangs_once", fmt=V2, op="dequantize", pattern=FEW, timeout=1.0)
    assert [c.status for c in result.cases] == ["error", "pass"]
    assert "no answer within 1 s" in result.cases[0].detail


def test_unimportable_subject_is_could_not_run():
    """A subject that cannot be imported is argument.invalid (exit 2), not 100 errors."""
    with pytest.raises(QFormatsError) as exc:
        run_kernel("hostile_subjects:ANSWER", fmt=V2, op="dequantize")
    assert exc.value.code == "argument.invalid" and "not a callable" in str(exc.value)


def test_undeclared_features_are_not_applicable_never_dropped():
    """DESIGN.md §6: "unsupported cases are reported as not applicable, never silently dropped"."""
    decl = SubjectDeclaration(supports={"bits": ["4"], "g_idx": ["trivial"]})
    result = run_kernel("conformance.reference:gptq_dequantize_v2", fmt=V2, op="dequantize", declaration=decl)
    cases = {c.id: c for c in select_cases(V2, "dequantize")}
    assert len(result.cases) == len(cases)
    applicable = [c for c in result.cases if c.status == "pass"]
    assert applicable and all({"bits:4", "g_idx:trivial"} <= set(cases[c.id].features) for c in applicable)
    assert result.counts["not-applicable"] == len(result.cases) - len(applicable)


def test_expected_failure_needs_a_reason_and_is_reported():
    """An expected failure is reported with its reason; one that passes is a warning to remove it."""
    with pytest.raises(ValueError):
        ExpectedFailure(case="x", reason="  ")
    decl = SubjectDeclaration(expected_failures=[ExpectedFailure(case=r".*act_order", reason="issue #7: g_idx")])
    result = run_kernel("gptq_bugs:g_idx_ignored", fmt="gptq_v1", op="dequantize", declaration=decl,
                        pattern=r"gptq_v1/read/b4_sym_g32_(trivial|act_order)")
    assert [(c.status, c.detail.split(" (")[0]) for c in result.cases] == [("pass", "2048 values, exact float32"),
                                                                           ("expected-failure", "issue #7: g_idx")]
    passing = run_kernel("conformance.reference:gptq_dequantize_v1", fmt="gptq_v1", op="dequantize",
                         declaration=decl, pattern=r"gptq_v1/read/b4_sym_g32_act_order")
    assert passing.cases[0].status == "warning" and "remove the entry" in passing.cases[0].detail


def test_declaration_file_is_strict(tmp_path):
    """Unknown keys and missing reasons in a subject file are refused as argument.invalid."""
    path = tmp_path / "subject.json"
    path.write_text(json.dumps({"supports": {"bits": ["4"]}, "expected_failures": [{"case": "x"}]}))
    with pytest.raises(QFormatsError) as exc:
        load_declaration(path)
    assert exc.value.code == "argument.invalid"
    path.write_text(json.dumps({"supports": {"bits": ["4"]}, "v1_zero_fields": "wrap"}))
    assert load_declaration(path).v1_zero_fields == "wrap"


def test_declared_v1_zero_field_outcome_narrows_the_named_readings():
    """spec/kernels.md KC-4.5: without a declaration either named reading passes; "wrap" holds a subject to
    the field-local wrap, "reject" to rejection (the borrow decoder fails both where the readings differ)."""
    pattern = r"gptq_v1/read/b2_asym_g32_zero0_field0"
    free = run_kernel("reading_subjects:v1_word_borrow", fmt="gptq_v1", op="dequantize", pattern=pattern)
    assert [c.status for c in free.cases] == ["pass"] and free.cases[0].readings == ("gptqmodel_word_borrow",)
    for held in ("wrap", "reject"):
        result = run_kernel("reading_subjects:v1_word_borrow", fmt="gptq_v1", op="dequantize", pattern=pattern,
                            declaration=SubjectDeclaration(v1_zero_fields=held))
        assert [(c.status, c.clause) for c in result.cases] == [("fail", "GPTQ-3.4")], held


def test_bad_arguments_are_argument_invalid():
    for kwargs in ({"fmt": "gptq_v3", "op": "dequantize"}, {"fmt": "spqr", "op": "pack"},
                   {"fmt": "spqr", "op": "dequantize", "jobs": 0}, {"fmt": "spqr", "op": "dequantize", "device": "tpu"}):
        with pytest.raises(QFormatsError) as exc:
            run_kernel("conformance.reference:spqr_dequantize", **kwargs)
        assert exc.value.code == "argument.invalid"
