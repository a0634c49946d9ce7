"""FP8 decode (FP8-5): ``W = e4m3(weight) * scale``, the scale broadcast over its cell of the weight.

    w = fp8.dequantize({"weight": codes, "weight_scale": s}, strategy="block", block=(128, 128))

The E4M3FN bytes are decoded by :mod:`qformats.elements` (FE-2). The product of an E4M3 value (4 significant
bits) and a float32, float16 or bfloat16 scale (at most 24) is exact in float64; it is returned rounded once
to float32, which is exact for 16-bit scales and float32's own product for float32 scales (FP8-5.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import elements
from ...errors import fail
from ...layers import round_to

__all__ = ["grid", "expand", "dequantize", "bf16_to_f32", "stored_shape", "as_grid", "modelopt_reading",
           "SCALE_DTYPES"]

SCALE_DTYPES = ("F32", "BF16", "F16")
E8M0_SCALE = "F8_E8M0"       # the fp8 layout's scale_fmt "ue8m0": power-of-two scales, one byte each (FP8-2.2)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def grid(n: int, k: int, strategy: str, *, block: tuple[int, int] | None = None,
         group_size: int | None = None) -> tuple[int, ...] | None:
    """The scale shape FP8-1.2 gives an (n, k) weight; None where K does not split (group strategy)."""
    if strategy == "tensor":
        return (1,)
    if strategy == "channel":
        return (n, 1)
    if strategy == "block":
        bn, bk = block or (n, k)
        return (_ceil(n, bn), _ceil(k, bk))
    if group_size is None or k % group_size:
        return None
    return (n, k // group_size)


def expand(scale: np.ndarray, n: int, k: int, strategy: str, *, block: tuple[int, int] | None = None,
           group_size: int | None = None) -> np.ndarray:
    """The (n, k) float64 scale of every weight: a block's scale over its rows and columns, the last block
    cropped (FP8-1.3); a group's over its ``group_size`` columns; a row's over the row; one for all."""
    s = np.asarray(scale, dtype=np.float64)
    if strategy == "tensor":
        return np.broadcast_to(s.reshape(()), (n, k))
    if strategy == "channel":
        return np.broadcast_to(s.reshape(n, 1), (n, k))
    if strategy == "block":
        bn, bk = block or (n, k)
        return np.repeat(np.repeat(s, bn, axis=0)[:n], bk, axis=1)[:, :k]
    return np.repeat(s, group_size, axis=1)


def stored_shape(layout: str, strategy: str, want: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The scale's shape as a layout's writer stores the grid ``want`` (FP8-3.2: ModelOpt writes a channel
    scale ``(N,)`` and a block scale ``(rows, 1, columns, 1)``); the grid itself for the other layouts."""
    if layout != "modelopt" or want is None:
        return want
    if strategy == "channel":
        return (want[0],)
    return (want[0], 1, want[1], 1) if strategy == "block" else want


def as_grid(scale: np.ndarray, layout: str, strategy: str, n: int, k: int,
            block: tuple[int, int] | None = None) -> np.ndarray:
    """A scale stored as FP8-3.2 says, reshaped to its grid (FP8-1.2); any other shape is returned as is."""
    want = grid(n, k, strategy, block=block)
    stored = stored_shape(layout, strategy, want)
    return scale.reshape(want) if stored != want and tuple(scale.shape) == stored else scale


def modelopt_reading(weight: np.ndarray, grid_scale: np.ndarray, strategy: str,
                     block: tuple[int, int] | None = None) -> np.ndarray:
    """FP8-3.3: ModelOpt 0.47.0's ``FP8QTensor.dequantize(bfloat16)``: the scale rounded to bfloat16 first, the
    product then rounded to bfloat16 (returned as float32 holding bfloat16 values)."""
    n, k = weight.shape
    s16 = round_to(np.asarray(grid_scale, np.float32), "bfloat16")
    with np.errstate(invalid="ignore", over="ignore"):
        w = elements.decode(weight, elements.E4M3FN).astype(np.float64) * expand(s16, n, k, strategy, block=block)
    return round_to(w, "bfloat16")


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 raw bits (how the container hands BF16 out) widened exactly to float32."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def dequantize(layer: Mapping[str, Any], *, strategy: str, block: tuple[int, int] | None = None,
               group_size: int | None = None, scale_name: str = "weight_scale") -> np.ndarray:
    """float32 (out, in): ``e4m3(weight) * scale`` (FP8-5.1). ``weight`` is the raw E4M3FN bytes (uint8
    (n, k)); the scale is float (bfloat16 widened first). Shapes are checked (FP8-1.2), values are not:
    a NaN byte or a NaN scale gives NaN, as every real reader does (FP8-6)."""
    if "weight" not in layer:
        raise fail("fp8.weight.missing", "weight", f"present beside {scale_name}", "absent")
    codes = np.asarray(layer["weight"])
    if codes.ndim != 2 or codes.dtype != np.uint8:
        raise fail("tensor.shape", "weight", "uint8 E4M3FN bytes (out, in)", f"{codes.dtype} {codes.shape}",
                   clause="FP8-1.2")
    if scale_name not in layer:
        raise fail("fp8.scale.missing", scale_name, "present beside an FP8 weight", "absent")
    n, k = codes.shape
    scale = np.asarray(layer[scale_name])
    want = grid(n, k, strategy, block=block, group_size=group_size)
    if want is None or _shape(scale, strategy) != want:
        raise fail("fp8.scale.shape", scale_name, f"shape {want} for weight ({n}, {k}), strategy {strategy}",
                   scale.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        w = elements.decode(codes, elements.E4M3FN).astype(np.float64) * expand(
            scale.astype(np.float32), n, k, strategy, block=block, group_size=group_size)
        return w.astype(np.float32)


def _shape(scale: np.ndarray, strategy: str) -> tuple[int, ...]:
    """A per-tensor scale may be stored (1,), () or (1, 1) (FP8-1.2)."""
    return (1,) if strategy == "tensor" and scale.size == 1 and scale.ndim <= 2 else tuple(scale.shape)
