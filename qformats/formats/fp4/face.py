"""The FP4 faces (qformats.formats.registry): NVFP4 and MXFP4 safetensors modules (spec/fp4.md), one face per
anchor: ``fp4`` (compressed-tensors ``weight_packed`` of an NVFP4 or MXFP4 config group) and ``gpt_oss_mxfp4``
(gpt-oss experts' ``gate_up_proj_blocks``) and ``modelopt_fp4`` (ModelOpt NVFP4 / MXFP4 ``weight_scale``).
The ``fp4`` face also judges kernels: the subject formats ``nvfp4_packed`` and ``mxfp4_packed`` (spec/kernels.md
KC-1.12, spec/fp4.md FP4-7), the packed bytes every FP4 layout here shares; the other two faces read checkpoints
only (their modules decode through the same codecs)."""

from ..registry import Face
from . import cases, layers


def _face(name: str, side: layers.Side) -> Face:
    return Face(name=name, subject_formats=(), ops={}, reference_dtype="float32", w_rounding=False,
                kernel_keywords=(), cases=lambda: [], reference=lambda case: None, layers=side)


FACE = Face(name="fp4", subject_formats=cases.FORMATS, ops={f: ("dequantize", "matmul") for f in cases.FORMATS},
            reference_dtype="float32", w_rounding=False, kernel_keywords=(), cases=cases.cases,
            reference=cases.reference, layers=layers.CT_SIDE)
FACES = (FACE, _face("gpt_oss_mxfp4", layers.GPT_OSS_SIDE), _face("modelopt_fp4", layers.MODELOPT_SIDE))
