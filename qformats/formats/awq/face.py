"""The AWQ face (qformats.formats.registry): subject format awq_gemm."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="awq", subject_formats=cases.FORMATS, ops={"awq_gemm": ("dequantize", "matmul", "pack")},
            reference_dtype="float32", w_rounding=True, kernel_keywords=("group_size",),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_pack, layers=layers)
