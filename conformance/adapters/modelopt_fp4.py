"""NVIDIA ModelOpt 0.47.0's ``NVFP4QTensor`` / ``MXFP4QTensor.dequantize`` as ``nvfp4_packed`` / ``mxfp4_packed``
subjects (spec/kernels.md KC-1.12, spec/fp4.md FP4-4; CPU; ModelOpt imports ``requests`` without declaring it).

The arrays are what a ModelOpt checkpoint of the same layer holds (FP4-4.1, FP4-3.6): ``weight`` = the packed
bytes, ``weight_scale`` = the float8_e4m3fn (NVFP4) or E8M0 uint8 (MXFP4) bytes, and for NVFP4
``weight_scale_2 = float32(1 / weight_global_scale)``, shape ``()``, the reciprocal a converter writes (the one
float32 division is the adapter's; everything after it is ModelOpt's). Then
``dequantize(dtype=torch.bfloat16, block_sizes={-1: g})`` as its exporter's readers call it.
"""

from __future__ import annotations

import numpy as np


def _t(a):
    import torch

    return a if isinstance(a, torch.Tensor) else torch.as_tensor(np.array(a))


def nvfp4_dequantize(*, weight_packed, weight_scale, weight_global_scale):
    import torch
    from modelopt.torch.quantization.qtensor import NVFP4QTensor

    packed = _t(weight_packed)
    scale_2 = (1.0 / _t(weight_global_scale).to(torch.float32)).squeeze()     # (1,) -> (): ModelOpt's shape
    shape = torch.Size((*packed.shape[:-1], 2 * packed.shape[-1]))
    return NVFP4QTensor(shape, torch.bfloat16, packed).dequantize(
        dtype=torch.bfloat16, scale=_t(weight_scale).view(torch.float8_e4m3fn), double_scale=scale_2,
        block_sizes={-1: 16})


def mxfp4_dequantize(*, weight_packed, weight_scale):
    import torch
    from modelopt.torch.quantization.qtensor import MXFP4QTensor

    packed = _t(weight_packed)
    shape = torch.Size((*packed.shape[:-1], 2 * packed.shape[-1]))
    return MXFP4QTensor(shape, torch.bfloat16, packed).dequantize(dtype=torch.bfloat16, scale=_t(weight_scale),
                                                                block_sizes={-1: 32})
