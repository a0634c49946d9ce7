"""FP4 validation rules (spec/fp4.md FP4-2, FP4-3): structure first (raising), then every value rule (findings).

``structure_*`` raise a :class:`QFormatsError` on the first structural problem (dtype, rank, grid shape, K
against the group); ``value_findings`` lists every value rule broken, one finding per rule and tensor, naming
the first offending position and byte."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import fail
from ...findings import Finding, finding
from .layout import GROUP

__all__ = ["structure_ct", "structure_gpt_oss", "value_findings", "global_scale_value", "GPT_OSS_PROJ"]

GPT_OSS_PROJ = ("gate_up_proj", "down_proj")
SCALE_DTYPE = {"ct_nvfp4": ("F8_E4M3",), "ct_mxfp4": ("U8",), "gpt_oss_mxfp4": ("U8",),
               "modelopt_nvfp4": ("F8_E4M3",), "modelopt_mxfp4": ("U8",)}


# per layout: (packed weight, global scale, activation global scale, what a reader does with the global scale)
NAMES = {"ct_nvfp4": ("weight_packed", "weight_global_scale", "input_global_scale",
                      "NVFP4 decodes w = e2m1 * weight_scale / weight_global_scale"),
         "ct_mxfp4": ("weight_packed", None, None, ""),
         "modelopt_nvfp4": ("weight", "weight_scale_2", "input_scale",
                            "ModelOpt NVFP4 decodes w = e2m1 * weight_scale * weight_scale_2"),
         "modelopt_mxfp4": ("weight", None, None, "")}
GLOBAL_SHAPE = {"ct_nvfp4": "shape (1,)", "modelopt_nvfp4": "shape ()"}


def _need(t: Mapping[str, Any], name: str, prefix: str, why: str = "") -> np.ndarray:
    if name not in t:
        if why:
            raise fail("fp4.global_scale.missing", f"{prefix}{name}", f"present: {why} (FP4-3.2)", "missing")
        raise fail("tensor.missing", f"{prefix}{name}", "present (FP4-2.1)", "missing")
    return np.asarray(t[name])


def _dtype(dtypes: Mapping[str, str], name: str, prefix: str, allowed: tuple[str, ...]) -> None:
    got = dtypes.get(name)
    if got is not None and got not in allowed:
        raise fail("tensor.dtype", f"{prefix}{name}", " or ".join(allowed), got)


def _grid(scale: np.ndarray, want: tuple[int, ...], k: int, group: int, tensor: str) -> None:
    """FP4-2.2, FP4-2.3: K a multiple of the group; the scale grid is the weight's rows by K / group."""
    if k % group:
        raise fail("fp4.group.shape", tensor, f"in_features a multiple of {group} (FP4-2.2)", k)
    if tuple(scale.shape) != want:
        raise fail("fp4.grid.shape", tensor, f"shape {want}: one scale per {group} weights of each row (FP4-2.3)",
                   tuple(scale.shape))


