"""The q4_K face (qformats.formats.registry)."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="q4_k", subject_formats=cases.FORMATS, ops={"q4_k": ("dequantize", "matmul", "quantize")},
            reference_dtype="float32", w_rounding=True, kernel_keywords=("rows", "n"),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_quantize, layers=layers)
