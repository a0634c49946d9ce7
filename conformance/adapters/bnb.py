"""bitsandbytes 0.50.2's CPU ``dequantize_4bit`` as a bnb_4bit subject and its ``int8_vectorwise_dequant`` as a
bnb_int8 one (spec/kernels.md KC-1.10).

The call's tensors and keys are handed to bitsandbytes as a checkpoint hands them over: a state dict of
``absmax``, ``quant_map``, the nested tensors and the quant_state JSON packed into a uint8 tensor by its own
``pack_dict_to_tensor``, parsed by its own ``QuantState.from_dict`` (what ``Params4bit.from_prequantized``,
transformers' loader, calls), then ``functional.dequantize_4bit``. Nothing is checked or converted here
beyond NumPy to torch: bitsandbytes' choices are what is judged. On CPU it takes its C++ kernel where K is
even and its pure-torch path otherwise (spec/bnb.md BNB-2.3).
"""

from __future__ import annotations

import numpy as np


def dequantize(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
               nested_quant_map=None, nested_offset=None):
    import torch
    from bitsandbytes import functional as F
    from bitsandbytes.utils import pack_dict_to_tensor

    def t(a):
        return torch.as_tensor(np.array(a))

    keys = {"quant_type": quant_type, "blocksize": blocksize, "dtype": dtype, "shape": list(shape)}
    state = {"absmax": t(absmax), "quant_map": t(quant_map)}
    if nested_absmax is not None:
        state |= {"nested_absmax": t(nested_absmax), "nested_quant_map": t(nested_quant_map)}
        offset = float(np.asarray(nested_offset).reshape(()))           # a JSON number, as as_dict writes it
        keys |= {"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": offset}
    state[f"quant_state.bitsandbytes__{quant_type}"] = pack_dict_to_tensor(keys)
    quant_state = F.QuantState.from_dict(state, device=torch.device("cpu"))
    return F.dequantize_4bit(t(packed), quant_state)


def int8_dequantize(*, weight, SCB, dtype):  # noqa: N803 (the stored name)
    """bitsandbytes' ``int8_vectorwise_dequant`` (float32), cast to the model dtype as transformers'
    ``dequantize_bnb_weight`` caller does (spec/bnb.md BNB-6.2): the bnb_int8 call (KC-1.10)."""
    import torch
    from bitsandbytes import functional as F

    w = F.int8_vectorwise_dequant(torch.as_tensor(np.array(weight)), torch.as_tensor(np.array(SCB)))
    return w.to(getattr(torch, dtype))
