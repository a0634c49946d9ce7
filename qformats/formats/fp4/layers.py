"""FP4 modules in a checkpoint (spec/fp4.md): compressed-tensors NVFP4 / MXFP4 modules recognised by
``weight_packed`` when their config group has an FP4 format, gpt-oss MXFP4 experts by ``*_proj_blocks``
(FP4-5.3); checked (FP4-2, FP4-3) and decoded as their libraries decode them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, decode_stats, load_layer, tick
from ...stats import Moments
from . import checks, codec
from .layout import FP4Scheme, ct_fp4_formats, is_gpt_oss, modelopt_layout, module_schemes

__all__ = ["CT_SIDE", "GPT_OSS_SIDE", "MODELOPT_SIDE", "Side", "claims", "check", "decode", "decode_module", "outputs"]

# shards vLLM fuses into one layer with one global scale (FP4-3.5)
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("w1", "w3"))
BITS_PER_WEIGHT = {"ct_nvfp4": 4 + 8 / 16, "ct_mxfp4": 4 + 8 / 32, "gpt_oss_mxfp4": 4 + 8 / 32,
                   "modelopt_nvfp4": 4 + 8 / 16, "modelopt_mxfp4": 4 + 8 / 32}


def claims(config: Any, module: str | None = None) -> bool:
    """FP4-5.3: a gpt-oss ``mxfp4`` checkpoint, or a compressed-tensors module whose config group is NVFP4 or
    MXFP4 (without ``module``: whether any group is). A config of FP4 groups only claims every ``weight_packed``
    module without matching targets (those outside any group are then reported, not handed to another room)."""
    if is_gpt_oss(config):
        return True
    fp4 = ct_fp4_formats(config)
    if not fp4 or module is None:
        return bool(fp4)
    if len(fp4) == len(config.get("config_groups", {})):
        return True
    return isinstance(module_schemes(config, [module])[module], FP4Scheme)


def _tensors(ckpt: Any, group: LayerGroup) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    return load_layer(ckpt, group), {s: ckpt.tensor_info(full).dtype for s, full in group.tensors.items()}


def _module_findings(name: str, t: Mapping[str, Any], dtypes: Mapping[str, str], scheme: FP4Scheme,
                     deep: bool) -> tuple[list[Finding], dict[str, Any]]:
    row: dict[str, Any] = {"layer": name, "format": scheme.layout, "bits": 4, "group_size": scheme.group_size,
                           "bits_per_weight": BITS_PER_WEIGHT[scheme.layout]}
    prefix = f"{name}."
    findings: list[Finding] = []
    try:
        if scheme.layout == "gpt_oss_mxfp4":
            projs = [p for p in checks.GPT_OSS_PROJ if f"{p}_blocks" in t]
            dims = {p: checks.structure_gpt_oss(t, dtypes, p, prefix) for p in projs}
            row.update({"experts": next(iter(dims.values()))["experts"],
                        "projections": {p: [d["out"], d["in"]] for p, d in dims.items()}})
            for p in projs:
                findings += checks.value_findings(t, scheme.layout, prefix, proj=p)
        else:
            dims = checks.structure_ct(t, dtypes, scheme.layout, prefix)
            row.update({"in_features": dims["in"], "out_features": dims["out"]})
            findings += checks.value_findings(t, scheme.layout, prefix)
    except QFormatsError as err:
        return [from_error(err)], row
    if deep and not findings:
        w = _decoded(t, scheme)
        row.update(decode_stats(name, Moments.of(np.concatenate([a.reshape(-1) for a in w.values()])), findings))
    return findings, row


def _decoded(t: Mapping[str, Any], scheme: FP4Scheme) -> dict[str, np.ndarray]:
    """The module's weights by output suffix: ``weight``, or gpt-oss's ``gate_up_proj`` and ``down_proj``."""
    if scheme.layout == "ct_nvfp4":
        return {"weight": codec.nvfp4_dequantize(t["weight_packed"], t["weight_scale"], t["weight_global_scale"])}
    if scheme.layout == "ct_mxfp4":
        return {"weight": codec.mxfp4_dequantize(t["weight_packed"], t["weight_scale"])}
    if scheme.layout == "modelopt_nvfp4":
        return {"weight": codec.modelopt_nvfp4_dequantize(t["weight"], t["weight_scale"], t["weight_scale_2"])}
    if scheme.layout == "modelopt_mxfp4":      # ModelOpt's float32 product rounded to bfloat16: FP4-3.7's values
        return {"weight": codec.mxfp4_dequantize(t["weight"], t["weight_scale"])}
    return {p: codec.gpt_oss_dequantize(t[f"{p}_blocks"], t[f"{p}_scales"]) for p in checks.GPT_OSS_PROJ
            if f"{p}_blocks" in t}


def _fused(ckpt: Any, layers: list[LayerGroup], schemes: Mapping[str, Any]) -> list[Finding]:
    """FP4-3.5: shards vLLM fuses (q/k/v, gate/up, w1/w3) whose global scales differ, one warning a shard."""
    by_parent: dict[str, dict[str, float]] = {}
    name = "weight_global_scale"
    for g in layers:
        scheme = schemes.get(g.name)
        if not isinstance(scheme, FP4Scheme):
            continue
        name = checks.NAMES.get(scheme.layout, (None, None))[1]
        value = checks.global_scale_value(ckpt.tensor(g.tensors[name])) if name in g.tensors else float("nan")
        if np.isfinite(value) and value > 0:         # an invalid one is FP4-3.2's error, not a mismatch
            parent, _, leaf = g.name.rpartition(".")
            by_parent.setdefault(parent, {})[leaf] = value
    out = []
    for parent, leaves in sorted(by_parent.items()):
        for fused in FUSED:
            present = [leaf for leaf in fused if leaf in leaves]
            first = present[0] if present else None
            for leaf in present[1:]:
                if leaves[leaf] != leaves[first]:
                    tensor = f"{parent}.{leaf}.{name}"
                    out.append(finding("fp4.global_scale.fused_mismatch", "warning", f"'{tensor}' is "
                                       f"{leaves[leaf]!r} where '{parent}.{first}.{name}' is "
                                       f"{leaves[first]!r}: vLLM loads {'/'.join(present)} as one layer with one "
                                       f"global scale (for MoE w1/w3 it warns and uses w1's for both, vllm#54974), "
                                       "so this shard decodes scaled by "
                                       f"{_factor(name, leaves[first], leaves[leaf])!r} "
                                       "(FP4-3.5)",
                                       tensor=tensor))
    return out


def _factor(name: str, used: float, own: float) -> float:
    """What the shard's weights are multiplied by when read with ``used`` for ``own``: compressed-tensors divides
    by its global scale, ModelOpt multiplies by ``weight_scale_2`` (FP4-3.6)."""
    return own / used if name == "weight_scale_2" else used / own


def check(ckpt: Any, layers: list[LayerGroup], deep: bool,
          progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Every FP4 check of every module (FP4-2, FP4-3, FP4-5), one row per module for ``inspect``."""
    try:
        schemes = module_schemes(ckpt.config, [g.name for g in layers])
    except QFormatsError as err:
        return [], [from_error(err)]
    rows, findings = [], []
    for i, group in enumerate(layers):
        tick(progress, i, len(layers), group.name)
        scheme = schemes[group.name]
        if not isinstance(scheme, FP4Scheme):
            findings.append(finding("fp4.config.invalid", "error", f"'{group.name}' holds FP4 tensors but {scheme} "
                                    "(FP4-5.1)", tensor=group.name))
            continue
        t, dtypes = _tensors(ckpt, group)
        more, row = _module_findings(group.name, t, dtypes, scheme, deep)
        findings += more
        rows.append(row)
    return rows, findings + _fused(ckpt, layers, schemes)


