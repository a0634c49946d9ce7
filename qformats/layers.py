"""What every format's checkpoint side shares: a module's tensors grouped, read, and summarised.

``validate``, the CLI tools and the conformance runner walk the registry
(:mod:`qformats.formats.registry`); each format's ``layers`` module checks and decodes its own
modules with these pieces, so no walker branches on a format's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .findings import Finding, finding
from .stats import Moments

__all__ = ["LayerGroup", "Progress", "load_layer", "tick", "decode_stats"]

Progress = Callable[[int, int, str], None]


@dataclass
class LayerGroup:
    """One quantized module: its name, its format and the suffix -> full tensor name map."""

    name: str
    format: str
    tensors: dict[str, str] = field(default_factory=dict)


def load_layer(ckpt: Any, group: LayerGroup) -> dict[str, np.ndarray]:
    """A layer's tensors by suffix, each memory-mapped by the container reader."""
    return {suffix: ckpt.tensor(full) for suffix, full in group.tensors.items()}


def tick(progress: Progress | None, i: int, total: int, name: str) -> None:
    if progress is not None:
        progress(i, total, name)


def decode_stats(name: str, moments: Moments, findings: list[Finding]) -> dict[str, Any]:
    """``--deep``: the decoded weight must be finite (QF-5.3); per-layer statistics."""
    if moments.nonfinite:
        label, where = moments.first_nonfinite
        findings.append(finding("checkpoint.decode.nonfinite", "error", f"'{name}' decodes to {label} at {where} "
                                f"({moments.nonfinite} non-finite weights)", tensor=name))
        return {"decoded": "non-finite"}
    return moments.row()
