"""FP8 validity rules on one module (FP8-6) and across fused shards (FP8-6.7). Each returns findings that
name the tensor, the clause (through the code) and the value."""

from __future__ import annotations

import numpy as np

from ... import elements
from ...findings import Finding, finding
from .codec import E8M0_SCALE, SCALE_DTYPES, grid, stored_shape
from .layout import ModuleScheme

__all__ = ["structure", "values", "fused_findings", "block_reader_findings", "FUSED"]

# shards vLLM fuses into one weight (QKVParallelLinear, MergedColumnParallelLinear)
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
TRANSFORMERS = "transformers 5.24.0"


def _where(mask: np.ndarray) -> list[int]:
    return [int(i) for i in np.argwhere(mask)[0]]


def structure(name: str, dtypes: dict[str, str], shapes: dict[str, tuple[int, ...]],
              scheme: ModuleScheme) -> list[Finding]:
    """FP8-6.1 .. 6.3: E4M3FN weight (out, in), its scale present, of a float dtype and the shape FP8-1.2 gives."""
    w, s = f"{name}.weight", f"{name}.{scheme.scale}"
    if "weight" not in dtypes:
        return [finding("fp8.weight.missing", "error", f"'{name}' holds {scheme.scale} but no weight", tensor=w)]
    if dtypes["weight"] != "F8_E4M3" or len(shapes["weight"]) != 2:
        return [finding("fp8.weight.dtype", "error", f"'{w}' must be F8_E4M3 (out, in) (got {dtypes['weight']} "
                        f"{list(shapes['weight'])})", tensor=w)]
    if scheme.scale not in dtypes:
        return [finding("fp8.scale.missing", "error", f"'{w}' is FP8 but '{s}' is absent: a reader that goes on "
                        "decodes the bare E4M3 values, up to 448 (NVIDIA/TensorRT-Model-Connect#1115)", tensor=s)]
    allowed = SCALE_DTYPES + ((E8M0_SCALE,) if scheme.layout == "deepseek" else ())
    if dtypes[scheme.scale] not in allowed:
        return [finding("fp8.scale.dtype", "error", f"'{s}' must be one of {', '.join(allowed)} "
                        f"(got {dtypes[scheme.scale]})", tensor=s)]
    n, k = shapes["weight"]
    want = stored_shape(scheme.layout, scheme.strategy,
                        grid(n, k, scheme.strategy, block=scheme.block, group_size=scheme.group_size))
    got = shapes[scheme.scale]
    fits = (want == (1,) and int(np.prod(got)) == 1 and len(got) <= 2) or tuple(got) == want
    if fits:
        return []
    return [finding("fp8.scale.shape", "error", f"'{s}' must be {list(want) if want else 'impossible'} for weight "
                    f"({n}, {k}), strategy {scheme.strategy}{_cell(scheme)} (got {list(got)}){_short(want, got)}",
                    tensor=s)]


def scale_fmt_findings(name: str, dtype: str, scheme: ModuleScheme) -> list[Finding]:
    """FP8-2.2: the fp8 layout's ``scale_fmt`` against the scale's dtype (ue8m0: F8_E8M0; float: a float dtype)."""
    if scheme.layout != "deepseek" or (dtype == E8M0_SCALE) == (scheme.scale_fmt == "ue8m0"):
        return []
    s = f"{name}.{scheme.scale}"
    return [finding("fp8.scale.fmt_mismatch", "warning", f"'{s}' is {dtype} but the config says scale_fmt "
                    f"{scheme.scale_fmt or 'float'!r}; transformers decodes by the dtype, a reader that trusts "
                    "scale_fmt reads other scales", tensor=s)]


def _cell(scheme: ModuleScheme) -> str:
    if scheme.block:
        return f" {list(scheme.block)} (ceil grid)"
    return f" group_size {scheme.group_size}" if scheme.group_size else ""


def _short(want: tuple[int, ...] | None, got: tuple[int, ...]) -> str:
    if want and len(want) == 2 and len(got) == 2 and got[0] < want[0]:
        return "; too few rows: compressed-tensors 0.20.0 reuses the rows it has and decodes without an error"
    return ""


