"""Tensor specs and frozen layer containers shared by every format (spec/README.md, QF-2).

A format declares the tensors of one layer as :class:`TensorSpec` records (pydantic, so the
JSON Schema is generated from them); :func:`check_tensor` enforces one spec on one array
before any arithmetic touches it. :class:`Layer` is the frozen container the codecs return:
attributes named exactly as the tensors on disk, read-only NumPy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from .errors import fail
from .numerics import first_nonfinite

__all__ = ["TensorSpec", "Layer", "check_tensor", "check_finite", "as_array"]

DType = Literal["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "bfloat16"]


class TensorSpec(BaseModel):
    """Name, dtype and exact shape of one tensor of a layer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    dtype: DType
    shape: tuple[int, ...]
    required: bool = True


def torch_dtype(value: Any) -> str | None:
    """``"bfloat16"`` for a torch bfloat16 tensor and so on; None for anything that is not a torch tensor."""
    if hasattr(value, "detach") and hasattr(value, "numpy") and hasattr(value, "dtype"):
        return str(value.dtype).removeprefix("torch.")
    return None


def as_array(value: Any, name: str) -> np.ndarray:
    """``np.asarray`` that also accepts CPU torch tensors and names the tensor on failure.

    bfloat16 tensors (most real weights) widen exactly to float32 (bfloat16 is the top half of a
    float32); tensors on another device, meta tensors included, are refused rather than copied.
    """
    if torch_dtype(value) is not None:                        # torch.Tensor, without importing torch
        device = str(getattr(value, "device", "cpu"))
        if device != "cpu":
            raise fail("tensor.dtype", name, "a CPU tensor (call .cpu() first; meta tensors hold no data)",
                       f"a tensor on {device}")
        t = value.detach()
        value = (t.float() if torch_dtype(value) == "bfloat16" else t).numpy()
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise fail("tensor.dtype", name, "an array", type(value).__name__) from exc


def check_tensor(name: str, value: Any, dtype: str | Iterable[str], shape: tuple[int, ...] | None) -> np.ndarray:
    """Return ``value`` as an array after checking dtype then shape (QF-2.2, QF-2.3)."""
    allowed = (dtype,) if isinstance(dtype, str) else tuple(dtype)
    if torch_dtype(value) == "bfloat16" and "float32" not in allowed:
        raise fail("tensor.dtype", name, allowed[0] if len(allowed) == 1 else " or ".join(allowed), "bfloat16")
    arr = as_array(value, name)
    if not arr.dtype.isnative:  # '>i8' is named int64 too; every later view would misread it
        raise fail("tensor.dtype", name, "in native (little-endian) byte order", arr.dtype.str)
    if arr.dtype.name not in allowed:
        want = allowed[0] if len(allowed) == 1 else " or ".join(allowed)
        raise fail("tensor.dtype", name, want, arr.dtype.name)
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise fail("tensor.shape", name, f"of shape {tuple(shape)}", tuple(arr.shape))
    return arr


def check_finite(name: str, arr: np.ndarray, code: str = "tensor.nonfinite") -> None:
    """Reject NaN and infinities, naming the first offending index (QF-2.4)."""
    bad = first_nonfinite(arr)
    if bad is not None:
        label, idx = bad
        raise fail(code, name, f"finite {arr.dtype.name}", f"{label} at {idx}")


class Layer:
    """Frozen mapping-like container of one layer's on-disk tensors.

    Attributes are the tensor names (``layer.qweight``); arrays are read-only views, so a
    layer never changes after its checks ran. ``dict(layer.tensors)`` gives a plain mapping.
    """

    __slots__ = ("_tensors", "_params")

    def __init__(self, tensors: Mapping[str, np.ndarray], **params: Any) -> None:
        frozen = {}
        for key, arr in tensors.items():
            if arr is None:
                continue
            arr = np.asarray(arr)
            # A writeable array may still be changed by its owner: keep a private copy. Read-only
            # ones (memory-mapped checkpoints, the codecs' own outputs) are shared as they are.
            view = arr.copy() if arr.flags.writeable else arr.view()
            view.flags.writeable = False
            frozen[key] = view
        object.__setattr__(self, "_tensors", frozen)
        object.__setattr__(self, "_params", dict(params))

    def __getattr__(self, name: str) -> Any:
        tensors = object.__getattribute__(self, "_tensors")
        if name in tensors:
            return tensors[name]
        params = object.__getattribute__(self, "_params")
        if name in params:
            return params[name]
        if name in self._optional_tensors():
            return None
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    @classmethod
    def _optional_tensors(cls) -> tuple[str, ...]:
        return ()

    @property
    def tensors(self) -> Mapping[str, np.ndarray]:
        return dict(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={v.dtype.name}{list(v.shape)}" for k, v in self._tensors.items())
        params = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({shapes}{', ' if params else ''}{params})"
