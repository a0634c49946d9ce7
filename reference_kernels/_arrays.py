"""NumPy or torch in, the same kind out: the launchers' one conversion rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["Inputs"]


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
        if not arr.flags.writeable:                 # torch wants writeable memory; never ours to write
            arr = arr.copy()
        return torch.from_numpy(arr).to(self.device)

    def out(self, result: torch.Tensor) -> Any:
        return result.cpu().numpy() if self.numpy else result
