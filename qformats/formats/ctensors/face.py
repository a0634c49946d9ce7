"""The compressed-tensors face (qformats.formats.registry): subject format ctensors_pack (pack-quantized)."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="ctensors", subject_formats=cases.FORMATS,
            ops={"ctensors_pack": ("dequantize", "matmul", "pack")},
            reference_dtype="float32", w_rounding=True, kernel_keywords=("num_bits", "group_size"),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_pack, layers=layers)
