"""Lossless conversion between compressed-tensors FP8 block and DeepSeek / transformers ``fp8`` (spec/fp8.md FP8-8).

    ds = fp8.convert.ct_to_deepseek(layer, block=(128, 128))           # weight_scale -> weight_scale_inv, float32
    ct = fp8.convert.deepseek_to_ct(layer, block=(128, 128), scale_dtype="bfloat16")   # refused if inexact

Both store the same E4M3FN bytes and one scale per ``[bn, bk]`` block over a ceil grid, multiplied (FP8-1.2,
FP8-2.1); they differ in the scale's name and dtype: DeepSeek's ``weight_scale_inv`` is float32, compressed-tensors
writes the model's dtype. Widening a bfloat16 or float16 scale to float32 is exact; narrowing is done only where
every scale is exactly representable, else refused with the largest weight error (``fp8.convert.inexact``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from . import codec

__all__ = ["ct_to_deepseek", "deepseek_to_ct", "narrowed", "plan"]

def _refuse(tensor: str, constraint: str, actual: Any) -> Exception:
    return fail("fp8.convert.unrepresentable", tensor, constraint, actual)


def _to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, nearest, ties to even (finite inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def narrowed(scale: np.ndarray, dtype: str) -> np.ndarray:
    """The float32 scales rounded to ``dtype`` (float32 values: bfloat16 widened back exactly)."""
    s = np.asarray(scale, np.float32)
    if dtype == "float32":
        return s
    if dtype == "float16":
        with np.errstate(over="ignore"):
            return s.astype(np.float16).astype(np.float32)
    return codec.bf16_to_f32(_to_bf16_bits(s))


def ct_to_deepseek(layer: Mapping[str, Any], *, block: tuple[int, int]) -> dict[str, np.ndarray]:
    """FP8-8.1: a compressed-tensors block module (``weight`` bytes, ``weight_scale`` as float32 values of any
    stored dtype) as DeepSeek stores it: the same bytes, ``weight_scale_inv`` float32 (widening is exact)."""
    weight, scale = np.asarray(layer["weight"]), np.asarray(layer["weight_scale"], np.float32)
    _grid(weight, scale, block, "weight_scale")
    if "input_scale" in layer:
        raise _refuse("input_scale", "absent: fp8's activation_scheme dynamic has no static input scale (FP8-8.1)",
                      "present")
    return {"weight": weight, "weight_scale_inv": scale}


def deepseek_to_ct(layer: Mapping[str, Any], *, block: tuple[int, int],
                   scale_dtype: str = "float32") -> dict[str, np.ndarray]:
    """FP8-8.1: a DeepSeek block module as compressed-tensors stores it, the scale in ``scale_dtype``, the model's
    dtype compressed-tensors reads it in (float32 by default: exact). A narrower dtype is refused with the largest
    weight change when a scale would round. compressed-tensors needs the block's columns to divide K (FP8-1.3)."""
    weight, scale = np.asarray(layer["weight"]), np.asarray(layer["weight_scale_inv"], np.float32)
    _grid(weight, scale, block, "weight_scale_inv")
    if weight.shape[1] % block[1]:
        raise _refuse("weight", f"in_features a multiple of the block's {block[1]} columns: compressed-tensors "
                      "0.20.0 pads rows only (initialize.py, FP8-1.3)", weight.shape[1])
    s = narrowed(scale, scale_dtype)
    _same_weights(weight, scale, s, block, scale_dtype)
    return {"weight": weight, "weight_scale": s}


def _grid(weight: np.ndarray, scale: np.ndarray, block: tuple[int, int], name: str) -> None:
    if weight.ndim != 2 or scale.shape != codec.grid(*weight.shape, "block", block=block):
        raise fail("fp8.scale.shape", name, f"the ceil grid of {list(block)} blocks over the weight (FP8-1.3)",
                   f"{tuple(scale.shape)} for weight {tuple(weight.shape)}")


def _same_weights(weight: np.ndarray, before: np.ndarray, after: np.ndarray, block: tuple[int, int],
                  dtype: str) -> None:
    """FP8-8.1: refused when a narrowed scale moves a weight (by ``|e4m3| * |s - s'|``), naming the largest."""
    if np.array_equal(before, after):
        return
    old = codec.dequantize({"weight": weight, "weight_scale": before}, strategy="block", block=block)
    new = codec.dequantize({"weight": weight, "weight_scale": after}, strategy="block", block=block)
    with np.errstate(invalid="ignore"):
        err = np.abs(old.astype(np.float64) - new.astype(np.float64))
    moved = np.nan_to_num(err, nan=0.0)
    at = [int(i) for i in np.unravel_index(int(np.argmax(moved)), moved.shape)]
    raise fail("fp8.convert.inexact", "weight_scale", f"scales {dtype} holds exactly: compressed-tensors loads them "
               f"in the model's dtype, {dtype}, which would change weights (FP8-8.1)",
               f"{int(np.count_nonzero(before != after))} scales round, "
               f"{int(np.count_nonzero(moved))} weights change, largest by {float(moved.max())!r} at {at}")


# -- checkpoints (FP8-8.2) ---------------------------------------------------------------------------------------

