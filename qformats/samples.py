"""Tiny sample checkpoints made by the reference encoders (``fixtures/checkpoints/``).

    python -m qformats.samples OUT_DIR      write them all; ``make fixtures-check`` compares bytes

One valid checkpoint per format, plus the two GPTQ failures the field meets most: v2 zeros
labelled ``gptq`` (the vLLM "!!!!" bug) and a v1 file whose zero points of 0 were written by
AutoGPTQ's OR-bleed packer. Every input comes from a fixed seed, so the bytes are reproducible.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from . import __version__
from .formats import awq, ctensors, gptq, q4_k, spqr

__all__ = ["SAMPLES", "write_all"]

MODULES = ("model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj")
SHAPE = (64, 128)  # (out, in): small, yet 4 groups of 32 and whole 16x16 SpQR tiles


def _weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {m: rng.normal(0, 0.02, SHAPE).astype(np.float32) for m in MODULES}


def _write_dir(out: Path, tensors: dict[str, np.ndarray], quantization_config: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "qformats_sample": __version__,
              "quantization_config": quantization_config}
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    # One metadata key only: the safetensors library writes __metadata__ in hash order, and the
    # samples must regenerate byte for byte. The producer is named in config.json instead.
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})


def _gptq_tensors(layers: dict[str, gptq.GPTQLayer]) -> dict[str, np.ndarray]:
    return {f"{m}.{k}": np.ascontiguousarray(v) for m, layer in layers.items() for k, v in layer.tensors.items()}


def _gptq_config(bits: int, sym: bool, fmt: str, desc_act: bool = False) -> dict:
    return {"bits": bits, "group_size": 32, "desc_act": desc_act, "sym": sym, "quant_method": "gptq",
            "checkpoint_format": fmt, "meta": {"quantizer": [f"qformats:{__version__}"]}}


def gptq_v1_sym(out: Path) -> None:
    """Valid: 4-bit symmetric v1, every qzeros word 0x77777777 (GPTQ-8.1)."""
    layers = {m: gptq.quantize(w, bits=4, group_size=32, sym=True, version="v1") for m, w in _weights(1).items()}
    _write_dir(out, _gptq_tensors(layers), _gptq_config(4, True, "gptq"))


def gptq_v2_asym_act_order(out: Path) -> None:
    """Valid: 3-bit asymmetric v2 with act-order g_idx and desc_act (GPTQ-5.3)."""
    rng = np.random.default_rng(2)
    layers = {m: gptq.quantize(w, bits=3, group_size=32, sym=False, version="v2", act_order=rng.random(SHAPE[1]))
              for m, w in _weights(2).items()}
    _write_dir(out, _gptq_tensors(layers), _gptq_config(3, False, "gptq_v2", desc_act=True))


def gptq_v2_labelled_v1(out: Path) -> None:
    """Invalid: symmetric v2 zeros (0x88888888) under checkpoint_format 'gptq' (GPTQ-8.3)."""
    layers = {m: gptq.quantize(w, bits=4, group_size=32, sym=True, version="v2") for m, w in _weights(3).items()}
    _write_dir(out, _gptq_tensors(layers), _gptq_config(4, True, "gptq"))


def gptq_v1_zero_underflow(out: Path) -> None:
    """Invalid: asymmetric v1 whose zero points of 0 AutoGPTQ's packer OR-bled (GPTQ-3.4, 4.1)."""
    layers = {}
    for m, w in _weights(4).items():
        w = w.copy()
        w[:8, :32] = np.abs(w[:8, :32])  # all-positive groups: min-max RTN gives zero point 0 there
        v2 = gptq.quantize(w, bits=4, group_size=32, sym=False, version="v2")
        codes, zeros = gptq.unpack(v2, bits=4, version="v2")
        layers[m] = gptq.pack(codes, zeros, v2.scales, bits=4, g_idx=v2.g_idx, version="v1", writer="autogptq")
    _write_dir(out, _gptq_tensors(layers), _gptq_config(4, False, "gptq"))


def spqr_csr(out: Path) -> None:
    """Valid: SpQR release layout, CSR outliers, as HuggingFace `quant_method: spqr` checkpoints hold it."""
    tensors, shapes = {}, {}
    for m, w in _weights(5).items():
        layer = spqr.quantize(w)
        for k, v in layer.tensors.items():
            tensors[f"{m}.{k}"] = np.ascontiguousarray(v)
            shapes[f"{m}.{k}.shape"] = int(v.size)
    _write_dir(out, tensors, {"quant_method": "spqr", "bits": 3, "beta1": 16, "beta2": 16, "shapes": shapes})


