"""transformers 5.24's bitsandbytes 4-bit loader as a bnb_4bit subject (spec/kernels.md KC-1.10).

Each call is a one-module checkpoint loaded as a user loads a ``*-bnb-4bit`` repository: the call's tensors are
written under ``proj.weight`` / ``proj.weight.<key>`` with the quant_state JSON packed by bitsandbytes' own
``pack_dict_to_tensor`` (what ``save_pretrained`` writes, spec/bnb.md BNB-1.1), beside a ``config.json`` whose
``quantization_config`` is bitsandbytes 4-bit; then ``from_pretrained(..., device_map="cpu")`` (its
bitsandbytes quantizer swaps the Linear for ``Linear4bit``, its ``Bnb4bitDeserialize`` calls
``Params4bit.from_prequantized``), and transformers' own ``dequantize_bnb_weight`` decodes the loaded
parameter, as ``model.dequantize()`` does. The model is the smallest transformers accepts: one bias-free
``nn.Linear(K, N)`` named ``proj``, listed as quantized by ``llm_int8_skip_modules: []`` (with null,
transformers keeps a model's last module unquantized). Nothing is checked here: rename and convert only.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

_MODEL = None


def _model_class():
    """A PreTrainedModel holding one Linear(in_features, out_features), built once (transformers imported late)."""
    global _MODEL
    if _MODEL is None:
        from torch import nn
        from transformers import PretrainedConfig, PreTrainedModel

        class OneLinear(PreTrainedModel):
            config_class = PretrainedConfig

            def __init__(self, config):
                super().__init__(config)
                self.proj = nn.Linear(config.in_features, config.out_features, bias=False)
                self.post_init()

        _MODEL = OneLinear
    return _MODEL


def dequantize(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
               nested_quant_map=None, nested_offset=None):
    import torch
    from bitsandbytes.utils import pack_dict_to_tensor
    from safetensors.torch import save_file
    from transformers.integrations.bitsandbytes import dequantize_bnb_weight

    def t(a):
        return torch.from_numpy(np.array(a)).contiguous()

    keys = {"quant_type": quant_type, "blocksize": blocksize, "dtype": dtype, "shape": list(shape)}
    tensors = {"proj.weight": t(packed), "proj.weight.absmax": t(absmax), "proj.weight.quant_map": t(quant_map)}
    if nested_absmax is not None:
        tensors |= {"proj.weight.nested_absmax": t(nested_absmax), "proj.weight.nested_quant_map": t(nested_quant_map)}
        offset = float(np.asarray(nested_offset).reshape(()))           # a JSON number, as as_dict writes it
        keys |= {"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": offset}
    tensors[f"proj.weight.quant_state.bitsandbytes__{quant_type}"] = pack_dict_to_tensor(keys)
    config = {"out_features": int(shape[0]), "in_features": int(shape[1]), "dtype": dtype,
              "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                      "bnb_4bit_quant_type": quant_type,
                                      "bnb_4bit_use_double_quant": nested_absmax is not None,
                                      "llm_int8_skip_modules": []}}     # null would keep the last module unquantized
    with tempfile.TemporaryDirectory() as folder:
        save_file(tensors, str(Path(folder) / "model.safetensors"))
        (Path(folder) / "config.json").write_text(json.dumps(config))
        model = _model_class().from_pretrained(folder, device_map="cpu")
    return dequantize_bnb_weight(model.proj.weight)
