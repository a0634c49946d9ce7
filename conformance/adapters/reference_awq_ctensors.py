"""qformats' NumPy reference as a subject for awq_gemm and ctensors_pack (the suite's own teeth check)."""

from __future__ import annotations

import numpy as np

from qformats.formats import awq, ctensors


def awq_dequantize(*, qweight, qzeros, scales, group_size):
    return awq.dequantize({"qweight": qweight, "qzeros": qzeros, "scales": scales}, group_size=group_size)


def awq_matmul(*, qweight, qzeros, scales, group_size, x):
    w = awq_dequantize(qweight=qweight, qzeros=qzeros, scales=scales, group_size=group_size)
    return (np.asarray(x, np.float64) @ w.T.astype(np.float64)).astype(np.float32)


def awq_pack(*, codes, zeros, scales, group_size):
    return dict(awq.pack(codes, zeros, scales, group_size=group_size).tensors)


def _ct_layer(weight_packed, weight_scale, weight_shape, weight_zero_point):
    layer = {"weight_packed": weight_packed, "weight_scale": weight_scale, "weight_shape": weight_shape}
    return layer | ({"weight_zero_point": weight_zero_point} if weight_zero_point is not None else {})


def ctensors_dequantize(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    return ctensors.dequantize(_ct_layer(weight_packed, weight_scale, weight_shape, weight_zero_point), num_bits=num_bits,
                               group_size=group_size)


def ctensors_matmul(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, x, weight_zero_point=None):
    w = ctensors_dequantize(weight_packed=weight_packed, weight_scale=weight_scale, weight_shape=weight_shape,
                            num_bits=num_bits, group_size=group_size, weight_zero_point=weight_zero_point)
    return (np.asarray(x, np.float64) @ w.T.astype(np.float64)).astype(np.float32)


def ctensors_pack(*, codes, scales, num_bits, group_size, zero_points=None):
    layer = ctensors.pack(codes, scales, num_bits=num_bits, group_size=None if group_size == -1 else group_size,
                          zero_points=zero_points)
    return dict(layer.tensors)
