"""The GPTQ face (qformats.formats.registry): subject formats gptq_v1 / gptq_v2."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="gptq", subject_formats=cases.FORMATS,
            ops={"gptq_v1": ("dequantize", "matmul", "pack"), "gptq_v2": ("dequantize", "matmul", "pack")},
            reference_dtype="float32", w_rounding=True, kernel_keywords=("bits", "group_size"),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_pack, layers=layers)