def decode_module(ckpt: Any, group: LayerGroup) -> dict[str, np.ndarray]:
    """Every weight of one FP4 module, checked first (FP4-2, FP4-3): ``{"weight": (out, in)}`` for
    compressed-tensors, ``{"gate_up_proj": (E, out, in), "down_proj": (E, out, in)}`` for gpt-oss; float32
    holding the libraries' bfloat16 values."""
    scheme = module_schemes(ckpt.config, [group.name])[group.name]
    if not isinstance(scheme, FP4Scheme):
        raise fail("fp4.config.invalid", group.name, "a module an FP4 config group quantizes (FP4-5.1)", scheme)
    t, dtypes = _tensors(ckpt, group)
    more, _ = _module_findings(group.name, t, dtypes, scheme, deep=False)
    errors = [f for f in more if f.severity == "error"]
    if errors:
        raise fail(errors[0].code, errors[0].tensor, "a conforming FP4 module (" + errors[0].clause + ")",
                   errors[0].message)
    return _decoded(t, scheme)


def outputs(group: LayerGroup) -> list[str]:
    """The weights ``qformats decode`` writes for a module: ``weight``, or a gpt-oss experts module's projections."""
    found = [p for p in checks.GPT_OSS_PROJ if f"{p}_blocks" in group.tensors]
    return found or ["weight"]


