"""The q4_K face (qformats.formats.registry)."""

from ..registry import Face
from . import cases

FACE = Face(name="q4_k", subject_formats=cases.FORMATS, ops={"q4_k": ("dequantize", "matmul", "quantize")},
            reference_dtype="float32", w_rounding=True, kernel_keywords=("rows", "n"),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_quantize)
# q4_K tensors of GGUF files are checked by the block-type family (qformats.formats.ggml), as every type is
