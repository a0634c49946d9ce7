"""Status, detail and attributed clause of one answer (spec/kernels.md KC-2 to KC-5).

Conforming input (``expect == "values"``) is judged by the rules of conformance/compare.py. Non-conforming
input of a read op (``expect == "reject"``, and the real tools' ``informative`` inputs with non-finite
scales) is judged twice (KC-4): at the *decoder* level a rejection or one of the spec's named readings of
that input passes (the format's ``readings(case)``), other output fails, and an input the spec names no
reading for need not be rejected (*not-applicable* there); at the *validating* level only a rejection
passes. The claimed level decides the status; both go into the run's level report.

A failing case names the most specific clause its evidence supports first (KC-5): zeros of the wrong
sign only (KC-2.4), then the first of the format's known misreadings (``misreadings(case)``: the v1 zero
fields read as v2, ``g_idx`` ignored, SpQR's permuted order, ...) that the answer reproduces, else the
case's own first clause; the case's other clauses follow.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

import numpy as np

from qformats.cases import READ_OPS, Case
from qformats.formats.registry import Face

from . import compare, diagnoses
from .subject import Answer, SubjectDeclaration

__all__ = ["Verdict", "judge", "describe", "format_hooks", "nominal_shape"]

VERBS = {"raised": "raised", "hung": "hung", "crashed": "crashed", "bad_result": "returned an unusable result",
         "load_error": "could not be loaded"}
SIGN_OF_ZERO = "KC-2.4"
SHAPE, DTYPE, REJECTION, NO_REJECTION_OF_CONFORMING = "KC-2.1", "KC-2.2", "KC-3.1", "KC-3.2"


@dataclass(frozen=True)
class Verdict:
    """What one answer earned. ``status`` is under the claimed level, ``decoder_status`` under the decoder
    level; ``validation`` is the MUST-reject clause of non-conforming input, ``rejected`` whether the
    subject raised on it; ``feature`` / ``readings`` name the spec's named readings the answer matched
    (``("reject",)`` for a rejection); ``misreading`` the known misreading (KC-5) an answer that matched
    no named reading reproduces."""

    status: str
    detail: str
    clause: str
    decoder_status: str = ""
    validation: str | None = None
    rejected: bool = False
    feature: str | None = None
    readings: tuple[str, ...] = ()
    misreading: str | None = None
    misreadings: tuple[str, ...] = ()       # every known misreading the answer reproduces, the named one first


def describe(answer: Answer) -> str:
    return f"the subject {VERBS.get(answer.status, answer.status)}: {answer.message}"


def format_hooks(face: Face) -> ModuleType | None:
    """The format's cases module, whose optional ``readings(case)`` and ``misreadings(case)`` the judge
    uses (one room per format: the runner never branches on a format's name)."""
    try:
        return import_module(f"qformats.formats.{face.name}.cases")
    except ImportError:
        return None


def _hook(face: Face, name: str, case: Case) -> Any:
    fn = getattr(format_hooks(face), name, None)
    return fn(case) if fn is not None else None


def nominal_shape(case: Case, face: Face) -> tuple[int, int]:
    """(out, in) of the weight a read case denotes: the reference's, or for non-conforming input the
    case's ``nominal_shape`` (a reference decode would reject it)."""
    if "nominal_shape" in case.aux:
        return tuple(int(v) for v in case.aux["nominal_shape"])
    named = _hook(face, "readings", case)
    if named:
        return next(iter(named[2].values()))[1].shape
    return face.reference(case).shape


# -- one result array ---------------------------------------------------------------------------------


def _array(answer: Answer, shape: tuple[int, ...], allowed: tuple[str, ...]) -> tuple[np.ndarray | None, str, str, str]:
    """(result, dtype name, problem, clause): the one array a kernel returns, of the contract's shape and dtypes."""
    if answer.kind != "array" or "result" not in answer.arrays:
        return None, "", f"returned a {answer.kind}, not an array", SHAPE
    arr, dtype = answer.arrays["result"], answer.dtypes.get("result", "")
    if tuple(arr.shape) != tuple(shape):
        return None, dtype, f"returned shape {tuple(arr.shape)}, expected {tuple(shape)}", SHAPE
    if dtype not in compare.FLOAT_RANK:
        return None, dtype, f"returned dtype {dtype}, expected a float dtype", DTYPE
    if dtype not in allowed:
        return None, dtype, f"returned dtype {dtype}, which cannot hold the reference values ({', '.join(allowed)})", DTYPE
    return arr, dtype, "", ""


def _allowed(op: str, reference_dtype: str) -> tuple[str, ...]:
    return compare.allowed_dtypes(reference_dtype) if op == "dequantize" else tuple(compare.FLOAT_RANK)


def _compare(arr: np.ndarray, dtype: str, op: str, face: Face, x: np.ndarray | None, w: np.ndarray,
             decl: SubjectDeclaration, *, signed: bool = True) -> compare.Judgement:
    if op == "dequantize":
        return compare.exact(arr, dtype, w, signed_zeros=signed and decl.zeros == "signed")
    with np.errstate(invalid="ignore"):
        finite = bool(np.isfinite(w).all())
    if not finite:                          # non-finite weights: only where the result is finite is defined
        return compare.nonfinite_pattern(arr, compare.bound(x, w, dtype, w_rounding=face.w_rounding)[0])
    return compare.within_bound(arr, dtype, x, w, w_rounding=face.w_rounding)


def _shape(op: str, x: np.ndarray | None, w_shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(w_shape) if op == "dequantize" else (x.shape[0], w_shape[0])


def _misreading(case: Case, op: str, face: Face, decl: SubjectDeclaration, arr: np.ndarray, dtype: str,
                x: np.ndarray | None) -> tuple[str, str, tuple[str, ...]] | None:
    """(clause, sentence, name) of the first known misreading of ``case`` that the answer reproduces (values
    compared with +0 == -0: a misreading names a wrong value, whatever the sign of its zeros). A format's
    ``misreadings`` yields (clause, sentence, W) or (clause, sentence, W, name) where the sentence names
    this case's values and ``name`` the reading alone, as the level report counts it across cases."""
    found: list[tuple[str, str, str]] = []
    for clause, sentence, w, *name in itertools.chain(_hook(face, "misreadings", case) or (),
                                                      diagnoses.candidates(case, face)):
        if (name[0] if name else sentence) in (f[2] for f in found):
            continue
        if _compare(arr, dtype, op, face, x, w, decl, signed=False).ok:
            found.append((clause, sentence, name[0] if name else sentence))
            if len(found) == 1 and clause not in diagnoses.NAMES:   # a format's own misreading: the most specific
                break
    if not found:
        return None
    clause, sentence, _ = found[0]
    if len(found) > 1:                  # one answer, several readings: say so rather than pick silently
        sentence += f" (the same values as: {'; '.join(f[2] + ' (' + f[0] + ')' for f in found[1:])})"
    return clause, sentence, tuple(f[2] for f in found)


# -- conforming input ---------------------------------------------------------------------------------


def _values(case: Case, op: str, face: Face, answer: Answer, x: np.ndarray | None, reference: np.ndarray,
            decl: SubjectDeclaration) -> Verdict:
    """A dequantize or matmul result of conforming input against the reference values."""
    arr, dtype, problem, clause = _array(answer, _shape(op, x, reference.shape), _allowed(op, reference.dtype.name))
    if arr is None:
        turned = _transposed(answer, op, face, x, reference, decl)
        if turned is not None:
            name = diagnoses.NAMES[diagnoses.TRANSPOSED]
            return Verdict("error", f"{problem}: {turned}", clause, misreading=name, misreadings=(name,))
        return Verdict("error", problem, clause)
    j = _compare(arr, dtype, op, face, x, reference, decl)
    if j.ok:
        return Verdict("pass", j.detail, case.clauses[0])
    if j.zero_signs_only:
        return Verdict("fail", f"only the sign of zero differs ({SIGN_OF_ZERO}: the sign the chapter's formula gives, "
                               f"evaluated as written): {j.detail}", SIGN_OF_ZERO, misreading=diagnoses.ZERO_SIGNS,
                       misreadings=(diagnoses.ZERO_SIGNS,))
    found = _misreading(case, op, face, decl, arr, dtype, x)
    if found is not None:
        return Verdict("fail", f"decodes as {found[1]} ({found[0]}): {j.detail}", found[0], misreading=found[2][0],
                       misreadings=found[2])
    return Verdict("fail", j.detail, case.clauses[0])


def _transposed(answer: Answer, op: str, face: Face, x: np.ndarray | None, reference: np.ndarray,
                decl: SubjectDeclaration) -> str | None:
    """A dequantize result of shape (in, out) that is W.T exactly (KC-5.4): still a shape error (KC-2.1), named."""
    if op != "dequantize" or answer.kind != "array" or "result" not in answer.arrays:
        return None
    arr, dtype = answer.arrays["result"], answer.dtypes.get("result", "")
    if dtype not in _allowed(op, reference.dtype.name):
        return None
    return diagnoses.transposed(arr, reference, lambda t: _compare(np.ascontiguousarray(t), dtype, op, face, x, reference,
                                                                   decl, signed=False).ok)


# -- non-conforming input -----------------------------------------------------------------------------


def _decoded(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer, x: np.ndarray | None,
             named: tuple[str, str, dict[str, tuple[str, np.ndarray]]]
             ) -> tuple[str, str, str, tuple[str, ...], tuple[str, ...]]:
    """(decoder status, what the subject did, clause, readings matched, misreading reproduced) of values
    returned for non-conforming input that the spec names readings for."""
    feature, validation, readings = named
    excluded = {}
    if decl.v1_zero_fields == "wrap" and feature == "v1_zero_fields":      # a declared reading is held to
        excluded = {k: v for k, v in readings.items() if k != "field_local_wrap"}
        readings = {k: v for k, v in readings.items() if k == "field_local_wrap"}
    first = next(iter(readings.values()))[1]
    arr, dtype, problem, clause = _array(answer, _shape(op, x, first.shape), _allowed(op, first.dtype.name))
    if arr is None:
        return "error", problem, clause, (), ()
    matched = tuple(name for name, (_, w) in readings.items() if _compare(arr, dtype, op, face, x, w, decl).ok)
    if matched:
        return "pass", f"decoded it by the named reading '{matched[0]}' ({readings[matched[0]][0]})", validation, \
            matched, ()
    other = [name for name, (_, w) in excluded.items() if _compare(arr, dtype, op, face, x, w, decl).ok]
    if other:
        return "fail", f"decoded it by the named reading '{other[0]}', where its declaration says " \
                       f"'{decl.v1_zero_fields}'", validation, (), ()
    found = _misreading(case, op, face, decl, arr, dtype, x)
    j = _compare(arr, dtype, op, face, x, first, decl)
    if found is not None:
        return "fail", f"{found[1]}, not a named reading of {feature} ({', '.join(readings)}); " \
                       f"against '{next(iter(readings))}': {j.detail}", found[0], (), found[2]
    return "fail", f"decoded it by none of the named readings of {feature} ({', '.join(readings)}); " \
                   f"against '{next(iter(readings))}': {j.detail}", validation, (), ()


def _nonconforming_read(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer,
                        x: np.ndarray | None) -> Verdict:
    named = _hook(face, "readings", case)
    feature, validation = (named[0], named[1]) if named else (None, case.clauses[0])
    what_input = case.description or f"non-conforming input ({validation})"
    if answer.status == "raised":
        return Verdict("pass", f"rejected, as {validation} requires ({answer.message[:200]})", validation,
                       "pass", validation, True, feature, ("reject",))
    readings: tuple[str, ...] = ()
    misreadings: tuple[str, ...] = ()
    if decl.v1_zero_fields == "reject" and feature == "v1_zero_fields":
        decoder, what, clause = "fail", "decoded it, where its declaration says it rejects v1 all-ones fields", validation
    elif answer.status != "ok":
        decoder, what, clause = ("error" if named else "not-applicable"), describe(answer), REJECTION
    elif named is None:
        decoder, what, clause = "not-applicable", f"decoded it ({answer.dtypes.get('result', answer.kind)})", validation
    else:
        decoder, what, clause, readings, misreadings = _decoded(case, op, face, decl, answer, x, named)
    misreading = misreadings[0] if misreadings else None
    if decoder == "not-applicable":
        decoder_detail = (f"{what_input}: {what} instead of rejecting it, which a decoder may; a validating "
                          f"decoder rejects it ({validation})")
    elif decoder == "pass":
        decoder_detail = f"{what_input}: {what}; a validating decoder rejects it ({validation})"
    else:
        decoder_detail = f"{what_input}: {what}"
    verdict = Verdict(decoder, decoder_detail, clause, decoder, validation, False, feature, readings, misreading,
                      misreadings)
    if decl.level != "validating":
        return verdict
    status = "error" if decoder == "error" else "fail"
    return Verdict(status, f"did not reject {what_input} ({validation} requires a validating decoder to): {what}",
                   validation, decoder, validation, False, feature, readings, misreading, misreadings)


def _reject_writer(case: Case, answer: Answer) -> Verdict:
    """Unrepresentable input to a writer (GPTQ v1 zero point 0): a conforming writer refuses it."""
    if answer.status == "raised":
        return Verdict("pass", f"refused, as {case.clauses[0]} requires ({answer.message[:200]})", case.clauses[0])
    if answer.status != "ok":
        return Verdict("error", describe(answer), REJECTION)
    return Verdict("fail", f"wrote an unrepresentable value instead of refusing it "
                           f"({case.description or case.clauses[0]})", case.clauses[0])


def _reference_equivalent(case: Case, face: Face, answer: Answer, status: str, detail: str) -> tuple[str, str]:
    """A claim of the reference-equivalent level: the encoder's bytes must be the reference encoder's."""
    expected = face.reference(case)
    got = answer.arrays.get("result")
    if got is not None and got.shape == expected.shape and np.array_equal(got, expected):
        return status, detail
    where = "" if got is None or got.shape != expected.shape else \
        f"; first differing byte at {tuple(int(i) for i in np.argwhere(got != expected)[0])}"
    return "fail", f"claims the reference-equivalent level, but the bytes differ from the reference encoder's{where} ({detail})"


def _writer(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer) -> Verdict:
    status, detail = face.judge_writer(case, op, answer.arrays, answer.kind)
    if op == "quantize" and decl.claims == "reference-equivalent" and status in ("pass", "warning"):
        status, detail = _reference_equivalent(case, face, answer, status, detail)
    if case.expect == "informative" and status == "fail":
        return Verdict("warning", f"informative case ({', '.join(case.clauses[-1:])}): {detail}", case.clauses[-1])
    return Verdict(status, detail, case.clauses[0])


def nonconforming(case: Case, op: str) -> bool:
    """Whether a read op meets non-conforming input in ``case`` (the real tools' informative non-finite
    rows are such input: Q4K-5.4)."""
    return case.expect == "reject" or (case.expect == "informative" and op in READ_OPS)


def judge(case: Case, op: str, face: Face, decl: SubjectDeclaration, answer: Answer,
          x: np.ndarray | None, reference: np.ndarray | None) -> Verdict:
    """The verdict on ``answer`` to ``case`` under ``op``; ``reference`` is ``face.reference(case)`` for
    conforming input of dequantize and matmul, None otherwise (writers' judges know their expectation)."""
    if answer.status == "load_error":
        return Verdict("error", describe(answer), REJECTION)
    if op in READ_OPS and nonconforming(case, op):
        return _nonconforming_read(case, op, face, decl, answer, x)
    if case.expect == "reject":
        return _reject_writer(case, answer)
    if answer.status == "raised":
        return Verdict("error", f"{describe(answer)} (conforming input must not be rejected, {NO_REJECTION_OF_CONFORMING})",
                       NO_REJECTION_OF_CONFORMING)
    if answer.status != "ok":
        return Verdict("error", describe(answer), REJECTION)
    if op in ("pack", "quantize"):
        return _writer(case, op, face, decl, answer)
    return _values(case, op, face, answer, x, reference, decl)
