"""The FP4 faces (qformats.formats.registry): NVFP4 and MXFP4 safetensors modules (spec/fp4.md), one face per
anchor: ``fp4`` (compressed-tensors ``weight_packed`` of an NVFP4 or MXFP4 config group) and ``gpt_oss_mxfp4``
(gpt-oss experts' ``gate_up_proj_blocks``) and ``modelopt_fp4`` (ModelOpt NVFP4 / MXFP4 ``weight_scale``).
The checkpoint side only: kernel cases and conversions are not written yet."""

from ..registry import Face
from . import layers


def _face(name: str, side: layers.Side) -> Face:
    return Face(name=name, subject_formats=(), ops={}, reference_dtype="float32", w_rounding=False,
                kernel_keywords=(), cases=lambda: [], reference=lambda case: None, layers=side)


FACES = (_face("fp4", layers.CT_SIDE), _face("gpt_oss_mxfp4", layers.GPT_OSS_SIDE),
         _face("modelopt_fp4", layers.MODELOPT_SIDE))
FACE = FACES[0]
