"""conformance.reference's GGUF block-type subjects (``<type>_dequantize``, ``_matmul``, ``_quantize``, KC-1.5):
the NumPy reference called as any subject is called passes 100 % of every type's matrix, and rejects every
non-conforming case (a validating decoder, KC-4.2). Judged in process, through the runner's judge, so the
24 types cost a second rather than 70 subject processes; `make matrix` runs them through the real door."""

from __future__ import annotations

import numpy as np
import pytest

import conformance.reference as reference
from conformance.catalog import pinned_digests
from conformance.runner import judge_case
from conformance.subject import Answer, SubjectDeclaration
from qformats.errors import QFormatsError
from qformats.formats.registry import FACES

FACE = FACES["ggml"]


class _Reference:
    """The reference function answering as a subject process would: arrays back, or a rejection."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def call(self, arrays, scalars) -> Answer:
        try:
            result = self.fn(**arrays, **scalars)
        except QFormatsError as err:
            return Answer("raised", message=f"QFormatsError: {err}")
        result = np.asarray(result)
        return Answer("ok", arrays={"result": result}, dtypes={"result": result.dtype.name})


RUNS = [(fmt, op) for fmt in FACE.subject_formats for op in FACE.ops[fmt]]


@pytest.mark.parametrize(("fmt", "op"), RUNS, ids=[f"{f}-{o}" for f, o in RUNS])
def test_reference_type_subject_passes_every_case(fmt, op):
    digests = pinned_digests()
    subject = _Reference(getattr(reference, f"{fmt}_{op}"))
    cases = [c for c in FACE.cases() if c.format == fmt and op in c.ops]
    results = [judge_case(c, op, FACE, SubjectDeclaration(level="validating"), subject, digests) for c in cases]
    assert cases and [(r.id, r.status, r.detail[:160]) for r in results if r.status != "pass"] == []
    assert sum(r.rejected for r in results) == sum(c.expect == "reject" for c in cases)


def test_every_type_has_its_reference_subjects():
    """The reference module names a subject for each op of each type's face, and nothing else of that shape."""
    names = {f"{fmt}_{op}" for fmt, op in RUNS}
    assert names <= set(reference.__all__)
    assert {n for n in reference.__all__ if n.rsplit("_", 1)[0] in FACE.subject_formats} == names
