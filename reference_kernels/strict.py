"""The prepared path of every kernel as a conformance subject, run under a guard that refuses host work (KC-7).

    qformats conformance kernel reference_kernels.strict:gptq_dequantize_v2 --format gptq_v2 --op dequantize

Each entry point takes the call contract's arguments (DESIGN.md §6), runs the format's ``prepare`` (the
validating checks, KC-4.2) and converts ``x`` to float16 on the layer's device, then makes the prepared
call inside :func:`no_host_work`: there, any torch operation issued from ``reference_kernels`` code other
than reading a tensor's metadata raises (``.item()``, ``bool()``, ``.cpu()``, ``.numpy()``, ``.tolist()``,
conversions, arithmetic, views), and the call must allocate exactly one tensor, its output (KC-7.2).
What Triton itself does with the tensors (its interpreter copies them to run a kernel on the CPU) is the
launch, not the prepared code's host work, and is let through. So the conformance matrix of each format,
run on these entries, checks the prepared path's values and the guard at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from importlib import import_module
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostWork", "no_host_work"]

# What reading a prepared layer and its output needs: shapes, dtypes, devices, version counters (``__get__``
# of a property), sizes; and the one allocation of the output.
METADATA = frozenset({"__get__", "dim", "size", "stride", "numel", "is_contiguous", "element_size", "data_ptr"})
ALLOCATIONS = frozenset({"empty", "zeros"})


class HostWork(RuntimeError):
    """Raised inside :func:`no_host_work` where the prepared path does more than launch its kernels."""


class _Guard(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.allocations: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        where = _our_caller()
        if where is not None:
            name = getattr(func, "__name__", repr(func))
            if name in ALLOCATIONS:
                self.allocations.append(f"torch.{name} at {where}")
            elif name not in METADATA:
                raise HostWork(f"host work in the prepared path (KC-7.2): {name} at {where}")
        return func(*args, **(kwargs or {}))


def _our_caller() -> str | None:
    """``file:line`` of the nearest ``reference_kernels`` frame issuing the current torch call, past torch's
    own Python frames; None when the caller is anything else (Triton's launcher or interpreter)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("torch"):
        frame = frame.f_back
    if frame is None:
        return None
    module = frame.f_globals.get("__name__", "")
    if module.startswith("reference_kernels.") and module != __name__:
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return None


@contextlib.contextmanager
def no_host_work() -> Iterator[_Guard]:
    """Refuse host work by ``reference_kernels`` code in the block, and check it allocated one tensor."""
    guard = _Guard()
    with guard:
        yield guard
    if len(guard.allocations) != 1:
        raise HostWork(f"the prepared call allocated {len(guard.allocations)} tensors, not its output alone "
                       f"(KC-7.2): {guard.allocations}")


# -- the entries ----------------------------------------------------------------------------------------

def _run(module: str, op: str, kwargs: dict[str, Any], **fixed: Any) -> Any:
    kernels = import_module(f"reference_kernels.{module}")
    x = kwargs.pop("x", None)
    numpy_in = not any(isinstance(v, torch.Tensor) for v in kwargs.values())
    p = kernels.prepare(**kwargs, **fixed)
    if op == "dequantize":
        with no_host_work():
            out = kernels.dequantize_prepared(p)
    else:
        xt = (x if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))).to(p.device, torch.float16)
        with no_host_work():
            out = kernels.matmul_prepared(p, xt.contiguous())
    if numpy_in and out.dtype != torch.bfloat16:   # NumPy has no bfloat16: the runner widens that tensor itself
        return out.cpu().numpy()
    return out


def _entry(module: str, op: str, **fixed: Any):
    def entry(**kwargs: Any) -> Any:
        return _run(module, op, kwargs, **fixed)
    entry.__name__ = entry.__qualname__ = f"{module}_{op}"
    entry.__doc__ = f"reference_kernels.{module}: prepare, then {op}_prepared under no_host_work()"
    return entry


gptq_dequantize_v1 = _entry("gptq", "dequantize", version="v1")
gptq_dequantize_v2 = _entry("gptq", "dequantize", version="v2")
gptq_matmul_v1 = _entry("gptq", "matmul", version="v1")
gptq_matmul_v2 = _entry("gptq", "matmul", version="v2")
FORMATS = ("q4_k", "q5_k", "q6_k", "q8_0", "spqr", "awq", "ctensors")
for _module in FORMATS:
    for _op in ("dequantize", "matmul"):
        globals()[f"{_module}_{_op}"] = _entry(_module, _op)
__all__ += ["gptq_dequantize_v1", "gptq_dequantize_v2", "gptq_matmul_v1", "gptq_matmul_v2",
            *(f"{m}_{op}" for m in FORMATS for op in ("dequantize", "matmul"))]
bnb_dequantize = _entry("bnb", "dequantize")      # bitsandbytes 4-bit; bnb_4bit has dequantize cases only, so
bnb_matmul = _entry("bnb", "matmul")              # tests/kernels/test_bnb_kernels.py runs this one
__all__ += ["bnb_dequantize", "bnb_matmul"]
for _strategy in ("tensor", "channel", "block"):      # FP8 (KC-1.11): one module, the strategy fixed per entry
    for _op in ("dequantize", "matmul"):
        globals()[f"fp8_{_strategy}_{_op}"] = _entry("fp8", _op, strategy=_strategy)
        globals()[f"fp8_{_strategy}_{_op}"].__name__ = f"fp8_{_strategy}_{_op}"
        __all__.append(f"fp8_{_strategy}_{_op}")
# NVFP4 and MXFP4 share one module; the format is prepare's keyword (KC-1.12)
fp4_dequantize_nvfp4 = _entry("fp4", "dequantize", format="nvfp4")
fp4_matmul_nvfp4 = _entry("fp4", "matmul", format="nvfp4")
fp4_dequantize_mxfp4 = _entry("fp4", "dequantize", format="mxfp4")
fp4_matmul_mxfp4 = _entry("fp4", "matmul", format="mxfp4")
__all__ += ["fp4_dequantize_nvfp4", "fp4_matmul_nvfp4", "fp4_dequantize_mxfp4", "fp4_matmul_mxfp4"]
