"""NumPy or torch in, the same kind out: the launchers' one conversion rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from qformats.errors import fail

__all__ = ["Inputs", "checked_blocks", "host_copy", "checked_group_size"]


class Inputs:
    """Converts the call's arrays to contiguous torch tensors on one device and the results back."""

    def __init__(self, **arrays: Any) -> None:
        tensors = [a for a in arrays.values() if isinstance(a, torch.Tensor)]
        self.numpy = not tensors
        self.device = tensors[0].device if tensors else torch.device("cpu")
        self.t = {name: self._tensor(a) for name, a in arrays.items()}

    def _tensor(self, a: Any) -> torch.Tensor:
        if isinstance(a, torch.Tensor):
            return a.to(self.device).contiguous()
        arr = np.ascontiguousarray(a)
        if not arr.flags.writeable or (isinstance(a, np.ndarray) and np.may_share_memory(arr, a)):
            arr = arr.copy()        # torch wants writeable memory, and a prepared layer owns its tensors (KC-7.3)
        return torch.from_numpy(arr).to(self.device)

    def out(self, result: torch.Tensor) -> Any:
        return result.cpu().numpy() if self.numpy else result


def checked_blocks(blocks: torch.Tensor, rows: int, n: int, name: str, block: int, block_bytes: int) -> torch.Tensor:
    """The blocks of a GGUF type, refused before launch unless uint8 ``(rows, n // block * block_bytes)``
    with ``n`` a positive multiple of the block (GGML-1.1, GGML-1.2)."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0 or n % block:
        raise fail("ggml.n.not_multiple", "n", f"a positive multiple of {block} ({name})", n)
    want = (rows, n // block * block_bytes)
    if blocks.dtype != torch.uint8 or tuple(blocks.shape) != want:
        raise fail("ggml.blocks.shape", "blocks", f"uint8 of shape {want}", f"{blocks.dtype} {tuple(blocks.shape)}")
    return blocks


def host_copy(a: Any) -> Any:
    """What the NumPy checks read: a CPU copy of a device tensor (they refuse other devices), else ``a``."""
    return a.detach().cpu() if isinstance(a, torch.Tensor) else a


def checked_group_size(group_size: Any, clause: str) -> int:
    """``-1`` or a positive integer (the call contract's ``clause``), before the format's own checks hold it
    to ``K`` and the scales."""
    if isinstance(group_size, bool) or not isinstance(group_size, (int, np.integer)) or \
            (group_size != -1 and group_size <= 0):
        raise fail("argument.invalid", "group_size", f"-1 or a positive integer ({clause})", group_size)
    return int(group_size)
