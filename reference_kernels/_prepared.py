"""What every format's ``prepare`` returns (KC-7): a layer checked once, frozen, that refuses to run
after its tensors were written to.

A prepared call must do no host work (KC-7.2): no copy to the host, no ``.item()``/``bool()`` sync, no
allocation but its output. So the staleness check reads no tensor data: torch bumps a tensor's version
counter on every in-place write (views share their base's counter), and ``prepare`` captures the counters
of the tensors the kernels read; each prepared call compares them, a few integer reads.
"""

from __future__ import annotations

import torch

from qformats.errors import fail

__all__ = ["Prepared", "checked_x", "block_entries", "matmul_output"]


class Prepared:
    """Base of the formats' prepared layers: attributes set in ``__init__``, then frozen by ``_freeze``."""

    _frozen = False

    def __setattr__(self, name: str, value: object) -> None:
        if self._frozen:                             # a rebound tensor would bypass the checks prepare ran
            raise AttributeError(f"{type(self).__name__} is frozen: prepare the layer again")
        object.__setattr__(self, name, value)

    def _freeze(self, *names: str) -> None:
        """Capture the version counters of the tensor attributes ``names`` (the ones the kernels read)."""
        watched = tuple((name, getattr(self, name), _version(getattr(self, name))) for name in names)
        object.__setattr__(self, "_watched", watched)
        object.__setattr__(self, "_frozen", True)

    def check_unchanged(self) -> None:
        """KC-7.3: refuse a layer written to since ``prepare`` (its checks no longer hold); no data is read."""
        for name, t, version in self._watched:
            now = _version(t)
            if now != version:
                raise fail("kernel.layer.changed", name, "unchanged since prepare (KC-7.3): prepare the layer again",
                           f"written to in place {now - version} time(s) since")


def block_entries(prepare, dequantize_prepared, matmul_prepared):
    """``dequantize``, ``matmul`` and ``prepare`` of a GGUF block type (KC-1.5) from its ``prepare(inputs, rows,
    n)``: each entry point is prepare plus the prepared call (KC-7.1)."""
    from ._arrays import Inputs

    def dequantize(*, blocks, rows, n):
        inputs = Inputs(blocks=blocks)
        return inputs.out(dequantize_prepared(prepare(inputs, rows, n)))

    def matmul(*, blocks, rows, n, x):
        inputs = Inputs(blocks=blocks, x=x)
        return inputs.out(matmul_prepared(prepare(inputs, rows, n), inputs.t["x"].to(torch.float16)))

    def prepare_layer(*, blocks, rows, n):
        """Check the blocks once and compute whether every |W| fits float16 (the batched matmul's path)."""
        return prepare(Inputs(blocks=blocks), rows, n)

    prepare_layer.__name__ = prepare_layer.__qualname__ = "prepare"
    return dequantize, matmul, prepare_layer


def _version(t: torch.Tensor) -> int:
    """The version counter; an inference-mode tensor has none and cannot be written outside that mode: 0."""
    try:
        return t._version
    except RuntimeError:
        return 0


def checked_x(xt: torch.Tensor, k: int, device: torch.device) -> torch.Tensor:
    """``x`` as a prepared matmul takes it (KC-7.2): contiguous float16 ``(batch, k)`` on the layer's device,
    so the call converts nothing. The shape check and its message are the validating entry points' own."""
    if xt.ndim != 2 or xt.shape[1] != k:
        raise fail("tensor.shape", "x", f"(batch, {k}) float16", tuple(xt.shape))
    if xt.dtype != torch.float16 or xt.device != device or not xt.is_contiguous():
        raise fail("tensor.dtype", "x", f"contiguous float16 on {device} (KC-7.2)",
                   f"{str(xt.dtype).removeprefix('torch.')} on {xt.device}"
                   f"{'' if xt.is_contiguous() else ', not contiguous'}")
    return xt


def matmul_output(p: Prepared, xt: torch.Tensor) -> tuple[int, torch.Tensor]:
    """The start of every prepared matmul: the layer unchanged (KC-7.3), ``xt`` as it must be (KC-7.2), and the
    call's one allocation, its float16 ``(batch, out)`` output; returns the batch and that output."""
    p.check_unchanged()
    m = checked_x(xt, p.k, p.device).shape[0]
    return m, torch.empty((m, p.n), dtype=torch.float16, device=p.device)
