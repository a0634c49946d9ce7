"""FP8 layouts (spec/fp8.md): the three writer conventions' configs and which module is quantized how (FP8-4).

Configs are other projects' files, so their models keep unknown keys (``extra="allow"``) and interpret only
what decoding needs; :class:`ModuleScheme` is ours (``extra="forbid"``).

- ``ct``: compressed-tensors, format float-quantized; ``weight_scale``; strategies tensor, channel, block, group.
- ``deepseek``: ``quant_method: fp8`` (DeepSeek-V3, transformers FineGrainedFP8); ``weight_scale_inv``; block
  (tensor without ``weight_block_size``).
- ``fbgemm``: ``quant_method: fbgemm_fp8``; ``weight_scale``; channel.
- ``modelopt``: ``quant_method: modelopt`` with an FP8 ``quant_algo``; ``weight_scale``; tensor, channel or
  block 128 x 128 by the algorithm (FP8-3.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import fail, fail_validation
from ..ctensors.layout import CTConfig, CTScheme, target_matches
from ..fp4.layout import ModelOptConfig, _glob_prefix

__all__ = ["FP8Config", "FbgemmConfig", "ModuleScheme", "parse_config", "module_schemes", "layout_of", "FLOAT",
           "SCHEMA_MODELS"]

FLOAT = "float-quantized"
STRATEGIES = ("tensor", "channel", "block", "group")
# FP8-3.2: ModelOpt's FP8 quant_algo values (lower-cased) and the strategy each writes; fp8_pb_wo's block is
# FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG's block_sizes {-1: 128, -2: 128}, recorded in no file
MODELOPT_FP8 = {"fp8": "tensor", "fp8_per_channel_per_token": "channel", "fp8_pb_wo": "block"}
MODELOPT_BLOCK = (128, 128)


class FP8Config(BaseModel):
    """``quantization_config`` of ``quant_method: fp8`` (DeepSeek-V3 README_WEIGHTS.md; transformers
    ``FineGrainedFP8Config``), FP8-2.1."""

    model_config = ConfigDict(frozen=True, extra="allow")

    quant_method: Literal["fp8"]
    weight_block_size: list[int] | None = Field(None, min_length=2, max_length=2)
    fmt: Literal["e4m3"] | None = None
    activation_scheme: str | None = None
    modules_to_not_convert: list[str] | None = None
    scale_fmt: Literal["float", "ue8m0"] | None = None       # transformers raises on any other (FP8-2.2)


class FbgemmConfig(BaseModel):
    """``quantization_config`` of ``quant_method: fbgemm_fp8`` (transformers ``FbgemmFp8Config``), FP8-3.1."""

    model_config = ConfigDict(frozen=True, extra="allow")

    quant_method: Literal["fbgemm_fp8"]
    activation_scale_ub: float | None = None
    modules_to_not_convert: list[str] | None = None


class ModuleScheme(BaseModel):
    """How one module's FP8 weight is scaled (FP8-1.2): ``block`` is (rows, columns) per scale."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: Literal["ct", "deepseek", "fbgemm", "modelopt"]
    strategy: Literal["tensor", "channel", "block", "group"]
    scale: Literal["weight_scale", "weight_scale_inv"]
    block: tuple[int, int] | None = None
    group_size: int | None = None
    scale_fmt: Literal["float", "ue8m0"] | None = None      # the fp8 layout's stated scale storage (FP8-2.2)


def layout_of(raw: Any) -> str | None:
    """The layout a config names (FP8-1.1), None for configs of no FP8 layout."""
    if not isinstance(raw, Mapping):
        return None
    method = str(raw.get("quant_method", "")).lower()
    if method == "fp8":
        return "deepseek"
    if method == "fbgemm_fp8":
        return "fbgemm"
    if method == "modelopt":
        return "modelopt" if str(raw.get("quant_algo", "")).lower() in MODELOPT_FP8 else None
    if method == "compressed-tensors":
        groups = raw.get("config_groups")
        named = [raw.get("format")] + ([g.get("format") for g in groups.values() if isinstance(g, Mapping)]
                                       if isinstance(groups, Mapping) else [])
        return "ct" if FLOAT in named else None       # a list, not a set: a hostile format may be unhashable
    return None


def parse_config(raw: Any) -> FP8Config | FbgemmConfig | CTConfig | ModelOptConfig:
    """The config's model (FP8-1.1, FP8-2.1, FP8-3.1, FP8-3.2); ``fp8.config.invalid`` for a value outside its
    domain."""
    kind = layout_of(raw)
    model = {"deepseek": FP8Config, "fbgemm": FbgemmConfig, "ct": CTConfig, "modelopt": ModelOptConfig}.get(kind or "")
    if model is None:
        raise fail("fp8.config.invalid", "quant_method", "fp8, fbgemm_fp8, compressed-tensors float-quantized or "
                   "modelopt with an FP8 quant_algo",
                   raw.get("quant_method") if isinstance(raw, Mapping) else type(raw).__name__)
    try:
        config = model.model_validate(dict(raw))
    except ValidationError as exc:
        raise fail_validation("fp8.config.invalid", exc) from None
    if isinstance(config, FP8Config) and config.weight_block_size is not None and min(config.weight_block_size) < 1:
        raise fail("fp8.config.invalid", "weight_block_size", "two positive integers", config.weight_block_size)
    return config


