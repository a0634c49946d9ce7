"""Per-layer statistics of a decoded weight: count, sum, sum of squares, max |w|, non-finite count.

``--deep`` reports them for every layer (QF-5.3). Formats whose decode is exact in closed form
(GPTQ, GPTQ-3.7) compute them from the codes; the others fold the decoded array with
:meth:`Moments.of`. Both give a :class:`Moments`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .numerics import first_nonfinite

__all__ = ["Moments"]

CHUNK = 1 << 20  # elements squared at once: no BLAS (threads in every --jobs worker), bounded temporaries


@dataclass(frozen=True)
class Moments:
    """Sums over every decoded weight; non-finite weights are counted, not summed."""

    count: int
    total: float
    squares: float
    max_abs: float
    nonfinite: int = 0
    first_nonfinite: tuple[str, list[int]] | None = None

    @classmethod
    def of(cls, w: np.ndarray) -> Moments:
        """Fold one decoded array (any shape, any memory order) in float64."""
        flat = w.ravel(order="K").astype(np.float64)  # no copy before the cast, whatever the order
        total = float(flat.sum())
        bad, first = 0, None
        if not np.isfinite(total):  # a float64 sum of finite float16/32 values cannot overflow
            finite = np.isfinite(flat)
            bad, first = int(flat.size - np.count_nonzero(finite)), first_nonfinite(w)
            flat = np.where(finite, flat, 0.0)
            total = float(flat.sum())
        max_abs = max(float(flat.max()), -float(flat.min())) if flat.size else 0.0
        squares = math.fsum(float(np.sum(np.square(part))) for part in np.array_split(flat, -(-flat.size // CHUNK) or 1))
        return cls(count=int(flat.size), total=total, squares=squares, max_abs=max_abs,
                   nonfinite=bad, first_nonfinite=first)

    def row(self) -> dict[str, float]:
        """The per-layer statistics ``--deep`` reports (finite weights only)."""
        return {"mean": self.mean, "std": self.std, "max_abs": self.max_abs}

    @property
    def mean(self) -> float:
        return self.total / max(self.count, 1)

    @property
    def std(self) -> float:
        """Population standard deviation of the finite weights."""
        return float(np.sqrt(max(self.squares / max(self.count, 1) - self.mean ** 2, 0.0)))
