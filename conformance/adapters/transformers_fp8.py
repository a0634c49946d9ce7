"""transformers 5.24.0's FP8 dequantize paths as fp8_tensor / fp8_channel / fp8_block subjects
(spec/kernels.md KC-1.11).

- ``dequantize``: ``Fp8Dequantize._dequantize_one(weight, weight_scale_inv, dtype)``, what ``from_pretrained``
  runs on CPU for a ``quant_method: fp8`` checkpoint; it takes no block size (it derives one from the grid).
- ``dequantize_backward_*``: ``_dequantize_fp8_weight(weight, weight_scale_inv, block_size, dtype)``, FP8Linear's
  backward; ``block_size`` is the config's ``weight_block_size``, which a per-tensor config leaves ``None``.

The uint8 bytes are viewed as ``torch.float8_e4m3fn``; ``weight_scale`` is handed over as the
``weight_scale_inv`` it is (a multiplier, FP8-2.1). Nothing is checked or converted beyond that.
"""

from __future__ import annotations

import numpy as np


def _tensors(weight, weight_scale):
    import torch

    return torch.as_tensor(np.array(weight)).view(torch.float8_e4m3fn), torch.as_tensor(np.array(weight_scale))


def dequantize(*, weight, weight_scale, block_size, dtype):
    import torch
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize

    w, s = _tensors(weight, weight_scale)
    return Fp8Dequantize(None)._dequantize_one(w, s, getattr(torch, dtype))


def _backward(weight, weight_scale, block_size, dtype):
    import torch
    from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight

    w, s = _tensors(weight, weight_scale)
    return _dequantize_fp8_weight(w, s, block_size, getattr(torch, dtype))


def dequantize_backward_tensor(*, weight, weight_scale, block_size, dtype):
    return _backward(weight, weight_scale, None, dtype)


def dequantize_backward_channel(*, weight, weight_scale, block_size, dtype):
    return _backward(weight, weight_scale, list(block_size), dtype)


def dequantize_backward_block(*, weight, weight_scale, block_size, dtype):
    return _backward(weight, weight_scale, list(block_size), dtype)
