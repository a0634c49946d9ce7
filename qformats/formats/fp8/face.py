"""The FP8 faces (qformats.formats.registry): one room, two anchors (layers.py), and the subject formats
``fp8_tensor``, ``fp8_channel`` and ``fp8_block`` (a dequantize or matmul kernel, spec/kernels.md KC-1.11).
The conformance cases hang on the first face, whose name finds this package's cases module (readings,
misreadings); the ``weight_scale_inv`` face is the same contract with the scale given as a multiplier."""

from ..registry import Face
from . import cases
from .layers import CT_SIDE, INV_SIDE

FACES = (
    Face(name="fp8", subject_formats=cases.FORMATS, ops={fmt: ("dequantize", "matmul") for fmt in cases.FORMATS},
         reference_dtype="float32", w_rounding=True, kernel_keywords=("block_size", "dtype"), cases=cases.cases,
         reference=cases.reference, layers=CT_SIDE),
    Face(name="fp8_deepseek", subject_formats=(), ops={}, reference_dtype="float32", w_rounding=True,
         kernel_keywords=(), cases=lambda: [], reference=cases.reference, layers=INV_SIDE),
)
FACE = FACES[0]