def _v2_layers(seed: int, sym: bool) -> dict[str, gptq.GPTQLayer]:
    return {m: gptq.quantize(w, bits=4, group_size=32, sym=sym, version="v2") for m, w in _weights(seed).items()}


def _prefixed(module: str, tensors) -> dict[str, np.ndarray]:
    return {f"{module}.{k}": np.ascontiguousarray(v) for k, v in tensors.items()}


def _config_for(to: str, *, symmetric: bool) -> dict:
    from .convert import quantization_config

    return quantization_config(to, bits=4, group_size=32, symmetric=symmetric)


def awq_gemm(out: Path) -> None:
    """Valid: AWQ GEMM, 4-bit, group size 32, as AutoAWQ writes it (AWQ-2, AWQ-5)."""
    tensors = {}
    for m, layer in _v2_layers(6, sym=False).items():
        tensors |= _prefixed(m, awq.from_gptq(layer, bits=4, version="v2", group_size=32).tensors)
    _write_dir(out, tensors, _config_for("awq_gemm", symmetric=False))


def awq_gemv_bytes_labelled_gemm(out: Path) -> None:
    """Invalid: codes packed along the input axis (GPTQ / AutoAWQ GEMV) under version 'gemm' (AWQ-6.2)."""
    tensors = {}
    for m, layer in _v2_layers(7, sym=False).items():
        tensors |= _prefixed(m, {k: v for k, v in layer.tensors.items() if k != "g_idx"})
    _write_dir(out, tensors, _config_for("awq_gemm", symmetric=False))


def _ct_tensors(seed: int) -> dict[str, np.ndarray]:
    tensors = {}
    for m, layer in _v2_layers(seed, sym=False).items():
        tensors |= _prefixed(m, ctensors.from_gptq(layer, bits=4, version="v2", group_size=32).tensors)
    return tensors


def ctensors_w4_asym(out: Path) -> None:
    """Valid: compressed-tensors pack-quantized, 4-bit asymmetric, group 32, as ModelCompressor writes it (CT-2, CT-5)."""
    _write_dir(out, _ct_tensors(8), _config_for("compressed_tensors", symmetric=False))


def ctensors_nan_scale(out: Path) -> None:
    """Invalid: the same layout with a NaN in one weight_scale (CT-3.3)."""
    tensors = _ct_tensors(9)
    name = f"{MODULES[1]}.weight_scale"
    tensors[name] = tensors[name].copy()
    tensors[name][17, 2] = np.nan
    _write_dir(out, tensors, _config_for("compressed_tensors", symmetric=False))


def _gguf_string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def _write_gguf(out: Path, tensors: list[tuple[str, int, int, np.ndarray]]) -> None:
    """A GGUF v3 file of ``(name, ggml type id, n, uint8 rows)`` tensors, 32-byte aligned (GGUF-1 .. GGUF-5)."""
    alignment, u32_type, str_type = 32, 4, 8
    kv = [("general.architecture", str_type, _gguf_string("llama")),
          ("general.alignment", u32_type, struct.pack("<I", alignment))]
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    header += b"".join(_gguf_string(k) + struct.pack("<I", t) + v for k, t, v in kv)
    offset, data, pad = 0, b"", 0
    for name, type_id, n, blocks in tensors:
        header += _gguf_string(name) + struct.pack("<IQQIQ", 2, n, blocks.shape[0], type_id, offset)
        payload = blocks.tobytes()
        pad = -len(payload) % alignment
        data += payload + b"\0" * pad
        offset += len(payload) + pad
    header += b"\0" * (-len(header) % alignment)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(header + data[: len(data) - pad])


def q4_k_gguf(out: Path) -> None:
    """Valid: a GGUF v3 file with two q4_K tensors made by the reference encoder (Q4K, GGUF)."""
    rows = [(m.replace("model.layers.0.", "blk.0."), q4_k.quantize(_weights(6)[m][:, :].repeat(2, axis=1)))
            for m in MODULES]  # n = 256: one super-block per row
    _write_gguf(out, [(name, 12, 256, blocks) for name, blocks in rows])


