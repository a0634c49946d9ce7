"""The SpQR face (qformats.formats.registry): W is float16 already, so matmul may not round it again."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="spqr", subject_formats=cases.FORMATS, ops={"spqr": ("dequantize", "matmul")},
            reference_dtype="float16", w_rounding=False, kernel_keywords=("m", "n"),
            cases=cases.cases, reference=cases.reference, layers=layers)
