"""FP4 layouts (spec/fp4.md): which module is which layout, from the checkpoint's quantization_config (FP4-5).

Three writer conventions, one per layout (FP4-1.1):

- ``ct_nvfp4``: compressed-tensors ``nvfp4-pack-quantized`` (float 4-bit weights, strategy ``tensor_group``,
  group 16): ``weight_packed``, ``weight_scale`` (UE4M3), ``weight_global_scale``;
- ``ct_mxfp4``: compressed-tensors ``mxfp4-pack-quantized`` (strategy ``group``, group 32): ``weight_packed``,
  ``weight_scale`` (E8M0);
- ``gpt_oss_mxfp4``: transformers ``quant_method: "mxfp4"`` (gpt-oss): MoE experts' ``*_blocks`` / ``*_scales``.

The compressed-tensors config is read with the compressed-tensors room's model (``ctensors.layout.CTConfig``,
``extra="allow"``: compressed-tensors adds keys often); what decoding needs is resolved into our own frozen
:class:`FP4Scheme`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...errors import QFormatsError, fail_validation
from ..ctensors.layout import CTConfig, CTScheme, parse_config, target_matches

__all__ = ["FP4Scheme", "GptOssConfig", "ModelOptConfig", "LAYOUTS", "CT_FORMATS", "GROUP", "ct_fp4_formats",
           "module_schemes", "parse_gpt_oss", "is_gpt_oss", "modelopt_layout", "SCHEMA_MODELS"]

Layout = Literal["ct_nvfp4", "ct_mxfp4", "gpt_oss_mxfp4", "modelopt_nvfp4", "modelopt_mxfp4"]
LAYOUTS: tuple[str, ...] = ("ct_nvfp4", "ct_mxfp4", "gpt_oss_mxfp4", "modelopt_nvfp4", "modelopt_mxfp4")
# compressed-tensors CompressionFormat value -> our layout (compressed_tensors/config/base.py)
CT_FORMATS = {"nvfp4-pack-quantized": "ct_nvfp4", "mxfp4-pack-quantized": "ct_mxfp4"}
GROUP = {"ct_nvfp4": 16, "ct_mxfp4": 32, "gpt_oss_mxfp4": 32,      # FP4-2.2: values per block scale
         "modelopt_nvfp4": 16, "modelopt_mxfp4": 32}
MODELOPT_ALGOS = {"nvfp4": "modelopt_nvfp4", "mxfp4": "modelopt_mxfp4"}   # quant_algo, lower-cased (FP4-4)
STRATEGY = {"ct_nvfp4": "tensor_group", "ct_mxfp4": "group"}


class FP4Scheme(BaseModel):
    """What one FP4 module is quantized with (FP4-5.3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    layout: Layout
    group: str = Field(description="the config group (compressed-tensors) or quant_method (gpt-oss)")
    group_size: int


class GptOssConfig(BaseModel):
    """``config.json["quantization_config"]`` of a gpt-oss MXFP4 checkpoint (transformers ``Mxfp4Config``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    quant_method: Literal["mxfp4"]
    modules_to_not_convert: list[str] | None = None
    dequantize: bool = False


class ModelOptConfig(BaseModel):
    """``config.json["quantization_config"]`` ModelOpt 0.47 writes for NVFP4 / MXFP4 (``hf_quant_config.json``'s
    ``quantization`` has the same ``quant_algo``, ``exclude_modules`` for ``ignore``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    quant_method: Literal["modelopt"]
    quant_algo: str
    ignore: list[str] = Field(default_factory=list)
    group_size: int | None = None


def modelopt_layout(config: Any) -> str | None:
    """``modelopt_nvfp4`` / ``modelopt_mxfp4`` for a ModelOpt config of that ``quant_algo``, else None."""
    if _method(config) != "modelopt":
        return None
    return MODELOPT_ALGOS.get(str(config.get("quant_algo", "")).lower())


def _method(config: Any) -> str:
    return str(config.get("quant_method", "")).lower() if isinstance(config, Mapping) else ""


def is_gpt_oss(config: Any) -> bool:
    return _method(config) == "mxfp4"


def parse_gpt_oss(raw: Mapping[str, Any]) -> GptOssConfig:
    try:
        return GptOssConfig.model_validate(dict(raw))
    except ValidationError as exc:
        raise fail_validation("fp4.config.invalid", exc) from None


def _ct(config: Any) -> CTConfig | None:
    """The compressed-tensors config, None for any other (or an invalid one: the ctensors room reports it)."""
    if _method(config) != "compressed-tensors":
        return None
    try:
        return parse_config(config)[0]
    except QFormatsError:
        return None


def ct_fp4_formats(config: Any) -> dict[str, str]:
    """Config group -> layout, for the groups of a compressed-tensors config that are NVFP4 or MXFP4."""
    ct = _ct(config)
    if ct is None:
        return {}
    formats = {name: str(s.format or ct.format) for name, s in ct.config_groups.items()}
    return {name: CT_FORMATS[f] for name, f in formats.items() if f in CT_FORMATS}


def _resolve(group: str, layout: str, scheme: CTScheme) -> FP4Scheme | str:
    """FP4-5.1: the weights a group of this format must declare (float, 4 bits, symmetric, its group size)."""
    w = scheme.weights
    if w is None:
        return f"config group {group!r} has format {layout} but quantizes no weights"
    want = {"type": "float", "num_bits": 4, "symmetric": True, "group_size": GROUP[layout]}
    got = {"type": w.type, "num_bits": w.num_bits, "symmetric": w.symmetric, "group_size": w.group_size}
    wrong = [f"{k} {got[k]!r}" for k in want if got[k] != want[k]]
    if w.strategy != STRATEGY[layout]:
        wrong.append(f"strategy {w.strategy!r}")
    if wrong:
        return (f"config group {group!r} ({layout}) needs float 4-bit symmetric weights, strategy "
                f"{STRATEGY[layout]}, group_size {GROUP[layout]}; it has {', '.join(wrong)}")
    return FP4Scheme(layout=layout, group=group, group_size=GROUP[layout])


def module_schemes(config: Any, modules: Sequence[str]) -> dict[str, FP4Scheme | str]:
    """Each module's FP4 scheme, or why it has none (FP4-5.3). compressed-tensors: the first config group whose
    ``targets`` name the module (a class name matches every module), unless ``ignore`` names it; gpt-oss: every
    expert module unless ``modules_to_not_convert`` names it."""
    names = list(modules)
    if modelopt_layout(config) is not None:
        return _modelopt_schemes(config, names)
    if is_gpt_oss(config):
        parsed = parse_gpt_oss(config)
        skip = parsed.modules_to_not_convert or []
        out: dict[str, FP4Scheme | str] = {}
        for m in names:
            hit = next((t for t in skip if _glob_prefix(t, m)), None)
            out[m] = (f"named by modules_to_not_convert entry {hit!r}" if hit is not None else
                      FP4Scheme(layout="gpt_oss_mxfp4", group="mxfp4", group_size=32))
        return out
    ct = _ct(config)
    if ct is None:
        return {m: "not a compressed-tensors or gpt-oss mxfp4 checkpoint" for m in names}
    fp4 = ct_fp4_formats(config)
    out = {m: "no config group targets it" for m in names}
    ignored = target_matches(ct.ignore, names, classes_match=False)
    for group, scheme in ct.config_groups.items():
        hits = target_matches(scheme.targets, names, classes_match=True)
        for m, hit, ign in zip(names, hits, ignored):
            if hit is None or not isinstance(out[m], str) or not out[m].startswith("no config"):
                continue
            if ign is not None:
                out[m] = f"ignored by ignore entry {ct.ignore[ign]!r}"
            elif group in fp4:
                out[m] = _resolve(group, fp4[group], scheme)
            else:
                out[m] = f"config group {group!r} has format {scheme.format or ct.format!r}"
    return out


def _modelopt_schemes(config: Mapping[str, Any], names: list[str]) -> dict[str, FP4Scheme | str]:
    """FP4-4.3: every module ModelOpt's ``ignore`` (``exclude_modules``) does not name."""
    try:
        parsed = ModelOptConfig.model_validate(dict(config))
    except ValidationError as exc:
        raise fail_validation("fp4.config.invalid", exc) from None
    layout = modelopt_layout(config)
    out: dict[str, FP4Scheme | str] = {}
    for m in names:
        hit = next((t for t in parsed.ignore if _glob_prefix(t, m)), None)
        out[m] = (f"excluded by ignore entry {hit!r}" if hit is not None else
                  FP4Scheme(layout=layout, group=f"quant_algo {parsed.quant_algo}", group_size=GROUP[layout]))
    return out


def _glob_prefix(pattern: str, module: str) -> bool:
    """transformers' ``modules_to_not_convert`` match: the entry (with ``*`` wildcards) names the module or a
    parent of it."""
    import fnmatch

    return fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*") or \
        module.startswith(pattern + ".")


SCHEMA_MODELS = (FP4Scheme, GptOssConfig, ModelOptConfig)
