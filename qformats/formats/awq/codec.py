"""AWQ GEMM packing, decoding and conversion to GPTQ v2 (spec/awq.md AWQ-2 .. AWQ-4).

    layer = awq.pack(codes, zeros, scales, group_size=128)   # codes (in, out), zeros/scales (G, out)
    w = awq.dequantize(layer, group_size=128)                # (out, in) float32, exactly s * (q - z)
    g = awq.to_gptq(layer, group_size=128)                   # a GPTQ v2 layer with the same weights
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import fail
from ...tensors import Layer, check_finite, check_tensor
from .layout import BITS, ORDER, PACK, n_groups

__all__ = ["AWQLayer", "pack", "unpack", "dequantize", "to_gptq", "from_gptq", "pack_words", "unpack_words",
           "group_size_of"]

MAXQ = (1 << BITS) - 1


class AWQLayer(Layer):
    """One packed AWQ GEMM layer: ``qweight``, ``qzeros``, ``scales`` and optional ``bias``."""

    @classmethod
    def _optional_tensors(cls) -> tuple[str, ...]:
        return ("bias",)


def pack_words(values: np.ndarray, *, order: tuple[int, ...] = ORDER) -> np.ndarray:
    """(rows, N) 4-bit values -> int32 (rows, N / 8): field i (bits 4i..4i+3) of word t holds column
    8t + order[i] (AWQ-2.3)."""
    rows, n = values.shape
    grouped = values.astype(np.uint32).reshape(rows, n // PACK, PACK)[:, :, list(order)]
    words = np.zeros((rows, n // PACK), np.uint32)
    for i in range(PACK):
        words |= grouped[:, :, i] << np.uint32(BITS * i)
    return words.view(np.int32)


def unpack_words(words: np.ndarray, *, order: tuple[int, ...] = ORDER) -> np.ndarray:
    """Inverse of :func:`pack_words`: int32 (rows, W) -> uint8 (rows, 8 W) in column order."""
    w = np.asarray(words).view(np.uint32)
    rows, n_words = w.shape
    out = np.empty((rows, n_words, PACK), np.uint8)
    for i in range(PACK):
        out[:, :, order[i]] = (w >> np.uint32(BITS * i)) & MAXQ
    return out.reshape(rows, n_words * PACK)


def group_size_of(in_features: int, groups: int) -> int:
    """The group size G groups of K rows imply (AWQ-2.2): K / G, which must be whole; 1 group is -1."""
    if groups <= 0 or in_features % groups:
        raise fail("awq.group.shape", "scales", f"a row count dividing in_features {in_features} (AWQ-2.2)", groups)
    return -1 if groups == 1 else in_features // groups


def _field_array(name: str, value: Any, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 2 or tuple(arr.shape) != shape:
        raise fail("tensor.shape", name, f"of shape {shape}", tuple(arr.shape))
    if not np.issubdtype(arr.dtype, np.integer):
        raise fail("tensor.dtype", name, "an integer array", arr.dtype.name)
    bad = (arr < 0) | (arr > MAXQ)
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        code = "awq.codes.range" if name == "codes" else "awq.zero.range"
        raise fail(code, name, "in [0, 15]", f"{arr[tuple(idx)]} at {idx}")
    return arr


def pack(codes: Any, zeros: Any, scales: Any, *, group_size: int, bias: Any = None) -> AWQLayer:
    """Pack codes ``(in, out)``, zero points and float16 scales ``(G, out)`` into an AWQ GEMM layer (AWQ-2)."""
    q = np.asarray(codes)
    if q.ndim != 2:
        raise fail("tensor.shape", "codes", "2-D (in_features, out_features)", tuple(q.shape))
    k, n = q.shape
    if n % PACK:
        raise fail("bits.length", "codes", f"out_features a multiple of {PACK} (AWQ-2.2)", n)
    g = n_groups(k, group_size)
    q = _field_array("codes", q, (k, n))
    z = _field_array("zeros", zeros, (g, n))
    s = check_tensor("scales", scales, "float16", (g, n))
    check_finite("scales", s, code="awq.scales.nonfinite")
    tensors = {"qweight": pack_words(q), "qzeros": pack_words(z), "scales": s}
    if bias is not None:
        tensors["bias"] = check_tensor("bias", bias, "float16", (n,))
    return AWQLayer(tensors, group_size=group_size)


def checked_tensors(layer: Any, group_size: int | None = None) -> tuple[int, dict[str, np.ndarray]]:
    """(group size, tensors) after the AWQ-2.1/2.2 dtype and shape checks and finite scales (AWQ-3.3)."""
    get = layer.get if isinstance(layer, dict) else lambda name: getattr(layer, name, None)
    missing = [name for name in ("qweight", "qzeros", "scales") if get(name) is None]
    if missing:
        raise fail("tensor.missing", missing[0], "present (AWQ-2.1)", "absent")
    qweight = check_tensor("qweight", get("qweight"), "int32", None)
    if qweight.ndim != 2:
        raise fail("tensor.shape", "qweight", "2-D (in_features, out_features / 8)", tuple(qweight.shape))
    k, n = qweight.shape[0], qweight.shape[1] * PACK
    scales = check_tensor("scales", get("scales"), "float16", None)
    if scales.ndim != 2 or scales.shape[1] != n:
        raise fail("tensor.shape", "scales", f"of shape (groups, {n}) (AWQ-2.2)", tuple(scales.shape))
    if group_size is None:
        group_size = group_size_of(k, scales.shape[0])
    g = n_groups(k, group_size)
    check_tensor("scales", scales, "float16", (g, n))
    qzeros = check_tensor("qzeros", get("qzeros"), "int32", (g, n // PACK))
    check_finite("scales", scales, code="awq.scales.nonfinite")
    return group_size, {"qweight": qweight, "qzeros": qzeros, "scales": scales}


def unpack(layer: Any, *, group_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Codes ``(in, out)`` and zero points ``(G, out)``, uint8, of a layer (AWQ-2.3)."""
    _, t = checked_tensors(layer, group_size)
    return unpack_words(t["qweight"]), unpack_words(t["qzeros"])


