"""compressed-tensors 0.20.0's float-quantized decompression as fp8_tensor / fp8_channel / fp8_block subjects
(spec/kernels.md KC-1.11).

The call's tensors go to ``FloatQuantizationCompressor.decompress`` (what ``ModelCompressor.decompress_model``
runs per module) as a module's state dict, with the scheme a ``float-quantized`` config group gives: 8-bit float
weights, the subject format's strategy, ``block_structure`` from ``block_size``. The uint8 bytes are viewed as
``torch.float8_e4m3fn``; compressed-tensors returns the weight in the scale's dtype, converted here to ``dtype``
(a float32 result rounded once). Nothing is checked: compressed-tensors' choices are what is judged.
"""

from __future__ import annotations

import numpy as np


def _decompress(strategy: str, weight, weight_scale, block_size, dtype):
    import torch
    from compressed_tensors.compressors.naive_quantized.base import FloatQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    args = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": strategy}
    if strategy == "block":
        args["block_structure"] = list(block_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**args))
    state = {"weight": torch.as_tensor(np.array(weight)).view(torch.float8_e4m3fn),
             "weight_scale": torch.as_tensor(np.array(weight_scale))}
    w = FloatQuantizationCompressor.decompress(state, scheme)["weight"]
    return w.to(getattr(torch, dtype))


def dequantize_tensor(*, weight, weight_scale, block_size, dtype):
    return _decompress("tensor", weight, weight_scale, block_size, dtype)


def dequantize_channel(*, weight, weight_scale, block_size, dtype):
    return _decompress("channel", weight, weight_scale, block_size, dtype)


def dequantize_block(*, weight, weight_scale, block_size, dtype):
    return _decompress("block", weight, weight_scale, block_size, dtype)
