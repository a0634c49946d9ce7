"""GPTQModel's CPU (torch) dequantization path as a GPTQ v1/v2 subject.

GPTQModel 7.7.0 installs on a CPU-only machine (``make real-subjects``: torch 2.13.0+cpu, its
import dependencies, ``gptqmodel`` itself ``--no-deps``; spec notes gptq.md §9). The adapter loads
the on-disk tensors into a ``TorchLinear`` (the ``GPTQ_TORCH`` backend) exactly as GPTQModel's
loader does: v1 zeros pass through ``convert_gptq_v1_to_v2_format_module`` first, then
``post_init()`` and ``dequantize_weight()``, which returns ``W^T`` (in, out) in the scales' dtype
(float16); the adapter transposes it to the contract's (out, in).
"""

from __future__ import annotations

import numpy as np


def _module(qweight, qzeros, scales, g_idx, bits: int, group_size: int):
    import torch
    from gptqmodel.nn_modules.qlinear.torch import TorchLinear
    from gptqmodel.utils.backend import BACKEND

    # a layer without g_idx (g_idx=None, spec/kernels.md KC-1.3) keeps the buffer TorchLinear registers, as
    # GPTQModel's loader does when the checkpoint has no such tensor
    tensors = {name: torch.as_tensor(np.asarray(a)) for name, a in
               (("qweight", qweight), ("qzeros", qzeros), ("scales", scales), ("g_idx", g_idx)) if a is not None}
    k, n = tensors["qweight"].shape[0] * 32 // bits, tensors["scales"].shape[1]
    trivial = "g_idx" not in tensors or torch.equal(tensors["g_idx"].long(),
                                                    torch.arange(k) // (k if group_size == -1 else group_size))
    module = TorchLinear(bits=bits, group_size=group_size, sym=True, desc_act=not trivial, in_features=k,
                         out_features=n, bias=False, pack_dtype=torch.int32, backend=BACKEND.GPTQ_TORCH,
                         register_buffers=True)
    for name, value in tensors.items():
        getattr(module, name).data = value.clone()
    return module


def _dequantize(module):
    module.post_init()
    return module.dequantize_weight().T.contiguous()


def dequantize_v2(*, qweight, qzeros, scales, g_idx, bits, group_size):
    return _dequantize(_module(qweight, qzeros, scales, g_idx, bits, group_size))


def dequantize_v1(*, qweight, qzeros, scales, g_idx, bits, group_size):
    import torch
    from gptqmodel.utils.model import convert_gptq_v1_to_v2_format_module

    module = _module(qweight, qzeros, scales, g_idx, bits, group_size)
    convert_gptq_v1_to_v2_format_module(module, bits, torch.int32)
    return _dequantize(module)
