"""The GGUF block-type family's face (qformats.formats.registry): one subject format per type."""

from types import MappingProxyType

from ..registry import Face
from . import cases, layers

_NAMES = tuple(bt.name for bt in cases.subject_types())

FACE = Face(name="ggml", subject_formats=_NAMES,
            ops=MappingProxyType({bt.name: ("dequantize", "matmul") + (("quantize",) if bt.quantize and not
                                                                     bt.requires_importance else ())
                                  for bt in cases.subject_types()}),
            reference_dtype="float32", w_rounding=True, kernel_keywords=("rows", "n"),
            cases=cases.cases, reference=cases.reference, judge_writer=cases.judge_quantize, layers=layers)
