"""transformers 5.24's gpt-oss MXFP4 dequantize (``integrations.mxfp4.convert_moe_packed_tensors``) as an
``mxfp4_packed`` subject (spec/kernels.md KC-1.12, spec/fp4.md FP4-3.8; CPU).

The call's packed rows are the gpt-oss layout's bytes in another shape: ``(E, N, K/2)`` is ``*_blocks``
``(E, N, K/32, 16)`` (a 2-D layer is one expert), ``weight_scale`` is ``*_scales``. So the adapter reshapes,
calls ``convert_moe_packed_tensors(blocks, scales, dtype=torch.bfloat16)`` and transposes its ``(E, K, N)``
back to the contract's ``(E, N, K)``: moving bytes, no arithmetic. A K that is not a multiple of 32 has no
gpt-oss layout, so its reshape raises (the layout cannot hold it; transformers is never called).
"""

from __future__ import annotations

import numpy as np


def dequantize(*, weight_packed, weight_scale):
    import torch
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    packed = weight_packed if isinstance(weight_packed, torch.Tensor) else torch.as_tensor(np.array(weight_packed))
    scale = weight_scale if isinstance(weight_scale, torch.Tensor) else torch.as_tensor(np.array(weight_scale))
    experts = packed.ndim == 3
    if not experts:
        packed, scale = packed[None], scale[None]
    e, n, _ = packed.shape
    blocks = packed.reshape(e, n, -1, 16)                  # raises where K / 2 is not whole 16-byte blocks
    out = convert_moe_packed_tensors(blocks, scale, dtype=torch.bfloat16).transpose(1, 2).contiguous()
    return out if experts else out[0]