def structure_ct(t: Mapping[str, Any], dtypes: Mapping[str, str], layout: str, prefix: str = "") -> dict[str, int]:
    """A compressed-tensors or ModelOpt FP4 module's tensors against FP4-2.1 / FP4-4: returns ``{"out", "in"}``."""
    packed_name, global_name, input_name, why = NAMES[layout]
    packed = _need(t, packed_name, prefix)
    _dtype(dtypes, packed_name, prefix, ("U8",))
    if packed.ndim != 2:
        raise fail("tensor.shape", f"{prefix}{packed_name}", "2-D (out_features, in_features / 2) (FP4-2.1)",
                   tuple(packed.shape))
    n, k = packed.shape[0], 2 * packed.shape[1]
    scale = _need(t, "weight_scale", prefix)
    _dtype(dtypes, "weight_scale", prefix, SCALE_DTYPE[layout])
    group = GROUP[layout]
    _grid(scale, (n, k // group), k, group, f"{prefix}weight_scale")
    for name in (global_name, input_name):
        if name is None or (name == input_name and name not in t):
            continue
        g = _need(t, name, prefix, why)
        _dtype(dtypes, name, prefix, ("F32",))
        if g.size != 1:
            raise fail("tensor.shape", f"{prefix}{name}", f"one value, {GLOBAL_SHAPE[layout]} (FP4-2.1)",
                       tuple(g.shape))
    return {"out": n, "in": k}


def structure_gpt_oss(t: Mapping[str, Any], dtypes: Mapping[str, str], proj: str, prefix: str = "") -> dict[str, int]:
    """One gpt-oss projection (``gate_up_proj`` or ``down_proj``) against FP4-2.5: returns ``{"experts", "out",
    "in"}``."""
    blocks = _need(t, f"{proj}_blocks", prefix)
    _dtype(dtypes, f"{proj}_blocks", prefix, ("U8",))
    if blocks.ndim != 4 or blocks.shape[-1] != 16:
        raise fail("tensor.shape", f"{prefix}{proj}_blocks", "4-D (experts, out, in / 32, 16) (FP4-2.5)",
                   tuple(blocks.shape))
    e, r, g, _ = blocks.shape
    scales = _need(t, f"{proj}_scales", prefix)
    _dtype(dtypes, f"{proj}_scales", prefix, ("U8",))
    _grid(scales, (e, r, g), 32 * g, 32, f"{prefix}{proj}_scales")
    if f"{proj}_bias" in t and tuple(np.shape(t[f"{proj}_bias"])) != (e, r):
        raise fail("tensor.shape", f"{prefix}{proj}_bias", f"({e}, {r}): one bias per expert and output (FP4-2.5)",
                   tuple(np.shape(t[f"{proj}_bias"])))
    return {"experts": e, "out": r, "in": 32 * g}


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _byte_rule(code: str, mask: np.ndarray, raw: np.ndarray, tensor: str, what: str) -> list[Finding]:
    if not mask.any():
        return []
    at = _first(mask)
    n = int(mask.sum())
    return [finding(code, "error", f"'{tensor}' holds {n} {what} (first 0x{int(raw[at]):02X} at {list(at)})",
                    tensor=tensor, count=n)]


def global_scale_value(g: np.ndarray) -> float:
    return float(np.asarray(g, dtype=np.float32).reshape(-1)[0])


def value_findings(t: Mapping[str, Any], layout: str, prefix: str = "", proj: str | None = None) -> list[Finding]:
    """FP4-3.2 .. FP4-3.4: every block-scale byte and global scale of one module (or gpt-oss projection)."""
    name = f"{proj}_scales" if proj else "weight_scale"
    raw = np.asarray(t[name]).view(np.uint8)
    tensor = f"{prefix}{name}"
    if layout in GLOBAL_SHAPE:
        out = _byte_rule("fp4.scale.nan", (raw & 0x7F) == 0x7F, raw, tensor,
                         "UE4M3 NaN bytes (0x7F, 0xFF); compressed-tensors decodes their blocks to NaN")
        out += _byte_rule("fp4.scale.sign", (raw >= 0x80) & (raw != 0xFF), raw, tensor,
                          "block-scale bytes with the sign bit set, which UE4M3 does not have; torch reads them as "
                          "negative E4M3FN scales and flips the block's signs, ggml as their magnitude")
        for g in NAMES[layout][1:3]:
            if g in t:
                v = global_scale_value(t[g])
                if not (np.isfinite(v) and v > 0):
                    how = "multiply" if layout.startswith("modelopt") else "divide"
                    out.append(finding("fp4.global_scale.invalid", "error", f"'{prefix}{g}' must be a finite positive "
                                       f"float32 (got {v!r}); readers {how} by it (FP4-3.2)", tensor=f"{prefix}{g}"))
        return out
    return _byte_rule("fp4.scale.e8m0_nan", raw == 0xFF, raw, tensor,
                      "E8M0 bytes 0xFF, NaN in OCP MX v1.0; compressed-tensors and transformers decode them as 2^128 "
                      "(inf, or 2^127 for a 0.5 element)")
