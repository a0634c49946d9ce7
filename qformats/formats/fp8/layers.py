"""FP8 modules in a checkpoint (FP8-4): recognised by their scale tensor, their scheme resolved from the
config (FP8-1.1, FP8-2.1, FP8-3.1), checked (FP8-6) and decoded (FP8-5).

One room, two anchors: ``weight_scale`` (compressed-tensors float-quantized, fbgemm_fp8) and
``weight_scale_inv`` (DeepSeek-V3 / transformers fp8). Each is a :class:`Side` the registry holds as a face
(``fp8`` and ``fp8_deepseek``); both run the same checks, and each claims modules only when the config names
one of its layouts (FP8-4.1): elsewhere an FP8 module stays a layout not covered (QF-5.2).

compressed-tensors int modules (``weight_packed``) also hold ``weight_scale``: in a config mixing
pack-quantized and float-quantized groups this side claims them too (the walker gives a module to the face
whose ``claims`` says so) and hands each to the compressed-tensors room's own check and decode (FP8-4.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import elements
from ...errors import QFormatsError, fail
from ...findings import Finding, finding, from_error
from ...layers import LayerGroup, Progress, decode_stats, load_layer, tick
from ...stats import Moments
from ..ctensors import layers as ct_layers
from . import checks, codec
from .layout import ModuleScheme, layout_of, module_schemes, parse_config

__all__ = ["Side", "CT_SIDE", "INV_SIDE", "module_tensors", "orphan_findings"]

LAYOUT_NAMES = {"ct": "compressed-tensors float-quantized", "deepseek": "fp8 (DeepSeek-V3 / transformers)",
                "fbgemm": "fbgemm_fp8", "modelopt": "ModelOpt FP8"}


def module_tensors(ckpt: Any, group: LayerGroup, scheme: ModuleScheme) -> dict[str, np.ndarray]:
    """The module's arrays: E4M3FN bytes as uint8, every float scale widened exactly to float32."""
    t = load_layer(ckpt, group)
    for suffix in (scheme.scale, "input_scale"):
        if suffix in t:
            dtype = ckpt.tensor_info(group.tensors[suffix]).dtype
            t[suffix] = codec.bf16_to_f32(t[suffix]) if dtype == "BF16" else \
                elements.decode(t[suffix], elements.E8M0) if dtype == codec.E8M0_SCALE else \
                np.asarray(t[suffix], np.float32)
    if scheme.scale in t and np.ndim(t.get("weight")) == 2:       # ModelOpt's stored shapes as the grid (FP8-3.2)
        t[scheme.scale] = codec.as_grid(t[scheme.scale], scheme.layout, scheme.strategy, *t["weight"].shape,
                                        block=scheme.block)
    return t


def _config(ckpt: Any) -> tuple[Any, str | None, list[Finding]]:
    raw = ckpt.config
    layout = layout_of(raw)
    if layout is None:
        return None, None, []
    try:
        return parse_config(raw), layout, []
    except QFormatsError as err:
        return None, layout, [from_error(err.with_file(ckpt.configs[0].file))]


