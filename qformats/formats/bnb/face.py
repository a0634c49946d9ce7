"""The bitsandbytes face (qformats.formats.registry): NF4, FP4 and LLM.int8 checkpoints (spec/bnb.md), and
the subject format ``bnb_4bit`` (a 4-bit dequantize kernel, spec/kernels.md KC-1.10). LLM.int8 has no
kernel cases."""

from ..registry import Face
from . import cases, layers

FACE = Face(name="bnb", subject_formats=cases.FORMATS, ops={"bnb_4bit": ("dequantize",)}, reference_dtype="float32",
            w_rounding=False, kernel_keywords=("quant_type", "blocksize", "shape", "dtype"),
            cases=cases.cases, reference=cases.reference, layers=layers)
