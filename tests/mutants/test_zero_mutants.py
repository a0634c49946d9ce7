"""Issue 21, "done when": in every format whose decode can give -0.0, a decoder identical to the reference
except that it turns -0.0 into +0.0 fails, on cases whose ids say why (``signed_zeros``), each failure
attributed to the sign-of-zero clause (spec/kernels.md KC-2.4).

GPTQ, SpQR, q4_K and q8_0 have such mutants in the catalogue (run through the whole door by
test_mutants.py); the other GGUF block types are swept here, in process, through the runner's judge.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.catalog import pinned_digests
from conformance.runner import judge_case
from conformance.subject import Answer, SubjectDeclaration
from qformats.formats import ggml
from qformats.formats.ggml.cases import subject_types
from qformats.formats.registry import FACES


class _InProcess:
    """The reference decoder of one type, then ``+ 0.0``, answering as a subject process would."""

    def __init__(self, name: str) -> None:
        self.name = name

    def call(self, arrays, scalars) -> Answer:
        w = ggml.dequantize(self.name, arrays["blocks"]) + np.float32(0)
        return Answer("ok", arrays={"result": w}, dtypes={"result": "float32"})


SIGNED = sorted({c.format for c in FACES["ggml"].cases() if c.id.endswith("/read/signed_zeros")})


def test_every_type_that_can_give_negative_zero_has_a_signed_zeros_case():
    """mxfp4 alone decodes no -0.0 (its E8M0 scale is positive and its code table holds +0 only)."""
    assert set(SIGNED) == {bt.name for bt in subject_types()} - {"mxfp4"}


@pytest.mark.parametrize("name", SIGNED)
def test_positive_zero_decoder_fails_on_signed_zero_cases(name):
    """KC-2.4: the mutant fails on the type's signed_zeros case, attributed to the sign of zero, and
    passes every case whose reference holds no -0.0."""
    face, digests = FACES["ggml"], pinned_digests()
    cases = [c for c in face.cases() if c.format == name and c.expect == "values" and "dequantize" in c.ops]
    results = {c.id: judge_case(c, "dequantize", face, SubjectDeclaration(), _InProcess(name), digests) for c in cases}
    failed = {i: r for i, r in results.items() if r.status == "fail"}
    assert f"{name}/read/signed_zeros" in failed
    assert all(r.clause == "KC-2.4" and "zeros of the wrong sign" in r.detail for r in failed.values())
    for case in cases:
        ref = face.reference(case)
        if not (np.signbit(ref) & (ref == 0)).any():
            assert results[case.id].status == "pass", case.id


class _PackedInProcess:
    """AWQ GEMM or compressed-tensors: the reference decode of the call's tensors, then ``+ 0.0``."""

    def __init__(self, decode) -> None:
        self.decode = decode

    def call(self, arrays, scalars) -> Answer:
        w = self.decode(arrays, scalars) + np.float32(0)
        return Answer("ok", arrays={"result": w}, dtypes={"result": "float32"})


def _awq_decode(arrays, scalars):
    from qformats.formats import awq
    return awq.dequantize(dict(arrays), group_size=scalars["group_size"])


def _ctensors_decode(arrays, scalars):
    from qformats.formats import ctensors
    return ctensors.dequantize(dict(arrays), num_bits=scalars["num_bits"], group_size=scalars["group_size"])


@pytest.mark.parametrize(("face_name", "decode"), [("awq", _awq_decode), ("ctensors", _ctensors_decode)])
def test_positive_zero_decoder_fails_awq_and_compressed_tensors_signed_zero_cases(face_name, decode):
    """KC-2.4 for ``s * (q - z)`` (AWQ-3.1, CT-3.1): both signed_zeros cases fail, on the sign of zero only;
    every other conforming read case passes."""
    face, digests = FACES[face_name], pinned_digests()
    cases = [c for c in face.cases() if c.expect == "values" and "dequantize" in c.ops]
    results = {c.id: judge_case(c, "dequantize", face, SubjectDeclaration(), _PackedInProcess(decode), digests)
               for c in cases}
    failed = {i: r for i, r in results.items() if r.status != "pass"}
    assert sorted(failed) == sorted(c.id for c in cases if "signed_zeros" in c.id) and len(failed) == 2
    assert all(r.status == "fail" and r.clause == "KC-2.4" and "zeros of the wrong sign" in r.detail
               for r in failed.values())