def values(name: str, t: dict[str, np.ndarray], scheme: ModuleScheme) -> list[Finding]:
    """FP8-6.4 .. 6.6: finite positive scales, no NaN weight byte, a finite positive input_scale."""
    out = _positive(f"{name}.{scheme.scale}", t[scheme.scale], "fp8.scale")
    nan = elements.is_nan_code(t["weight"], elements.E4M3FN)
    if nan.any():
        byte = int(t["weight"][tuple(_where(nan))])
        out.append(finding("fp8.weight.nan", "error", f"'{name}.weight' holds {int(nan.sum())} NaN E4M3FN bytes "
                           f"(first 0x{byte:02X} at {_where(nan)}); writers clamp to +-448", tensor=f"{name}.weight",
                           count=int(nan.sum())))
    if "input_scale" in t:
        out += _positive(f"{name}.input_scale", t["input_scale"], "fp8.input_scale")
    return out


def _positive(tensor: str, s: np.ndarray, code: str) -> list[Finding]:
    s = np.asarray(s, dtype=np.float32)
    bad = ~np.isfinite(s)
    if bad.any():
        return [finding(f"{code}.nonfinite", "error", f"'{tensor}' must be finite (got {s[bad][0]} at "
                        f"{_where(bad)}, {int(bad.sum())} non-finite)", tensor=tensor, count=int(bad.sum()))]
    bad = s <= 0
    if bad.any():
        return [finding(f"{code}.nonpositive", "error", f"'{tensor}' must be positive (got {s[bad][0]} at "
                        f"{_where(bad)}, {int(bad.sum())} not positive)", tensor=tensor, count=int(bad.sum()))]
    return []


def block_reader_findings(name: str, n: int, k: int, scale_shape: tuple[int, ...],
                          scheme: ModuleScheme) -> list[Finding]:
    """FP8-6.8: transformers' CPU ``Fp8Dequantize`` derives the block from the grid (rows // scale_rows) and
    ignores weight_block_size: on a ragged grid it uses other blocks, or raises."""
    if scheme.layout != "deepseek" or scheme.block is None or len(scale_shape) != 2:
        return []
    rows, cols = scale_shape
    if (n, k) == (rows * scheme.block[0], cols * scheme.block[1]):
        return []
    tensor = f"{name}.weight_scale_inv"
    if n % rows or k % cols:
        what = "raises ValueError (weight shape not divisible by the scale grid)"
    else:
        what = (f"derives {n // rows} x {k // cols} blocks where the format means {scheme.block[0]} x "
                f"{scheme.block[1]}, and decodes other weights without an error")
    return [finding("fp8.block.ragged", "warning", f"'{tensor}': weight ({n}, {k}) does not fill its "
                    f"{scheme.block[0]} x {scheme.block[1]} block grid {list(scale_shape)}; {TRANSFORMERS}'s CPU "
                    f"Fp8Dequantize {what}", tensor=tensor)]


def fused_findings(scales: dict[str, float]) -> list[Finding]:
    """FP8-6.7: per-tensor scales of shards vLLM fuses (q/k/v, gate/up) that differ (vllm#54974)."""
    out = []
    parents: dict[tuple[str, tuple[str, ...]], dict[str, float]] = {}
    for module, value in scales.items():
        parent, _, leaf = module.rpartition(".")
        for family in FUSED:
            if leaf in family:
                parents.setdefault((parent, family), {})[leaf] = value
    for (parent, family), members in sorted(parents.items()):
        if len(members) > 1 and len(set(members.values())) > 1:
            listed = ", ".join(f"{leaf} {members[leaf]:.6g}" for leaf in family if leaf in members)
            out.append(finding("fp8.fused.scales_differ", "warning", f"'{parent}': the per-tensor weight scales of "
                               f"the shards vLLM fuses differ ({listed}); vLLM re-quantizes them to the largest "
                               "(requantize_with_max_scale), rounding the others' weights again (vllm#54974)",
                               tensor=f"{parent}.{family[0]}"))
    return out
