"""GPTQ validity rules (spec/gptq.md): each function enforces named clauses and raises or reports.

Structural rules (wrong dtype, shape, range) raise :class:`QFormatsError`; legal-but-risky
inputs (a non-trivial g_idx without desc_act) come back as warning findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import fail
from ...findings import Finding, finding
from ...tensors import as_array, check_finite, check_tensor
from .layout import check_bits, group_rows, n_groups

__all__ = [
    "LayerDims",
    "layer_dims",
    "checked_tensors",
    "check_codes",
    "check_zeros",
    "check_qzeros",
    "check_g_idx_range",
    "infer_group_size",
    "check_g_idx",
    "trivial_g_idx",
    "is_trivial_g_idx",
    "g_idx_findings",
]


@dataclass(frozen=True)
class LayerDims:
    """K, N, G and group size of one layer, as read off its tensors (GPTQ-2.2)."""

    in_features: int
    out_features: int
    n_groups: int
    group_size: int


def _tensor(layer: Any, name: str) -> Any:
    if isinstance(layer, Mapping):
        return layer.get(name)
    return getattr(layer, name, None)


def layer_dims(layer: Any, bits: int, group_size: int | None = None) -> LayerDims:
    """Read K, N, G off ``qweight``/``qzeros``; infer the group size when not given (GPTQ-5.5)."""
    bits = check_bits(bits)
    qweight = check_tensor("qweight", _require(layer, "qweight"), "int32", None)
    qzeros = check_tensor("qzeros", _require(layer, "qzeros"), "int32", None)
    for name, arr in (("qweight", qweight), ("qzeros", qzeros)):
        if arr.ndim != 2:
            raise fail("tensor.shape", name, "two-dimensional", tuple(arr.shape))
    if 0 in qweight.shape or 0 in qzeros.shape:
        raise fail("tensor.shape", "qweight" if 0 in qweight.shape else "qzeros",
                   "non-empty (a layer has K, N and G of at least 1)", tuple((qweight if 0 in qweight.shape else qzeros).shape))
    k = qweight.shape[0] * 32 // bits
    if (qweight.shape[0] * 32) % bits:
        raise fail("tensor.shape", "qweight", f"(K * {bits} / 32, N) for an integer K", tuple(qweight.shape))
    g = qzeros.shape[0]
    if group_size is None:
        group_size = infer_group_size(_tensor(layer, "g_idx"), k, g)
    if n_groups(k, group_size) != g:
        raise fail("tensor.shape", "qzeros", f"{n_groups(k, group_size)} rows (ceil(K={k} / group_size={group_size}))", g)
    return LayerDims(k, qweight.shape[1], g, group_size)


def infer_group_size(g_idx: Any, k: int, groups: int) -> int:
    """Every group but the last is full (GPTQ-5.2), so the largest group is the group size.

    Without g_idx (or with one whose largest group does not give ``G`` groups), ``ceil(K / G)``;
    that is ambiguous only for a short last group, which a caller resolves by passing ``group_size``.
    """
    if groups == 1:
        return -1
    if g_idx is not None:
        gi = check_tensor("g_idx", g_idx, ("int32", "int64"), (k,))
        check_g_idx_range(gi, groups)
        largest = int(np.bincount(gi, minlength=groups).max())
        if -(-k // largest) == groups:   # consistent: a short last group (K % gs != 0) included
            return largest
    return -(-k // groups)               # else GPTQ-5.2 reports the uneven groups against ceil(K / G)


def _require(layer: Any, name: str) -> Any:
    value = _tensor(layer, name)
    if value is None:
        raise fail("tensor.missing", name, "present in the layer", "absent")
    return value


def checked_tensors(layer: Any, bits: int, group_size: int | None = None) -> tuple[LayerDims, dict[str, np.ndarray]]:
    """Every tensor of a layer checked for dtype, shape and finiteness (GPTQ-2.1, 2.2, 3.5, 5.1).

    A missing ``g_idx`` is filled with the trivial one; ``bias`` is optional.
    """
    bits = check_bits(bits)
    dims = layer_dims(layer, bits, group_size)
    k, n, g = dims.in_features, dims.out_features, dims.n_groups
    if (n * bits) % 32:
        raise fail("bits.length", "out_features", f"a multiple of {32 // np.gcd(bits, 32)} for {bits}-bit qzeros", n)
    out = {
        "qweight": check_tensor("qweight", _tensor(layer, "qweight"), "int32", (k * bits // 32, n)),
        "qzeros": check_tensor("qzeros", _tensor(layer, "qzeros"), "int32", (g, n * bits // 32)),
        "scales": check_tensor("scales", _require(layer, "scales"), "float16", (g, n)),
    }
    check_finite("scales", out["scales"], code="gptq.scales.nonfinite")
    g_idx = _tensor(layer, "g_idx")
    if g_idx is None:
        out["g_idx"] = trivial_g_idx(k, dims.group_size)
    else:
        out["g_idx"] = check_tensor("g_idx", g_idx, ("int32", "int64"), (k,))
        check_g_idx_range(out["g_idx"], g)
    bias = _tensor(layer, "bias")
    if bias is not None:
        out["bias"] = check_tensor("bias", bias, "float16", (n,))
        check_finite("bias", out["bias"])
    return dims, out


def check_codes(codes: Any, bits: int) -> np.ndarray:
    """Codes are a non-empty (in, out) integer array with values in [0, 2^b - 1] (GPTQ-3.1)."""
    arr = as_array(codes, "codes")
    if arr.dtype.kind not in "iu":
        raise fail("tensor.dtype", "codes", "an integer array (in_features, out_features)", arr.dtype.name)
    if arr.ndim != 2 or 0 in arr.shape:
        raise fail("tensor.shape", "codes", "non-empty (in_features, out_features)", tuple(arr.shape))
    _check_range(arr, "codes", bits, "gptq.codes.range")
    return arr


def check_zeros(zeros: Any, bits: int, shape: tuple[int, int] | None = None) -> np.ndarray:
    """Zero points are integers in [0, 2^b - 1] (GPTQ-3.3), of ``shape`` (groups, out) when given."""
    arr = as_array(zeros, "zeros")
    if arr.dtype.kind not in "iu":
        raise fail("tensor.dtype", "zeros", "an integer array", arr.dtype.name)
    if arr.ndim != 2 or (shape is not None and arr.shape != shape):
        raise fail("tensor.shape", "zeros", f"of shape {shape or '(groups, out_features)'}", tuple(arr.shape))
    _check_range(arr, "zeros", bits, "gptq.zero.range")
    return arr


def check_qzeros(qzeros: Any, bits: int, out_features: int | None = None) -> np.ndarray:
    """``qzeros`` is non-empty int32 (G, N * b / 32) (GPTQ-2.1, 2.2)."""
    arr = check_tensor("qzeros", qzeros, "int32", None)
    width = None if out_features is None else out_features * bits / 32
    whole_words = arr.ndim == 2 and (arr.shape[1] * 32) % bits == 0
    if not whole_words or 0 in arr.shape or (width is not None and arr.shape[1] != width):
        want = "(G, N * bits / 32)" if width is None else f"(G, {width:g})"
        raise fail("tensor.shape", "qzeros", f"non-empty {want}", tuple(arr.shape))
    return arr


def _check_range(arr: np.ndarray, name: str, bits: int, code: str) -> None:
    maxq = (1 << bits) - 1
    bad = (arr < 0) | (arr > maxq)
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        raise fail(code, name, f"in [0, {maxq}] for {bits}-bit", f"{int(arr[tuple(idx)])} at {idx}")


def trivial_g_idx(in_features: int, group_size: int) -> np.ndarray:
    """``g_idx[k] = k // group_size``, all zeros for group_size -1 (GPTQ-5.3, 5.5)."""
    return (np.arange(in_features) // group_rows(in_features, group_size)).astype(np.int32)


def is_trivial_g_idx(g_idx: np.ndarray, group_size: int) -> bool:
    return bool(np.array_equal(g_idx, trivial_g_idx(len(g_idx), group_size)))


def check_g_idx_range(g_idx: np.ndarray, groups: int) -> None:
    """Every ``g_idx[k]`` lies in [0, G) (GPTQ-5.1); checked before any gather uses it."""
    bad = (g_idx < 0) | (g_idx >= groups)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise fail("gptq.g_idx.range", "g_idx", f"in [0, {groups}) for {groups} groups",
                   f"{int(g_idx[k])} at [{k}]")


def check_g_idx(g_idx: np.ndarray, groups: int, group_size: int) -> None:
    """Range (GPTQ-5.1), then every group holds exactly group_size rows, the last may be short (5.2)."""
    check_g_idx_range(g_idx, groups)
    k = len(g_idx)
    size = group_rows(k, group_size)
    expected = np.full(groups, size, np.int64)
    expected[-1] = k - size * (groups - 1)
    counts = np.bincount(g_idx, minlength=groups)
    wrong = np.flatnonzero(counts != expected)
    if wrong.size:
        grp = int(wrong[0])
        raise fail("gptq.g_idx.group_sizes", "g_idx", f"{int(expected[grp])} rows in group {grp}",
                   f"{int(counts[grp])} rows")


def g_idx_findings(g_idx: np.ndarray, group_size: int, *, desc_act: bool | None, tensor: str = "g_idx") -> list[Finding]:
    """Warn when a non-trivial g_idx comes with desc_act false (GPTQ-5.4); None (no config) says nothing.

    vLLM's gptq path drops g_idx unless desc_act is set, GPTQModel honours it: the two decode
    such a layer differently.
    """
    if desc_act is not False or is_trivial_g_idx(g_idx, group_size):
        return []
    rows = int(np.count_nonzero(g_idx != trivial_g_idx(len(g_idx), group_size)))
    return [finding("gptq.g_idx.ignored_without_desc_act", "warning",
                    f"g_idx is not k // group_size in {rows} rows but desc_act is false: "
                    "vLLM ignores it, GPTQModel honours it", tensor=tensor)]