def _row(name: str, scheme: ModuleScheme, shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    row: dict[str, Any] = {"layer": name, "format": f"fp8_{scheme.layout}_{scheme.strategy}", "bits": 8,
                           "group_size": scheme.group_size or -1}
    if scheme.block:
        row["block"] = list(scheme.block)
    if len(shapes.get("weight", ())) == 2:
        n, k = shapes["weight"]
        row.update({"in_features": k, "out_features": n})
        scale_bits = 32 if scheme.layout != "ct" else 16
        cells = int(np.prod(shapes.get(scheme.scale, (1,))))
        row["bits_per_weight"] = round((8 * n * k + scale_bits * cells) / (n * k), 4)
    return row


def _module(ckpt: Any, group: LayerGroup, scheme: ModuleScheme, deep: bool,
            per_tensor: dict[str, float]) -> tuple[list[Finding], dict[str, Any]]:
    """FP8-6 on one module; its per-tensor scale noted for FP8-6.7."""
    name = group.name
    dtypes = {s: ckpt.tensor_info(full).dtype for s, full in group.tensors.items()}
    shapes = {s: tuple(ckpt.tensor_info(full).shape) for s, full in group.tensors.items()}
    row = _row(name, scheme, shapes)
    findings = checks.structure(name, dtypes, shapes, scheme)
    if findings:
        return findings, row
    t = module_tensors(ckpt, group, scheme)
    findings = checks.values(name, t, scheme) + checks.scale_fmt_findings(name, dtypes[scheme.scale], scheme)
    findings += checks.block_reader_findings(name, *shapes["weight"], shapes[scheme.scale], scheme)
    if scheme.strategy == "tensor":
        per_tensor[name] = float(np.asarray(t[scheme.scale]).reshape(-1)[0])
    if deep and not any(f.severity == "error" for f in findings):
        w = codec.dequantize(t, strategy=scheme.strategy, block=scheme.block, group_size=scheme.group_size,
                             scale_name=scheme.scale)
        row.update(decode_stats(name, Moments.of(w), findings))
    return findings, row


def orphan_findings(ckpt: Any) -> list[Finding]:
    """FP8-6.2: an F8_E4M3 weight whose module holds neither weight_scale nor weight_scale_inv."""
    names = ckpt.tensor_names()
    scaled = {n.rpartition(".")[0] for n in names if n.rpartition(".")[2] in ("weight_scale", "weight_scale_inv")}
    out = []
    for n in names:
        prefix, _, suffix = n.rpartition(".")
        if suffix == "weight" and prefix not in scaled and ckpt.tensor_info(n).dtype == "F8_E4M3":
            out.append(finding("fp8.scale.missing", "error", f"'{n}' is FP8 but its module holds no weight_scale "
                               "nor weight_scale_inv: a reader that goes on decodes the bare E4M3 values, up to 448 "
                               "(NVIDIA/TensorRT-Model-Connect#1115)", tensor=n))
    return out


def _ct_group(group: LayerGroup) -> LayerGroup:
    """A pack-quantized int module as the compressed-tensors room groups it (FP8-4.3)."""
    return LayerGroup(group.name, "ctensors", {s: f for s, f in group.tensors.items() if s in ct_layers.SUFFIXES})


@dataclass(frozen=True)
class Side:
    """The checkpoint side of one anchor (registry.Face.layers): ANCHOR, SUFFIXES, check, decode."""

    ANCHOR: str
    layouts: tuple[str, ...]          # the layouts whose modules carry this anchor

    @property
    def SUFFIXES(self) -> tuple[str, ...]:   # noqa: N802 - the registry's attribute name
        own = ("weight", self.ANCHOR, "input_scale", "bias")
        return own + tuple(s for s in ct_layers.SUFFIXES if s not in own) if self.ANCHOR == "weight_scale" else own

    def claims(self, config: Any) -> bool:
        """FP8-4.1: this side's modules are FP8 when the config names one of its layouts."""
        return layout_of(config) in self.layouts

    def check(self, ckpt: Any, layers: list[LayerGroup], deep: bool,
              progress: Progress | None) -> tuple[list[dict[str, Any]], list[Finding]]:
        """Every FP8 check of every module claimed by this anchor (FP8-6), one row per checked module;
        pack-quantized int modules of a mixed config go to the compressed-tensors room (FP8-4.3)."""
        ints = [_ct_group(g) for g in layers if ct_layers.ANCHOR in g.tensors]
        layers = [g for g in layers if ct_layers.ANCHOR not in g.tensors]
        rows, findings = ct_layers.check(ckpt, ints, deep, progress) if ints else ([], [])
        config, layout, more = _config(ckpt)
        findings += more
        if config is None or not layers:
            return rows, findings
        schemes = module_schemes(config, [g.name for g in layers])
        per_tensor: dict[str, float] = {}
        for i, group in enumerate(layers):
            tick(progress, i, len(layers), group.name)
            scheme = schemes[group.name]
            if isinstance(scheme, str):
                findings.append(finding("fp8.config.tensor_mismatch", "error", f"'{group.name}' holds "
                                        f"{self.ANCHOR} but {scheme} ({LAYOUT_NAMES[layout]})", tensor=group.name))
                continue
            more, row = _module(ckpt, group, scheme, deep, per_tensor)
            findings += more
            rows.append(row)
        findings += checks.fused_findings(per_tensor)
        if layout in self.layouts:
            findings += orphan_findings(ckpt)
        return rows, findings

    def orphans(self, ckpt: Any) -> list[Finding]:
        """FP8-6.2 where no module holds this anchor at all (validate asks when it found no module)."""
        return orphan_findings(ckpt)

    def decode(self, ckpt: Any, group: LayerGroup, **_other_formats_options: Any) -> tuple[np.ndarray, str]:
        """float32 (out, in), ``e4m3(weight) * scale`` (FP8-5.1) with the module's scheme."""
        if ct_layers.ANCHOR in group.tensors:
            return ct_layers.decode(ckpt, _ct_group(group))
        config, layout, findings = _config(ckpt)
        if config is None:
            reason = findings[0].message if findings else "no FP8 layout qformats covers"
            raise fail("fp8.config.invalid", "quantization_config", "an FP8 config (FP8-1.1)", reason)
        scheme = module_schemes(config, [group.name])[group.name]
        if isinstance(scheme, str):
            raise fail("fp8.config.tensor_mismatch", group.name, "a module the config quantizes to FP8", scheme)
        t = module_tensors(ckpt, group, scheme)
        w = codec.dequantize(t, strategy=scheme.strategy, block=scheme.block, group_size=scheme.group_size,
                             scale_name=scheme.scale)
        dtype = ckpt.tensor_info(group.tensors[scheme.scale]).dtype
        return w, (f"float32 (out, in), {LAYOUT_NAMES[scheme.layout]} strategy {scheme.strategy}, e4m3 x "
                   f"{dtype} scale exact{'' if dtype != 'F32' else ' to float32'} (FP8-5)")


CT_SIDE = Side(ANCHOR="weight_scale", layouts=("ct", "fbgemm", "modelopt"))
INV_SIDE = Side(ANCHOR="weight_scale_inv", layouts=("deepseek",))