def dequantize(layer: Any, *, group_size: int | None = None) -> np.ndarray:
    """The weight ``(out_features, in_features)`` as float32, exactly ``s * (q - z)`` (AWQ-3.1).

    ``group_size`` defaults to what the scales imply (K / their rows).
    """
    gs, t = checked_tensors(layer, group_size)
    codes, zeros = unpack_words(t["qweight"]), unpack_words(t["qzeros"])
    k = codes.shape[0]
    rows = k if gs == -1 else gs
    q = codes.reshape(k // rows, rows, -1).astype(np.float32)
    q -= zeros.astype(np.float32)[:, None, :]
    q *= t["scales"].astype(np.float32)[:, None, :]
    return np.ascontiguousarray(q.reshape(k, -1).T)


def to_gptq(layer: Any, *, group_size: int | None = None, version: str = "v2") -> Any:
    """The same weights as a GPTQ layer (AWQ-4.1): codes repacked along the input axis, zeros in GPTQ
    order; always lossless to v2, refused for v1 where a zero point is 0 (GPTQ-3.4)."""
    from .. import gptq

    gs, t = checked_tensors(layer, group_size)
    codes, zeros = unpack_words(t["qweight"]), unpack_words(t["qzeros"])
    bias = getattr(layer, "bias", None) if not isinstance(layer, dict) else layer.get("bias")
    return gptq.pack(codes, zeros, t["scales"], bits=BITS, version=version, group_size=gs, bias=bias)


def from_gptq(layer: Any, *, bits: int, version: str, group_size: int | None = None) -> AWQLayer:
    """A GPTQ layer as AWQ GEMM (AWQ-4.2), refused with the reason where AWQ cannot hold it: bits other
    than 4, act-order (a non-trivial g_idx), a short last group (K % group_size != 0)."""
    from .. import gptq
    from ..gptq import checks as gchecks

    if bits != BITS:
        raise fail("awq.convert.unrepresentable", "bits", "4 (AWQ GEMM stores 4-bit codes only, AWQ-4.2)", bits)
    dims, t = gchecks.checked_tensors(layer, bits, group_size)
    gs = dims.group_size
    if gs != -1 and dims.in_features % gs:
        raise fail("awq.convert.unrepresentable", "group_size",
                   f"a divisor of in_features {dims.in_features}: AWQ has no short last group (AWQ-4.2)", gs)
    if not gchecks.is_trivial_g_idx(t["g_idx"], gs):
        raise fail("awq.convert.unrepresentable", "g_idx",
                   "trivial (k // group_size): AWQ has no g_idx, so act-order layers cannot be expressed (AWQ-4.2)",
                   "a permuted g_idx")
    codes, zeros = gptq.unpack(t, bits=bits, version=version, group_size=gs)
    bias = t.get("bias") if isinstance(t, dict) else None
    return pack(codes, zeros, t["scales"], group_size=gs, bias=bias)
