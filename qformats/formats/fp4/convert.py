"""Lossless conversion between the FP4 layouts where they agree (spec/fp4.md FP4-8).

    ct = fp4.convert.modelopt_to_ct_nvfp4(layer)          # names, reciprocal global scale (FP4-8.1)
    experts = fp4.convert.gpt_oss_to_ct(blocks, scales)   # one compressed-tensors MXFP4 module per expert (FP4-8.3)
    gguf = fp4.convert.to_gguf_mxfp4(packed, scales)      # GGUF mxfp4 blocks: nibble permutation (FP4-8.4)

Every layout stores the same E2M1 codes and the same block-scale bytes; they differ in names, shapes, the NVFP4
global scale (compressed-tensors divides by ``weight_global_scale``, ModelOpt multiplies by its reciprocal
``weight_scale_2``) and GGUF's nibble order. A conversion moves bytes, never re-quantizes; the one value it
computes, the reciprocal global scale, is kept only when each library's decode of the result is the source's, value
for value (FP4-8.1), else refused with the largest error (``fp4.convert.inexact``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from . import codec

__all__ = ["ct_to_modelopt_nvfp4", "modelopt_to_ct_nvfp4", "rename_mxfp4", "gpt_oss_to_ct", "ct_to_gpt_oss",
           "to_gguf_mxfp4", "from_gguf_mxfp4", "reciprocal", "plan"]

F32 = np.float32
GGUF_BLOCK = 1 + 32 // 2          # block_mxfp4: e (1 byte) | qs[16] (MX-1.1)


def _refuse(tensor: str, constraint: str, actual: Any) -> Exception:
    return fail("fp4.convert.unrepresentable", tensor, constraint, actual)


def reciprocal(x: Any) -> np.ndarray:
    """``float32(1 / x)``, one rounding: ModelOpt's ``weight_scale_2`` from compressed-tensors' global scale and
    back (FP4-3.6); input scales the same way."""
    return (F32(1) / np.asarray(x, F32).reshape(-1)[0]).astype(F32)


def _same_decode(theirs: np.ndarray, ours: np.ndarray, tensor: str) -> None:
    """FP4-8.1: each library's decode of the converted module equals the source's, value for value (ModelOpt
    decodes code 8 as +0 where compressed-tensors returns -0: equal values); else the largest change."""
    moved = ~((theirs == ours) | (np.isnan(theirs) & np.isnan(ours)))
    if moved.any():
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.where(moved, np.abs(theirs.astype(np.float64) - ours.astype(np.float64)), 0)
        at = [int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape)]
        raise fail("fp4.convert.inexact", tensor, "the same weights after conversion: the reciprocal global scale "
                   "must give every weight the value its source library decodes (FP4-8.1)",
                   f"{int(moved.sum())} weights change, largest by {float(err.max())!r} at {at}")


def ct_to_modelopt_nvfp4(layer: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A compressed-tensors NVFP4 module (``weight_packed``, ``weight_scale`` bytes, ``weight_global_scale``,
    optional ``input_global_scale``) as ModelOpt writes it (FP4-8.1): the same bytes, ``weight_scale_2`` and
    ``input_scale`` the float32 reciprocals, shape ``()``. Refused when a weight would decode otherwise."""
    packed, scale = np.asarray(layer["weight_packed"]), np.asarray(layer["weight_scale"]).view(np.uint8)
    out = {"weight": packed, "weight_scale": scale, "weight_scale_2": reciprocal(layer["weight_global_scale"])}
    if "input_global_scale" in layer:
        out["input_scale"] = reciprocal(layer["input_global_scale"])
    _same_decode(codec.nvfp4_dequantize(packed, scale, layer["weight_global_scale"]),
                 codec.modelopt_nvfp4_dequantize(packed, scale, out["weight_scale_2"]), "weight_scale_2")
    return out