def _q4_k_m_tensors() -> list[tuple[str, int, int, np.ndarray]]:
    """What llama-quantize writes for Q4_K_M (GGML-7): q4_K, q6_K for attn_v / ffn_down / output, q5_0 and
    q8_0 where a row is not a multiple of 256, F32 norms; every block by qformats' reference encoders."""
    from .containers.ggml_types import GGML_TYPES
    from .formats import ggml

    ids = {t.name.lower(): t.type_id for t in GGML_TYPES.values()}
    rng = np.random.default_rng(11)
    plan = [("token_embd.weight", "q6_k", 512, 32), ("blk.0.attn_q.weight", "q4_k", 512, 64),
            ("blk.0.attn_v.weight", "q6_k", 512, 16), ("blk.0.ffn_up.weight", "q4_k", 512, 96),
            ("blk.0.ffn_down.weight", "q6_k", 512, 64), ("blk.0.ffn_gate.weight", "q5_0", 480, 16),
            ("blk.0.attn_k.weight", "q8_0", 480, 16), ("output.weight", "q6_k", 512, 32)]
    tensors = [(name, ids[t], n, ggml.quantize(t, (rng.standard_normal((rows, n)) * 0.02).astype(np.float32)))
               for name, t, n, rows in plan]
    norm = (1 + 0.1 * rng.standard_normal((1, 512))).astype(np.float32).view(np.uint8)
    return tensors + [("blk.0.attn_norm.weight", 0, 512, norm)]


def q4_k_m_gguf(out: Path) -> None:
    """Valid: a Q4_K_M-like GGUF file: q4_K, q6_K, q5_0, q8_0 and F32 tensors, every one checked (GGML-3.5)."""
    _write_gguf(out, _q4_k_m_tensors())


def ctensors_w3_per_word_0_17(out: Path) -> None:
    """Valid, with a warning: 3-bit asymmetric pack-quantized in compressed-tensors <= 0.17's per-word layout
    (10 whole values a word, CT-2.6), which compressed-tensors 0.18 and later decode to other weights."""
    from .convert import quantization_config

    rng = np.random.default_rng(10)
    groups = (SHAPE[0], SHAPE[1] // 32)
    tensors = {}
    for m in MODULES:
        layer = ctensors.pack(rng.integers(-4, 4, SHAPE), rng.uniform(2 ** -10, 2 ** -6, groups).astype(np.float16),
                              num_bits=3, group_size=32, zero_points=rng.integers(-4, 4, groups), layout="word")
        tensors |= _prefixed(m, layer.tensors)
    config = quantization_config("compressed_tensors", bits=3, group_size=32, symmetric=False)
    _write_dir(out, tensors, {**config, "version": "0.17.1"})


def q4_k_m_nan_scale_gguf(out: Path) -> None:
    """Invalid: the same file with a NaN d in block 1 of row 5 of a q6_K tensor (GGML-3.1)."""
    tensors = _q4_k_m_tensors()
    name, type_id, n, blocks = tensors[2]                       # blk.0.attn_v.weight, q6_K: d is the last 2 bytes
    blocks = blocks.copy()
    blocks[5, 210 + 208:210 + 210] = [0x00, 0x7E]
    tensors[2] = (name, type_id, n, blocks)
    _write_gguf(out, tensors)


def _bnb_tensors(module: str, w: np.ndarray, quant_type: str, nested: bool) -> dict[str, np.ndarray]:
    """One Linear4bit as bitsandbytes saves it (BNB-1.1): packed codes, absmax (double-quantized when
    ``nested``), quant_map, the nested state and the quant_state JSON bytes, keys in as_dict's order."""
    from .formats import bnb
    from .formats.bnb.cases import STORED_MAPS

    packed, absmax = bnb.quantize_4bit(w, quant_type=quant_type, blocksize=64)
    state: dict = {"quant_type": quant_type, "blocksize": 64, "dtype": "bfloat16", "shape": list(w.shape)}
    out = {f"{module}.weight": packed, f"{module}.weight.quant_map": STORED_MAPS[quant_type]}
    if nested:
        codes, nested_absmax, offset = bnb.quantize_absmax(absmax)
        out |= {f"{module}.weight.absmax": codes, f"{module}.weight.nested_absmax": nested_absmax,
                f"{module}.weight.nested_quant_map": bnb.dynamic_map()}
        state |= {"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": offset}
    else:
        out[f"{module}.weight.absmax"] = absmax
    out[f"{module}.weight.quant_state.bitsandbytes__{quant_type}"] = np.frombuffer(json.dumps(state).encode(), np.uint8)
    return out


def _bnb_config(quant_type: str, nested: bool) -> dict:
    return {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False, "_load_in_4bit": True,
            "_load_in_8bit": False, "bnb_4bit_quant_type": quant_type, "bnb_4bit_use_double_quant": nested,
            "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8", "llm_int8_threshold": 6.0,
            "llm_int8_skip_modules": None, "llm_int8_has_fp16_weight": False, "llm_int8_enable_fp32_cpu_offload": False}


def bnb_nf4_dq(out: Path) -> None:
    """Valid: bitsandbytes NF4 with double quantization, blocksize 64, as transformers saves it (BNB-1.1, BNB-4)."""
    tensors = {k: v for m, w in _weights(11).items() for k, v in _bnb_tensors(m, w, "nf4", True).items()}
    _write_dir(out, tensors, _bnb_config("nf4", True))


def bnb_fp4_nan_absmax(out: Path) -> None:
    """Invalid: bitsandbytes FP4 with a NaN absmax in block 3 of q_proj, which bitsandbytes decodes to NaN (BNB-3.4)."""
    tensors = {k: v for m, w in _weights(12).items() for k, v in _bnb_tensors(m, w, "fp4", False).items()}
    absmax = tensors[f"{MODULES[0]}.weight.absmax"].copy()
    absmax[3] = np.nan
    tensors[f"{MODULES[0]}.weight.absmax"] = absmax
    _write_dir(out, tensors, _bnb_config("fp4", False))


def _write_typed(out: Path, entries: list[tuple[str, str, tuple[int, ...], np.ndarray]], quantization_config: dict) -> None:
    """Like :func:`_write_dir`, for tensors whose safetensors dtype NumPy has no name for (F8_E4M3 as its bytes)."""
    from .convert import write_safetensors

    _write_dir(out, {}, quantization_config)
    write_safetensors(out / "model.safetensors", entries, metadata={"format": "pt"})


def _fp8_block_entries(seed: int) -> list[tuple[str, str, tuple[int, ...], np.ndarray]]:
    from .formats.fp8 import encode

    entries = []
    for m, w in _weights(seed).items():
        layer = encode.quantize(w, strategy="block", block=(32, 64))
        entries += [(f"{m}.weight", "F8_E4M3", SHAPE, layer["weight"]),
                    (f"{m}.weight_scale_inv", "F32", layer["weight_scale"].shape, layer["weight_scale"])]
    return entries


FP8_DEEPSEEK_CONFIG = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                       "weight_block_size": [32, 64]}