def _skipped(entries: Sequence[str] | None, modules: Sequence[str]) -> list[bool]:
    """transformers' ``modules_to_not_convert``: an entry names a module or a prefix of one (FP8-2.1)."""
    entries = list(entries or [])
    return [any(m == e or m.startswith(e + ".") or m.endswith("." + e) for e in entries) for m in modules]


def module_schemes(config: FP8Config | FbgemmConfig | CTConfig | ModelOptConfig,
                   modules: Sequence[str]) -> dict[str, ModuleScheme | str]:
    """Each module's scheme, or why it has none (a sentence): FP8-1.2, FP8-2.1, FP8-3.1."""
    names = list(modules)
    if isinstance(config, CTConfig):
        return _ct_schemes(config, names)
    if isinstance(config, ModelOptConfig):
        return _modelopt_schemes(config, names)
    skipped = _skipped(config.modules_to_not_convert, names)
    if isinstance(config, FbgemmConfig):
        scheme: ModuleScheme | str = ModuleScheme(layout="fbgemm", strategy="channel", scale="weight_scale")
    elif config.weight_block_size is None:
        scheme = ModuleScheme(layout="deepseek", strategy="tensor", scale="weight_scale_inv",
                              scale_fmt=config.scale_fmt)
    else:
        scheme = ModuleScheme(layout="deepseek", strategy="block", scale="weight_scale_inv",
                              block=tuple(config.weight_block_size), scale_fmt=config.scale_fmt)
    return {m: ("listed in modules_to_not_convert" if skip else scheme) for m, skip in zip(names, skipped)}


def _modelopt_schemes(config: ModelOptConfig, names: list[str]) -> dict[str, ModuleScheme | str]:
    """FP8-3.2: every module ``ignore`` does not name, with the algorithm's strategy."""
    strategy = MODELOPT_FP8[config.quant_algo.lower()]
    scheme = ModuleScheme(layout="modelopt", strategy=strategy, scale="weight_scale",
                          block=MODELOPT_BLOCK if strategy == "block" else None)
    out: dict[str, ModuleScheme | str] = {}
    for m in names:
        hit = next((t for t in config.ignore if _glob_prefix(t, m)), None)
        out[m] = scheme if hit is None else f"excluded by ignore entry {hit!r}"
    return out


def _ct_schemes(config: CTConfig, names: list[str]) -> dict[str, ModuleScheme | str]:
    """compressed-tensors' resolution (CT-5.3): ``ignore`` first, then the first group whose targets match."""
    out: dict[str, ModuleScheme | str] = {m: "no config group targets it" for m in names}
    for module, hit in zip(names, target_matches(config.ignore, names, classes_match=False)):
        if hit is not None:
            out[module] = f"ignored by ignore entry {config.ignore[hit]!r}"
    for group, scheme in config.config_groups.items():
        for module, hit in zip(names, target_matches(scheme.targets, names, classes_match=True)):
            if hit is not None and out[module] == "no config group targets it":
                out[module] = _ct_resolve(config, group, scheme)
    return out


def _ct_resolve(config: CTConfig, group: str, scheme: CTScheme) -> ModuleScheme | str:
    fmt, w = scheme.format or config.format, scheme.weights
    if fmt != FLOAT:
        return f"config group {group!r} has format {fmt!r}, not {FLOAT!r}"
    if w is None or w.type != "float" or w.num_bits != 8:
        return f"config group {group!r} quantizes no 8-bit float weights"
    extra = w.model_extra or {}
    if w.strategy == "block":
        bs = extra.get("block_structure")
        if not (isinstance(bs, list) and len(bs) == 2 and all(isinstance(v, int) and v > 0 for v in bs)):
            return f"config group {group!r} has strategy block without a block_structure of two positive integers"
        return ModuleScheme(layout="ct", strategy="block", scale="weight_scale", block=(bs[0], bs[1]))
    if w.strategy == "group":
        if not isinstance(w.group_size, int) or w.group_size <= 0:
            return f"config group {group!r} has strategy group without a positive group_size"
        return ModuleScheme(layout="ct", strategy="group", scale="weight_scale", group_size=w.group_size)
    if w.strategy not in STRATEGIES:
        return f"config group {group!r} has strategy {w.strategy!r} (FP8-1.2: tensor, channel, block, group)"
    return ModuleScheme(layout="ct", strategy=w.strategy, scale="weight_scale")


SCHEMA_MODELS = (FP8Config, FbgemmConfig, ModuleScheme)