def plan(ckpt: Any, groups: list, to: str, make_plan: Any) -> Any:
    """FP8-8.2: every FP8 module of ``ckpt`` under ``to`` (``fp8`` from compressed-tensors block,
    ``compressed_tensors`` from DeepSeek), every refusal raised here, before anything is written."""
    from .layout import ModuleScheme, module_schemes, parse_config

    config = parse_config(ckpt.config)
    schemes = module_schemes(config, [g.name for g in groups])
    found = sorted({(s.layout, s.strategy) for s in schemes.values() if isinstance(s, ModuleScheme)})
    blocks = {s.block for s in schemes.values() if isinstance(s, ModuleScheme)}
    route = {(("ct", "block"), "fp8"), (("deepseek", "block"), "compressed_tensors")}
    if len(found) != 1 or (found[0], to) not in route or len(blocks) != 1:
        raise fail("argument.invalid", "to", "fp8 for a compressed-tensors block checkpoint, compressed_tensors for "
                   "a DeepSeek / transformers fp8 block checkpoint, one block size throughout (FP8-8.2)",
                   f"{to} for {', '.join(f'{lay} {strat}' for lay, strat in found) or 'no FP8 module'}"
                   f"{'' if len(blocks) < 2 else ' with several block sizes'}")
    block = tuple(next(iter(blocks)))
    excluded = _excluded(ckpt, groups)
    dtype = _model_dtype(ckpt, excluded) if to == "compressed_tensors" else "float32"
    units = [(ckpt.file_of(g.tensors["weight"]) if "weight" in g.tensors else ckpt.files[0],
              _unit(ckpt, g, found[0][0], block, dtype)) for g in groups]
    for _, make in units:          # pass 1: every refusal before anything is written
        make()
    target = _deepseek_config(block, excluded) if to == "fp8" else _ct_config(block, excluded)
    return make_plan(dropped={f for g in groups for s, f in g.tensors.items() if s != "bias"}, units=units,
                     config=target, side_files={}, layers=len(groups))


def _model_dtype(ckpt: Any, excluded: list[str]) -> str:
    """FP8-8.2: the model's dtype, which compressed-tensors 0.20.0 gives the scale parameters it loads into
    (``initialize.py``: the observed weight's dtype): config.json's ``dtype`` (``torch_dtype`` before transformers
    5), else the one dtype of the unquantized 2-D weights, else float32."""
    model = ckpt.model_config or {}
    named = model.get("dtype", model.get("torch_dtype"))
    if named in ("bfloat16", "float16", "float32"):
        return named
    dtypes = {ckpt.tensor_info(f"{m}.weight").dtype for m in excluded}
    names = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}
    return names.get(next(iter(dtypes)), "float32") if len(dtypes) == 1 else "float32"


def _unit(ckpt: Any, group: Any, layout: str, block: tuple[int, int], dtype: str) -> Any:
    """One module: checked as validate checks it (a defect is refused, never laundered), then moved."""
    from .layers import CT_SIDE, INV_SIDE, module_tensors
    from .layout import module_schemes, parse_config

    def make() -> list[tuple[str, str, np.ndarray]]:
        file = ckpt.file_of(next(iter(group.tensors.values())))
        side = CT_SIDE if layout == "ct" else INV_SIDE
        _, findings = side.check(ckpt, [group], False, None)
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            raise fail(errors[0].code, errors[0].tensor, "a conforming FP8 module to convert (" + errors[0].clause
                       + ")", errors[0].message, file=file)
        scheme = module_schemes(parse_config(ckpt.config), [group.name])[group.name]
        t = module_tensors(ckpt, group, scheme)
        try:
            out = ct_to_deepseek(t, block=block) if layout == "ct" else deepseek_to_ct(t, block=block,
                                                                                        scale_dtype=dtype)
        except QFormatsError as err:
            raise err.within(group.name).with_file(file) from None
        scale = "weight_scale_inv" if layout == "ct" else "weight_scale"
        return [(f"{group.name}.weight", "F8_E4M3", out["weight"]),
                (f"{group.name}.{scale}", *_stored(out[scale], dtype))]

    return make


def _stored(scale: np.ndarray, dtype: str) -> tuple[str, np.ndarray]:
    """(safetensors dtype, array) of float32 scale values exact in ``dtype``: bfloat16 as its raw bits."""
    if dtype == "bfloat16":
        return "BF16", _to_bf16_bits(scale)
    return ("F16", scale.astype(np.float16)) if dtype == "float16" else ("F32", np.asarray(scale, np.float32))


def _excluded(ckpt: Any, groups: list) -> list[str]:
    """Modules holding a 2-D unquantized ``weight``: transformers' ``modules_to_not_convert``, compressed-tensors'
    ``ignore`` (as qformats' other conversions list them, CT-4.4)."""
    from ...convert import _unquantized

    return _unquantized(ckpt, {g.name for g in groups}, "ctensors")


def _deepseek_config(block: tuple[int, ...], excluded: list[str]) -> dict[str, Any]:
    """transformers 5.24.0 ``FineGrainedFP8Config`` as ``Fp8Quantize`` writes it (fixtures/third_party/fp8)."""
    return {"activation_scheme": "dynamic", "dequantize": False, "expert_dtype": "fp8", "modules_to_convert": None,
            "modules_to_not_convert": excluded, "quant_method": "fp8", "scale_fmt": "float",
            "weight_block_size": list(block)}


def _ct_config(block: tuple[int, ...], excluded: list[str]) -> dict[str, Any]:
    """compressed-tensors 0.20.0's preset FP8_BLOCK as ``ModelCompressor.update_config`` writes it (FP8-1.2)."""
    from ...convert import CT_VERSION

    weights = {"block_structure": list(block), "dynamic": False, "group_size": None, "num_bits": 8,
               "strategy": "block", "symmetric": True, "type": "float"}
    acts = {"dynamic": True, "group_size": block[1], "num_bits": 8, "strategy": "group", "symmetric": True,
            "type": "float"}
    group = {"format": "float-quantized", "input_activations": acts, "output_activations": None,
             "targets": ["Linear"], "weights": weights}
    return {"config_groups": {"group_0": group}, "format": "float-quantized", "global_compression_ratio": None,
            "ignore": excluded, "kv_cache_scheme": None, "moe_sparsity_config": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
            "transform_config": {}, "version": CT_VERSION}