def fp8_block_deepseek(out: Path) -> None:
    """Valid: DeepSeek-V3 / transformers ``fp8``, E4M3FN weights and a float32 ``weight_scale_inv`` per 32x64
    block (FP8-2.1), made by the reference quantizer (FP8-5.3)."""
    _write_typed(out, _fp8_block_entries(13), FP8_DEEPSEEK_CONFIG)


def fp8_block_nan_byte(out: Path) -> None:
    """Invalid: the same layout with the E4M3FN NaN byte 0x7F at row 3, column 5 of down_proj, which every reader
    decodes to NaN (FP8-6.5); writers clamp to +-448 and never write it."""
    entries = _fp8_block_entries(14)
    name, dtype, shape, codes = entries[2]
    codes = codes.copy()
    codes[3, 5] = 0x7F
    entries[2] = (name, dtype, shape, codes)
    _write_typed(out, entries, FP8_DEEPSEEK_CONFIG)


def _fp4_config(fmt: str) -> dict:
    """compressed-tensors 0.20.0's config for its NVFP4 / MXFP4 presets (FP4-5.1), weights only."""
    nv = fmt == "nvfp4-pack-quantized"
    weights = {"dynamic": False, "group_size": 16 if nv else 32, "num_bits": 4, "observer": "static_minmax",
               "scale_dtype": "torch.float8_e4m3fn" if nv else "torch.uint8", "strategy": "tensor_group" if nv else "group",
               "symmetric": True, "type": "float"}
    return {"config_groups": {"group_0": {"format": fmt, "input_activations": None, "output_activations": None,
                                          "targets": ["Linear"], "weights": weights}},
            "format": fmt, "ignore": ["lm_head"], "quant_method": "compressed-tensors",
            "quantization_status": "compressed", "version": "0.20.0"}


