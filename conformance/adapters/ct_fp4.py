"""compressed-tensors 0.20.0's NVFP4 and MXFP4 decompressors as ``nvfp4_packed`` / ``mxfp4_packed`` subjects
(spec/kernels.md KC-1.12, spec/fp4.md FP4-7; pure torch, CPU).

The call's arrays go to ``NVFP4PackedCompressor.decompress`` / ``MXFP4PackedCompressor.decompress`` as a
checkpoint module's state dict, with the library's own presets ``NVFP4`` / ``MXFP4`` as the scheme; the NVFP4
block scales are the stored float8_e4m3fn bytes, viewed as that dtype. MoE experts (``(E, N, K/2)``) are one
module each in a compressed-tensors checkpoint, so each expert is decompressed alone and the results stacked.
Nothing is checked here: what the library does with the bytes is what is judged. It returns ``weight``
(bfloat16).
"""

from __future__ import annotations

import numpy as np


def _t(a):
    import torch

    return a if isinstance(a, torch.Tensor) else torch.as_tensor(np.array(a))


def _scheme(preset: str):
    from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme

    return preset_name_to_scheme(preset, ["Linear"])


def nvfp4_dequantize(*, weight_packed, weight_scale, weight_global_scale):
    import torch
    from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor

    state = {"weight_packed": _t(weight_packed), "weight_scale": _t(weight_scale).view(torch.float8_e4m3fn),
             "weight_global_scale": _t(weight_global_scale)}
    return NVFP4PackedCompressor.decompress(state, _scheme("NVFP4"))["weight"]


def mxfp4_dequantize(*, weight_packed, weight_scale):
    import torch
    from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor

    packed, scale = _t(weight_packed), _t(weight_scale)
    if packed.ndim == 3:                       # experts: one module each
        return torch.stack([mxfp4_dequantize(weight_packed=p, weight_scale=s) for p, s in zip(packed, scale)])
    state = {"weight_packed": packed, "weight_scale": scale}
    return MXFP4PackedCompressor.decompress(state, _scheme("MXFP4"))["weight"]
