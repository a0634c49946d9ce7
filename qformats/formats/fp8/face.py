"""The FP8 faces (qformats.formats.registry): one room, two anchors (layers.py). Conformance cases and
kernels for FP8 are later work (issue #29 items 6-7): no subject formats yet."""

from ..registry import Face
from .layers import CT_SIDE, INV_SIDE


def _no_reference(case):  # noqa: ANN001, ANN202 - the Face contract's callable
    raise NotImplementedError("FP8 has no conformance cases yet")


FACES = (
    Face(name="fp8", subject_formats=(), ops={}, reference_dtype="float32", w_rounding=True, kernel_keywords=(),
         cases=lambda: [], reference=_no_reference, layers=CT_SIDE),
    Face(name="fp8_deepseek", subject_formats=(), ops={}, reference_dtype="float32", w_rounding=True,
         kernel_keywords=(), cases=lambda: [], reference=_no_reference, layers=INV_SIDE),
)
FACE = FACES[0]
