"""Status and detail of one answer (the rules of conformance/compare.py applied to a case's expectation)."""

from __future__ import annotations

import numpy as np

from qformats.cases import Case
from qformats.formats.registry import Face

from . import compare
from .subject import Answer, SubjectDeclaration

__all__ = ["judge", "describe"]

VERBS = {"raised": "raised", "hung": "hung", "crashed": "crashed", "bad_result": "returned an unusable result",
         "load_error": "could not be loaded"}


def describe(answer: Answer) -> str:
    return f"the subject {VERBS.get(answer.status, answer.status)}: {answer.message}"


def _array(answer: Answer, shape: tuple[int, ...]) -> tuple[np.ndarray | None, str, str]:
    """(result, its dtype name, problem): the one array a kernel returns, of the expected shape."""
    if answer.kind != "array" or "result" not in answer.arrays:
        return None, "", f"returned a {answer.kind}, not an array"
    arr, dtype = answer.arrays["result"], answer.dtypes.get("result", "")
    if tuple(arr.shape) != tuple(shape):
        return None, dtype, f"returned shape {tuple(arr.shape)}, expected {tuple(shape)}"
    if dtype not in compare.FLOAT_RANK:
        return None, dtype, f"returned dtype {dtype}, expected a float dtype"
    return arr, dtype, ""


def _values(case: Case, op: str, face: Face, answer: Answer, x: np.ndarray | None,
            reference: np.ndarray, decl: SubjectDeclaration = SubjectDeclaration()) -> tuple[str, str]:
    """("pass" | "fail" | "error", detail) of a dequantize or matmul result against the reference."""
    shape = reference.shape if op == "dequantize" else (x.shape[0], reference.shape[0])
    arr, dtype, problem = _array(answer, shape)
    if arr is None:
        return "error", problem
    if op == "dequantize":
        j = compare.exact(arr, dtype, reference, signed_zeros=decl.zeros == "signed")
    elif case.expect == "informative":
        j = compare.nonfinite_pattern(arr, compare.bound(x, reference, dtype, w_rounding=face.w_rounding)[0])
    else:
        j = compare.within_bound(arr, dtype, x, reference, w_rounding=face.w_rounding)
    return ("pass" if j.ok else "fail"), j.detail


def _reject(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer,
            x: np.ndarray | None, reference: np.ndarray | None) -> tuple[str, str]:
    """Non-conforming input: a reader must raise (or decode it the declared documented way); a writer refuse."""
    if answer.status == "raised":
        return "pass", f"rejected, as {case.clauses[0]} requires ({answer.message[:200]})"
    if answer.status != "ok":
        return "error", describe(answer)
    if op in ("dequantize", "matmul") and decl.v1_zero_fields == "wrap":
        status, detail = _values(case, op, face, answer, x, reference, decl)
        if status == "pass":
            return "warning", f"decoded the non-conforming layer as declared (wrap, GPTQ-4.2): {detail}"
        return status, f"declared wrap decoding, but: {detail}"
    what = "wrote an unrepresentable value instead of refusing it" if op in ("pack", "quantize") else \
        "silently decoded a non-conforming layer instead of rejecting it"
    return "fail", f"{what} ({case.description or case.clauses[0]})"


def _reference_equivalent(case: Case, face: Face, answer: Answer, status: str, detail: str) -> tuple[str, str]:
    """A claim of the reference-equivalent level: the encoder's bytes must be the reference encoder's."""
    expected = face.reference(case)
    got = answer.arrays.get("result")
    if got is not None and got.shape == expected.shape and np.array_equal(got, expected):
        return status, detail
    where = "" if got is None or got.shape != expected.shape else \
        f"; first differing byte at {tuple(int(i) for i in np.argwhere(got != expected)[0])}"
    return "fail", f"claims the reference-equivalent level, but the bytes differ from the reference encoder's{where} ({detail})"


def judge(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer,
          x: np.ndarray | None, reference: np.ndarray | None) -> tuple[str, str]:
    """(status, detail) of ``answer`` to ``case`` under ``op``; ``reference`` is ``face.reference(case)``
    for dequantize and matmul, None for writers (their judge computes its own expectation)."""
    if answer.status == "load_error":
        return "error", describe(answer)
    if case.expect == "reject":
        return _reject(case, op, face, decl, answer, x, reference)
    if answer.status != "ok":
        return "error", describe(answer)
    if op in ("pack", "quantize"):
        status, detail = face.judge_writer(case, op, answer.arrays, answer.kind)
        if op == "quantize" and decl.claims == "reference-equivalent" and status in ("pass", "warning"):
            status, detail = _reference_equivalent(case, face, answer, status, detail)
    else:
        status, detail = _values(case, op, face, answer, x, reference, decl)
    if case.expect == "informative" and status == "fail":
        return "warning", f"informative case ({', '.join(case.clauses[-1:])}): {detail}"
    return status, detail