NOTES = {"modelopt_nvfp4": "float32 (out, in) holding ModelOpt 0.47.0's bfloat16 NVFP4 decode (FP4-4.1)",
         "modelopt_mxfp4": "float32 (out, in) holding ModelOpt 0.47.0's bfloat16 MXFP4 decode (FP4-4.2)",
         "ct_nvfp4": "float32 (out, in) holding compressed-tensors 0.20.0's bfloat16 NVFP4 decode (FP4-3.1)",
         "ct_mxfp4": "float32 (out, in) holding compressed-tensors 0.20.0's bfloat16 MXFP4 decode (FP4-3.7)",
         "gpt_oss_mxfp4": "float32 (experts, out, in) holding transformers 5.24.0's bfloat16 gpt-oss MXFP4 decode, "
                          "the transpose of its (experts, in, out) (FP4-3.8)"}


def decode(ckpt: Any, group: LayerGroup, *, output: str = "weight",
           **_other_formats_options: Any) -> tuple[np.ndarray, str]:
    """One weight of the module (``output``: ``weight``, or a gpt-oss projection) as its library decodes it
    (FP4-3.1, FP4-3.7, FP4-3.8), float32 holding the library's bfloat16 values."""
    w = decode_module(ckpt, group)
    if output not in w:
        raise fail("argument.invalid", "output", f"one of {', '.join(w)}", output)
    return w[output], NOTES[module_schemes(ckpt.config, [group.name])[group.name].layout]


@dataclass(frozen=True)
class Side:
    """The checkpoint side of one anchor (registry.Face.layers, FP4-5.3): compressed-tensors modules by
    ``weight_packed``, gpt-oss experts by ``gate_up_proj_blocks``."""

    ANCHOR: str
    SUFFIXES: tuple[str, ...]
    kind: str                        # "ct", "gpt_oss", "modelopt"
    CLAIMS_BY_MODULE: bool = True    # a compressed-tensors config quantizes each module by its own group's format

    def claims(self, config: Any, module: str | None = None) -> bool:
        if self.kind == "gpt_oss":
            return is_gpt_oss(config)
        if self.kind == "modelopt":
            return modelopt_layout(config) is not None
        return not is_gpt_oss(config) and claims(config, module)

    def check(self, ckpt: Any, layers: list[LayerGroup], deep: bool,
              progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
        return check(ckpt, layers, deep, progress)

    def decode(self, ckpt: Any, group: LayerGroup, **options: Any) -> tuple[np.ndarray, str]:
        return decode(ckpt, group, **options)

    def outputs(self, group: LayerGroup) -> list[str]:
        return outputs(group)


CT_SIDE = Side("weight_packed", ("weight_packed", "weight_scale", "weight_global_scale", "input_global_scale", "bias"),
               kind="ct")
GPT_OSS_SIDE = Side("gate_up_proj_blocks", tuple(f"{p}_{s}" for p in checks.GPT_OSS_PROJ
                                                 for s in ("blocks", "scales", "bias")), kind="gpt_oss")
MODELOPT_SIDE = Side("weight_scale", ("weight", "weight_scale", "weight_scale_2", "input_scale", "bias"),
                     kind="modelopt")
