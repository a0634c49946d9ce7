"""Run under .venv/real (compressed-tensors 0.20.0): decompress each checkpoint given as compressed-tensors does when
transformers loads it, and print {checkpoint: {module: weight (out, in)}} as JSON.

A model of Linear modules, in config.json's ``dtype`` (bfloat16 where it names none), is built from the tensors
(``weight_packed`` (N, K/2) for FP4, a 2-D ``weight`` otherwise, a ``bias`` where stored), the config's scheme
applied, ``compress_model`` run for the parameters it expects, the checkpoint loaded strictly (every name and shape
must be the library's) and ``decompress_model`` run. Used by tests/fp4/test_fp4_convert.py and
tests/fp8/test_fp8_convert.py (spec/fp4.md FP4-8, spec/fp8.md FP8-8)."""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file


def state_of(path):
    state = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def decompress(path):
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config
    from transformers import CompressedTensorsConfig

    model_config = json.loads((Path(path) / "config.json").read_text())
    config = model_config["quantization_config"]
    dtype = getattr(torch, model_config.get("dtype") or model_config.get("torch_dtype") or "bfloat16")
    compressor = ModelCompressor.from_compression_config(CompressedTensorsConfig.from_dict(config))
    state = state_of(path)
    shapes = {n[:-14]: (t.shape[0], 2 * t.shape[1]) for n, t in state.items() if n.endswith(".weight_packed")}
    shapes |= {n[:-7]: tuple(t.shape) for n, t in state.items() if n.endswith(".weight") and t.ndim == 2}
    model = torch.nn.Module()
    for name, (n_out, n_in) in shapes.items():
        parent = model
        *parents, leaf = name.split(".")
        for part in parents:
            if not hasattr(parent, part):
                parent.add_module(part, torch.nn.Module())
            parent = getattr(parent, part)
        parent.add_module(leaf, torch.nn.Linear(n_in, n_out, bias=f"{name}.bias" in state, dtype=dtype))
    apply_quantization_config(model, compressor.quantization_config)
    compressor.compress_model(model)
    expected = model.state_dict()
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=True)
    compressor.decompress_model(model)
    quantized = [n for n in shapes if f"{n}.weight_packed" in state
                 or state[f"{n}.weight"].dtype == torch.float8_e4m3fn]
    return {n: model.get_submodule(n).weight.detach().float().numpy().tolist() for n in quantized}


if __name__ == "__main__":
    print(json.dumps({p: decompress(p) for p in sys.argv[1:]}))
