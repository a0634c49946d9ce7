"""compressed-tensors 0.20.0's pack-quantized compressor as a ctensors_pack subject (pure torch, CPU).

``dequantize`` hands the on-disk tensors to ``PackedQuantizationCompressor.decompress`` with the scheme
the case implies (num_bits, symmetric when there is no zero point, strategy channel for group_size -1);
it returns ``weight`` (out, in) in the scale's dtype. ``pack`` hands ``PackedQuantizationCompressor.compress``
a weight that is exactly ``s * (q - zp)`` in float32 with the case's scales and zero points, so the
library's own quantize-then-pack runs (its rounding recovers the codes exactly).
"""

from __future__ import annotations

import numpy as np


def _scheme(num_bits, group_size, symmetric):
    from compressed_tensors.quantization import QuantizationScheme

    weights = {"num_bits": int(num_bits), "type": "int", "symmetric": symmetric,
               "strategy": "channel" if group_size == -1 else "group"}
    if group_size != -1:
        weights["group_size"] = int(group_size)
    return QuantizationScheme(targets=["Linear"], weights=weights)


def _t(a):
    import torch

    return torch.as_tensor(np.asarray(a))


def dequantize(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor

    state = {"weight_packed": _t(weight_packed), "weight_scale": _t(weight_scale), "weight_shape": _t(weight_shape)}
    if weight_zero_point is not None:
        state["weight_zero_point"] = _t(weight_zero_point)
    out = PackedQuantizationCompressor.decompress(state, _scheme(num_bits, group_size, weight_zero_point is None))
    return out["weight"]


def matmul(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, x, weight_zero_point=None):
    import torch

    w = dequantize(weight_packed=weight_packed, weight_scale=weight_scale, weight_shape=weight_shape,
                   num_bits=num_bits, group_size=group_size, weight_zero_point=weight_zero_point)
    return torch.nn.functional.linear(_t(x).to(torch.float32), w.to(torch.float32))


def pack(*, codes, scales, num_bits, group_size, zero_points=None):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor

    q = np.asarray(codes, np.float32)
    s = np.asarray(scales).astype(np.float32)
    cols = np.repeat(np.arange(s.shape[1]), q.shape[1] // s.shape[1])
    z = np.zeros_like(s) if zero_points is None else np.asarray(zero_points, np.float32)
    weight = s[:, cols] * (q - z[:, cols])
    state = {"weight": _t(weight), "weight_scale": _t(scales)}
    if zero_points is not None:
        state["weight_zero_point"] = _t(np.asarray(zero_points, np.int8))
    out = PackedQuantizationCompressor.compress(state, _scheme(num_bits, group_size, zero_points is None))
    return {name: value for name, value in out.items()}
