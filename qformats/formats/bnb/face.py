"""The bitsandbytes face (qformats.formats.registry): NF4, FP4 and LLM.int8 checkpoints (spec/bnb.md).

Its checkpoint side (validate, inspect, decode) is complete; kernel conformance cases are later work, so
it declares no subject formats and no cases yet."""

from ..registry import Face
from . import layers


def _no_reference(case):
    raise NotImplementedError("bitsandbytes has no conformance cases yet")


FACE = Face(name="bnb", subject_formats=(), ops={}, reference_dtype="float32", w_rounding=False,
            kernel_keywords=("quant_type", "blocksize"), cases=lambda: [], reference=_no_reference, layers=layers)