def nvfp4_ct(out: Path) -> None:
    """Valid: compressed-tensors NVFP4 (FP4-2.1): E2M1 codes, UE4M3 scales per 16, a float32 global scale, made
    by the reference quantizer (FP4-3.9)."""
    from .formats.fp4 import encode

    entries = []
    for m, w in _weights(15).items():
        packed, scale, global_scale = encode.nvfp4(w)
        entries += [(f"{m}.weight_packed", "U8", packed.shape, packed),
                    (f"{m}.weight_scale", "F8_E4M3", scale.shape, scale),
                    (f"{m}.weight_global_scale", "F32", (1,), global_scale)]
    _write_typed(out, entries, _fp4_config("nvfp4-pack-quantized"))


def mxfp4_ct_nan_scale(out: Path) -> None:
    """Invalid: compressed-tensors MXFP4 with the E8M0 scale byte 0xFF (NaN in OCP MX v1.0) in block 2 of row 7
    of q_proj, which compressed-tensors, transformers and ModelOpt decode to inf or 2^127 (FP4-3.4)."""
    from .formats.fp4 import encode

    tensors = {}
    for m, w in _weights(16).items():
        packed, scale = encode.mxfp4(w)
        tensors |= {f"{m}.weight_packed": packed, f"{m}.weight_scale": scale}
    tensors[f"{MODULES[0]}.weight_scale"][7, 2] = 0xFF
    _write_dir(out, tensors, _fp4_config("mxfp4-pack-quantized"))


# name -> (writer, expected verdict, finding codes the validator must report)
SAMPLES = {
    "gptq_v1_sym_4bit": (gptq_v1_sym, "valid", []),
    "gptq_v2_asym_3bit_actorder": (gptq_v2_asym_act_order, "valid", []),
    "gptq_v2_zeros_labelled_gptq": (gptq_v2_labelled_v1, "invalid", ["gptq.label.mismatch"]),
    "gptq_v1_zero_underflow_autogptq": (gptq_v1_zero_underflow, "invalid", ["gptq.zero.v1_unrepresentable"]),
    "spqr_csr": (spqr_csr, "valid", []),
    "q4_k.gguf": (q4_k_gguf, "valid", []),
    "q4_k_m.gguf": (q4_k_m_gguf, "valid", []),
    "q4_k_m_nan_scale.gguf": (q4_k_m_nan_scale_gguf, "invalid", ["ggml.scale.nonfinite"]),
    "awq_gemm": (awq_gemm, "valid", []),
    "awq_gemv_bytes_labelled_gemm": (awq_gemv_bytes_labelled_gemm, "invalid", ["awq.label.mismatch"]),
    "ctensors_w4_asym": (ctensors_w4_asym, "valid", []),
    "ctensors_nan_scale": (ctensors_nan_scale, "invalid", ["ctensors.scales.nonfinite"]),
    "ctensors_w3_per_word_0_17": (ctensors_w3_per_word_0_17, "valid", []),
    "bnb_nf4_dq": (bnb_nf4_dq, "valid", []),
    "bnb_fp4_nan_absmax": (bnb_fp4_nan_absmax, "invalid", ["bnb.absmax.nonfinite"]),
    "fp8_block_deepseek": (fp8_block_deepseek, "valid", []),
    "fp8_block_nan_byte": (fp8_block_nan_byte, "invalid", ["fp8.weight.nan"]),
    "nvfp4_ct": (nvfp4_ct, "valid", []),
    "mxfp4_ct_nan_scale": (mxfp4_ct_nan_scale, "invalid", ["fp4.scale.e8m0_nan"]),
}