def modelopt_to_ct_nvfp4(layer: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A ModelOpt NVFP4 module as compressed-tensors writes it (FP4-8.1): ``weight_global_scale`` and
    ``input_global_scale`` the float32 reciprocals, shape ``(1,)``. Refused when a weight would decode otherwise."""
    packed, scale = np.asarray(layer["weight"]), np.asarray(layer["weight_scale"]).view(np.uint8)
    out = {"weight_packed": packed, "weight_scale": scale,
           "weight_global_scale": reciprocal(layer["weight_scale_2"]).reshape(1)}
    if "input_scale" in layer:
        out["input_global_scale"] = reciprocal(layer["input_scale"]).reshape(1)
    _same_decode(codec.modelopt_nvfp4_dequantize(packed, scale, layer["weight_scale_2"]),
                 codec.nvfp4_dequantize(packed, scale, out["weight_global_scale"]), "weight_global_scale")
    return out


def rename_mxfp4(layer: Mapping[str, Any], *, to: str) -> dict[str, np.ndarray]:
    """FP4-8.2: ModelOpt MXFP4 (``weight``) and compressed-tensors MXFP4 (``weight_packed``) hold the same packed
    bytes and E8M0 bytes; ``to`` is ``ct`` or ``modelopt``."""
    packed = layer["weight"] if "weight" in layer else layer["weight_packed"]
    return {"weight_packed" if to == "ct" else "weight": np.asarray(packed),
            "weight_scale": np.asarray(layer["weight_scale"])}


def gpt_oss_to_ct(blocks: Any, scales: Any, bias: Any = None) -> list[dict[str, np.ndarray]]:
    """FP4-8.3: one gpt-oss projection ``(E, N, K/32, 16)`` as E compressed-tensors MXFP4 modules: a block's 16
    bytes are the row's next 16 bytes in the same nibble order, so ``weight_packed`` is the reshape ``(N, K/2)``,
    ``weight_scale`` the expert's ``(N, K/32)``, ``bias`` its row of ``(E, N)``."""
    b = np.asarray(blocks, np.uint8)
    e, n, g, _ = b.shape
    out = [{"weight_packed": np.ascontiguousarray(b[i].reshape(n, g * 16)),
            "weight_scale": np.ascontiguousarray(np.asarray(scales, np.uint8)[i])} for i in range(e)]
    for i, module in enumerate(out if bias is not None else []):
        module["bias"] = np.ascontiguousarray(np.asarray(bias)[i])
    return out


def ct_to_gpt_oss(experts: list[Mapping[str, Any]], tensor: str = "experts") -> dict[str, np.ndarray]:
    """FP4-8.3, the inverse of :func:`gpt_oss_to_ct`: experts 0 .. E-1 of one projection, each with the same
    shapes, stacked; every expert needs its ``bias`` (gpt-oss experts have biases)."""
    shapes = {(np.shape(m["weight_packed"]), np.shape(m["weight_scale"])) for m in experts}
    if len(shapes) != 1:
        raise _refuse(tensor, "experts of one shape each (gpt-oss stacks them, FP4-8.3)", sorted(shapes))
    has_bias = {"bias" in m for m in experts}
    if has_bias != {True}:
        raise _refuse(f"{tensor}.bias", "present in every expert (gpt-oss experts have a bias per output, FP4-2.5)",
                      f"absent in {sum(not ('bias' in m) for m in experts)} of {len(experts)} experts")
    packed = np.stack([np.asarray(m["weight_packed"], np.uint8) for m in experts])
    e, n, half = packed.shape
    return {"blocks": packed.reshape(e, n, half // 16, 16),
            "scales": np.stack([np.asarray(m["weight_scale"], np.uint8) for m in experts]),
            "bias": np.stack([np.asarray(m["bias"]) for m in experts])}


# GGUF mxfp4 (MX-1.1) against the safetensors order (FP4-1.2), one block of 32 codes c(0..31):
#
#   safetensors byte j:  [ c(2j+1) | c(2j) ]        GGUF qs[j]:  [ c(j+16) | c(j) ]        j = 0..15
#   GGUF block:          e (the same E8M0 byte) | qs[16]

def to_gguf_mxfp4(packed: Any, scales: Any) -> np.ndarray:
    """FP4-8.4: MXFP4 rows ``(..., N, K/2)`` with E8M0 scales ``(..., N, K/32)`` as GGUF ``mxfp4`` blocks
    ``(..., N, K/32, 17)`` (a row's blocks are its GGUF row bytes): the same codes and scale byte, nibbles
    permuted."""
    p, s = np.asarray(packed, np.uint8), np.asarray(scales, np.uint8)
    if p.shape[:-1] != s.shape[:-1] or p.shape[-1] != 16 * s.shape[-1]:
        raise _refuse("weight_scale", f"one E8M0 byte per 32 weights of each row of {p.shape} (FP4-2.3)", s.shape)
    codes = codec.unpack(p).reshape(*s.shape, 32)
    out = np.empty((*s.shape, GGUF_BLOCK), np.uint8)
    out[..., 0] = s
    out[..., 1:] = codes[..., :16] | (codes[..., 16:] << 4)
    return out


def from_gguf_mxfp4(blocks: Any) -> tuple[np.ndarray, np.ndarray]:
    """FP4-8.4, the inverse of :func:`to_gguf_mxfp4`: GGUF ``mxfp4`` blocks ``(..., G, 17)`` -> packed
    ``(..., 16 G)`` and E8M0 scales ``(..., G)``."""
    b = np.asarray(blocks, np.uint8)
    if b.ndim < 2 or b.shape[-1] != GGUF_BLOCK:
        raise _refuse("blocks", f"GGUF mxfp4 blocks of {GGUF_BLOCK} bytes, (..., blocks, 17) (MX-1.1)", b.shape)
    qs = b[..., 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)          # element order 0 .. 31
    return codec.pack(codes.reshape(*b.shape[:-2], -1)), np.ascontiguousarray(b[..., 0])


# -- checkpoints (FP4-8.5) ---------------------------------------------------------------------------------------

# (source layout, --to) -> target layout
ROUTES = {("ct_nvfp4", "modelopt"): "modelopt_nvfp4", ("modelopt_nvfp4", "compressed_tensors"): "ct_nvfp4",
          ("ct_mxfp4", "modelopt"): "modelopt_mxfp4", ("modelopt_mxfp4", "compressed_tensors"): "ct_mxfp4",
          ("gpt_oss_mxfp4", "compressed_tensors"): "ct_mxfp4", ("ct_mxfp4", "gpt_oss_mxfp4"): "gpt_oss_mxfp4"}
# safetensors dtype of each written tensor, by suffix (weight_scale: F8_E4M3 for NVFP4, U8 for MXFP4)
ST = {"weight": "U8", "weight_packed": "U8", "weight_global_scale": "F32", "input_global_scale": "F32",
      "weight_scale_2": "F32", "input_scale": "F32", "blocks": "U8", "scales": "U8", "bias": "F32"}
MODELOPT_PRODUCER = {"name": "modelopt", "version": "0.47.0"}     # the ModelOpt release whose layout is written
EXPERT = r"^(?P<parent>.+\.experts)\.(?P<e>\d+)\.(?P<proj>gate_up_proj|down_proj)$"


def plan(ckpt: Any, groups: list, to: str, make_plan: Any) -> Any:
    """FP4-8.5: what every FP4 module of ``ckpt`` becomes under ``to`` (``modelopt``, ``compressed_tensors``,
    ``gpt_oss_mxfp4``), every refusal raised here, before anything is written. ``make_plan`` builds the
    :class:`qformats.convert.Plan` (units of tensors by source file, the target config, side files)."""
    from .layers import decode_module
    from .layout import FP4Scheme, module_schemes

    schemes = module_schemes(ckpt.config, [g.name for g in groups])
    layouts = sorted({s.layout for s in schemes.values() if isinstance(s, FP4Scheme)})
    source = layouts[0] if len(layouts) == 1 else None
    target = ROUTES.get((source, to))
    if target is None:
        raise fail("argument.invalid", "to", "a target this checkpoint converts to losslessly (FP4-8.5): "
                   + (", ".join(t for (s, t) in ROUTES if s == source) or "none, its modules are of several layouts"),
                   f"{to} for {' and '.join(layouts) or 'no FP4 module'}")

    def checked(group: Any) -> dict[str, np.ndarray]:
        """The module's tensors, after every FP4 check (decode_module refuses a defect: nothing is laundered)."""
        try:
            decode_module(ckpt, group)
        except QFormatsError as err:
            raise _named(err, group, ckpt) from None
        return {s: ckpt.tensor(full) for s, full in group.tensors.items()}

    if target == "gpt_oss_mxfp4":
        units = _to_gpt_oss_units(ckpt, groups, checked)
    else:
        units = [(ckpt.file_of(next(iter(g.tensors.values()))), _module_unit(ckpt, g, source, target, checked))
                 for g in groups]
    for _, make in units:       # pass 1: every refusal before anything is written
        make()
    inputs = {_has_input_scale(ckpt, g) for g in groups}
    if len(inputs) > 1:
        raise _refuse("input_global_scale" if source.startswith("ct") else "input_scale", "in every module or in "
                      "none: the written config states one activation scheme (FP4-8.1)", "in some modules only")
    config, side = _target_config(target, _excluded(ckpt, groups), inputs == {True})
    return make_plan(dropped={f for g in groups for f in g.tensors.values()}, units=units, config=config,
                     side_files=side, layers=len(groups))


def _named(err: QFormatsError, group: Any, ckpt: Any) -> QFormatsError:
    """The error naming the module's tensor and its file."""
    file = ckpt.file_of(next(iter(group.tensors.values())))
    return (err.within(group.name) if err.tensor != group.name else err).with_file(err.file or file)


def _has_input_scale(ckpt: Any, group: Any) -> bool:
    return bool({"input_global_scale", "input_scale"} & set(group.tensors))


def _module_unit(ckpt: Any, group: Any, source: str, target: str, checked: Any) -> Any:
    """One module renamed (NVFP4 with its reciprocal global scale, FP4-8.1; MXFP4, FP4-8.2) or split per expert
    (gpt-oss, FP4-8.3): a function returning its (full name, dtype, array) entries."""
    def make() -> list[tuple[str, str, np.ndarray]]:
        t = checked(group)
        try:
            if source == "gpt_oss_mxfp4":
                return _gpt_oss_split(group, t, ckpt)
            if source.endswith("nvfp4"):
                out = ct_to_modelopt_nvfp4(t) if source == "ct_nvfp4" else modelopt_to_ct_nvfp4(t)
            else:
                out = rename_mxfp4(t, to="ct" if target == "ct_mxfp4" else "modelopt")
        except QFormatsError as err:
            raise _named(err, group, ckpt) from None
        scale_dtype = "F8_E4M3" if target.endswith("nvfp4") else "U8"
        entries = [(f"{group.name}.{s}", scale_dtype if s == "weight_scale" else ST[s], a) for s, a in out.items()]
        return entries + _copied(ckpt, group, "bias")

    return make


def _copied(ckpt: Any, group: Any, suffix: str) -> list[tuple[str, str, np.ndarray]]:
    """A tensor carried over byte for byte under its name (a bias), in its stored dtype."""
    full = group.tensors.get(suffix)
    return [] if full is None else [(full, ckpt.tensor_info(full).dtype, ckpt.tensor(full))]


def _gpt_oss_split(group: Any, t: Mapping[str, Any], ckpt: Any) -> list[tuple[str, str, np.ndarray]]:
    """FP4-8.3: ``<experts>.<proj>_*`` -> ``<experts>.<e>.<proj>.weight_packed / weight_scale / bias``; the bias
    keeps its stored dtype."""
    out = []
    for proj in ("gate_up_proj", "down_proj"):
        if f"{proj}_blocks" not in t:
            continue
        bias = group.tensors.get(f"{proj}_bias")
        dtypes = {"weight_packed": "U8", "weight_scale": "U8", "bias": bias and ckpt.tensor_info(bias).dtype}
        for e, m in enumerate(gpt_oss_to_ct(t[f"{proj}_blocks"], t[f"{proj}_scales"],
                                            t[f"{proj}_bias"] if bias else None)):
            out += [(f"{group.name}.{e}.{proj}.{s}", dtypes[s], a) for s, a in m.items()]
    return out


def _to_gpt_oss_units(ckpt: Any, groups: list, checked: Any) -> list:
    """FP4-8.3: compressed-tensors MXFP4 modules ``<parent>.experts.<e>.<proj>``, experts 0 .. E-1, stacked per
    projection; any other quantized module is refused (gpt-oss quantizes its experts only)."""
    import re

    sets: dict[tuple[str, str], dict[int, Any]] = {}
    for g in groups:
        hit = re.match(EXPERT, g.name)
        if hit is None:
            raise _refuse(g.name, "an MoE expert projection, <parent>.experts.<e>.gate_up_proj or .down_proj "
                          "(gpt-oss quantizes its experts only, FP4-8.3)", "another module")
        sets.setdefault((hit["parent"], hit["proj"]), {})[int(hit["e"])] = g
    units = []
    for (parent, proj), experts in sorted(sets.items()):
        if sorted(experts) != list(range(len(experts))):
            raise _refuse(f"{parent}.{proj}", "experts numbered 0 .. E-1 (gpt-oss stacks them, FP4-8.3)",
                          sorted(experts))
        members = [experts[e] for e in range(len(experts))]
        units.append((ckpt.file_of(members[0].tensors["weight_packed"]),
                      _stack_unit(ckpt, parent, proj, members, checked)))
    return units


def _stack_unit(ckpt: Any, parent: str, proj: str, members: list, checked: Any) -> Any:
    def make() -> list[tuple[str, str, np.ndarray]]:
        stacked = ct_to_gpt_oss([checked(g) for g in members], tensor=f"{parent}.{proj}")
        bias = ckpt.tensor_info(members[0].tensors["bias"]).dtype     # the stored dtype, bytes carried over
        return [(f"{parent}.{proj}_{s}", bias if s == "bias" else ST[s], a) for s, a in stacked.items()]

    return make


def _excluded(ckpt: Any, groups: list) -> list[str]:
    """Modules holding a 2-D unquantized ``weight`` (lm_head, embeddings, gpt-oss's attention and router):
    compressed-tensors' ``ignore``, ModelOpt's ``ignore`` / ``exclude_modules``, gpt-oss' ``modules_to_not_convert``
    (as qformats' other conversions list them, CT-4.4)."""
    from ...convert import _unquantized

    return _unquantized(ckpt, {g.name for g in groups}, "ctensors")


def _target_config(target: str, excluded: list[str], inputs: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """config.json's quantization_config as the target's writer has it, and the side files (FP4-8.5):
    ``hf_quant_config.json`` written for ModelOpt, dropped otherwise."""
    if target == "gpt_oss_mxfp4":          # transformers Mxfp4Config
        return {"quant_method": "mxfp4", "modules_to_not_convert": excluded}, {"hf_quant_config.json": None}
    if target.startswith("ct"):
        return _ct_config(target, excluded, inputs), {"hf_quant_config.json": None}
    algo = "NVFP4" if target == "modelopt_nvfp4" else "mxfp4"
    quant: dict[str, Any] = {"quant_algo": algo, "kv_cache_quant_algo": None}
    config: dict[str, Any] = {}
    if algo == "NVFP4":                    # ModelOpt 0.47.0 export: group_size and config_groups for NVFP4 only
        quant["group_size"] = 16
        fp4 = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": 16}
        config["config_groups"] = {"group_0": {"input_activations": fp4 if inputs else None, "weights": fp4,
                                               "targets": ["Linear"]}}
    quant["exclude_modules"] = excluded
    config.update({"ignore": excluded, "quant_algo": algo, "producer": MODELOPT_PRODUCER, "quant_method": "modelopt"})
    return config, {"hf_quant_config.json": {"producer": MODELOPT_PRODUCER, "quantization": quant}}


def _ct_config(target: str, excluded: list[str], inputs: bool) -> dict[str, Any]:
    """As compressed-tensors 0.20.0 ``ModelCompressor.update_config`` writes the presets NVFP4 / NVFP4A16 /
    MXFP4A16 (FP4-5.1); input activations (NVFP4 with ``input_global_scale``) only where the source had scales."""
    from ...convert import CT_VERSION

    nv = target == "ct_nvfp4"
    fmt = "nvfp4-pack-quantized" if nv else "mxfp4-pack-quantized"
    weights = {"dynamic": False, "group_size": 16 if nv else 32, "num_bits": 4,
               "scale_dtype": "torch.float8_e4m3fn" if nv else "torch.uint8",
               "strategy": "tensor_group" if nv else "group", "symmetric": True, "type": "float"}
    acts = {**weights, "dynamic": "local", "observer": "static_minmax"} if nv and inputs else None
    group = {"format": fmt, "input_activations": acts, "output_activations": None, "targets": ["Linear"],
             "weights": weights}
    return {"config_groups": {"group_0": group}, "format": fmt, "global_compression_ratio": None,
            "ignore": excluded, "kv_cache_scheme": None, "moe_sparsity_config": None,
            "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
            "transform_config": {}, "version": CT_VERSION}
