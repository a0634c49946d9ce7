"""The bitsandbytes faces (qformats.formats.registry): NF4, FP4 and LLM.int8 checkpoints (spec/bnb.md), the
subject format ``bnb_4bit`` (a 4-bit dequantize kernel) and, on a face of its own (its call has other keywords),
``bnb_int8`` (LLM.int8 dequantize), both spec/kernels.md KC-1.10. The checkpoint side hangs on the first face."""

from ..registry import Face
from . import cases, int8_cases, layers

FACES = (
    Face(name="bnb", subject_formats=cases.FORMATS, ops={"bnb_4bit": ("dequantize",)}, reference_dtype="float32",
         w_rounding=False, kernel_keywords=("quant_type", "blocksize", "shape", "dtype"), cases=cases.cases,
         reference=cases.reference, layers=layers),
    Face(name="bnb_int8", subject_formats=int8_cases.FORMATS, ops={"bnb_int8": ("dequantize",)},
         reference_dtype="float32", w_rounding=False, kernel_keywords=("dtype",), cases=int8_cases.cases,
         reference=int8_cases.reference),
)
FACE = FACES[0]