CLAUSES = {
    "gptq_v1_sym_4bit": ["GPTQ-2.2", "GPTQ-3.3", "GPTQ-8.1", "QF-5.1"],
    "gptq_v2_asym_3bit_actorder": ["GPTQ-2.3", "GPTQ-5.3", "GPTQ-8.2", "QF-5.1"],
    "gptq_v2_zeros_labelled_gptq": ["GPTQ-8.1", "GPTQ-8.3"],
    "gptq_v1_zero_underflow_autogptq": ["GPTQ-3.4", "GPTQ-4.1", "GPTQ-8.5"],
    "spqr_csr": ["SPQR-2.1", "QF-5.1"],
    "q4_k.gguf": ["GGUF-1.1", "QF-5.1"],
    "q4_k_m.gguf": ["GGML-3.5", "GGML-7"],
    "q4_k_m_nan_scale.gguf": ["GGML-3.1"],
    "awq_gemm": ["AWQ-2.1", "AWQ-2.3", "AWQ-5.1", "QF-5.1"],
    "awq_gemv_bytes_labelled_gemm": ["AWQ-6.2"],
    "ctensors_w4_asym": ["CT-2.1", "CT-2.5", "CT-5.1", "QF-5.1"],
    "ctensors_nan_scale": ["CT-3.3"],
    "ctensors_w3_per_word_0_17": ["CT-2.6"],
    "bnb_nf4_dq": ["BNB-1.1", "BNB-4.1", "BNB-5.1", "QF-5.1"],
    "bnb_fp4_nan_absmax": ["BNB-3.4"],
    "fp8_block_deepseek": ["FP8-2.1", "FP8-5.1", "FP8-5.3", "QF-5.1"],
    "fp8_block_nan_byte": ["FP8-6.5"],
    "nvfp4_ct": ["FP4-2.1", "FP4-3.1", "FP4-3.9", "QF-5.1"],
    "mxfp4_ct_nan_scale": ["FP4-3.4"],
}
FEATURES = {
    "gptq_v1_sym_4bit": ["bits:4", "sym", "version:v1"],
    "gptq_v2_asym_3bit_actorder": ["bits:3", "asym", "version:v2", "act_order"],
    "gptq_v2_zeros_labelled_gptq": ["bits:4", "sym", "mislabelled"],
    "gptq_v1_zero_underflow_autogptq": ["bits:4", "asym", "version:v1", "zero:0", "writer:autogptq"],
    "spqr_csr": ["outliers:csr"],
    "q4_k.gguf": ["container:gguf"],
    "q4_k_m.gguf": ["container:gguf", "types:q4_k,q6_k,q5_0,q8_0,f32"],
    "q4_k_m_nan_scale.gguf": ["container:gguf", "scale:nan"],
    "awq_gemm": ["bits:4", "asym", "version:gemm"],
    "awq_gemv_bytes_labelled_gemm": ["bits:4", "asym", "mislabelled"],
    "ctensors_w4_asym": ["bits:4", "asym", "strategy:group"],
    "ctensors_nan_scale": ["bits:4", "asym", "scale:nan"],
    "ctensors_w3_per_word_0_17": ["bits:3", "asym", "layout:per-word", "writer:compressed-tensors 0.17"],
    "bnb_nf4_dq": ["quant_type:nf4", "blocksize:64", "double_quant"],
    "bnb_fp4_nan_absmax": ["quant_type:fp4", "blocksize:64", "absmax:nan"],
    "fp8_block_deepseek": ["element:e4m3fn", "strategy:block", "scale:weight_scale_inv"],
    "fp8_block_nan_byte": ["element:e4m3fn", "strategy:block", "weight:nan"],
    "nvfp4_ct": ["element:e2m1", "scale:ue4m3", "global_scale"],
    "mxfp4_ct_nan_scale": ["element:e2m1", "scale:e8m0", "scale:nan"],
}


def _format_of(name: str) -> str:
    if name.endswith(".gguf"):
        return "q4_k" if name == "q4_k.gguf" else "ggml"
    family = name.split("_", 1)[0]
    return "fp4" if family in ("nvfp4", "mxfp4") else family


FORMATS = {name: _format_of(name) for name in SAMPLES}


def manifest_entries(root: Path) -> list[dict]:
    """Manifest cases for the samples under ``root`` (fixtures/checkpoints)."""
    from .fixtures import file_entry

    entries = []
    for name, (writer, verdict, codes) in SAMPLES.items():
        path = root / name
        files = sorted(p for p in (path.rglob("*") if path.is_dir() else [path]) if p.is_file())
        entries.append({
            "id": f"samples/{name}", "format": FORMATS[name], "kind": "checkpoint",
            "clauses": CLAUSES[name], "features": FEATURES[name],
            "files": [file_entry(root.parent, f.relative_to(root.parent).as_posix()) for f in files],
            "provenance": {"source": "qformats-reference", "generator": f"qformats.samples:{writer.__name__}",
                           "version": __version__},
            "expect": {"verdict": verdict, "codes": codes}, "tolerance": "exact",
            "description": (writer.__doc__ or "").strip().splitlines()[0],
        })
    return entries


def write_all(root: Path) -> list[Path]:
    """Write every sample under ``root``; returns the paths written."""
    paths = []
    for name, (writer, _, _) in SAMPLES.items():
        writer(root / name)
        paths.append(root / name)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/checkpoints")
    for p in write_all(target):
        print(p)
    if "--manifest" in sys.argv:  # record the cases in the manifest beside the samples
        from .fixtures import write_generated

        write_generated(target.parent, {}, manifest_entries(target))
