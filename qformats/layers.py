"""What every format's checkpoint side shares: a module's tensors grouped, read, and summarised.

``validate``, the CLI tools and the conformance runner walk the registry
(:mod:`qformats.formats.registry`); each format's ``layers`` module checks and decodes its own
modules with these pieces, so no walker branches on a format's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import QFormatsError
from .findings import Finding, finding
from .stats import Moments

__all__ = ["LayerGroup", "Progress", "load_layer", "tick", "decode_stats", "ReaderValues", "NotEmulated",
           "round_to", "judge_readers"]

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


# -- emulated real readers judged against the reference decode (AWQ-7, CT-7) ---------------------------------


class NotEmulated(Exception):
    """A reader path whose refusals are emulated but whose values are not: its status is ``not judged``."""


@dataclass(frozen=True)
class ReaderValues:
    """What an emulated reader decodes: values ``(out, in)`` held exactly in float64 or float32, and the
    precision the path rounds each weight to (``float32``: exact or one float32 rounding; ``float16``,
    ``bfloat16``: the path's weights are 16-bit floats)."""

    values: np.ndarray
    precision: str = "float32"


def round_to(values: np.ndarray, precision: str) -> np.ndarray:
    """``values`` rounded once to ``precision`` (round to nearest, ties to even; QF-4.3), as float32 (which
    holds every float16 and bfloat16 value).

    Float16 through NumPy's cast to float16, which rounds once; bfloat16 by rounding the
    significand to 8 bits at the value's own exponent (never below bfloat16's smallest normal exponent),
    so a float64 value is not rounded twice on its way through float32.
    """
    x = np.asarray(values)
    if x.dtype != np.float32:
        x = x.astype(np.float64)
    if precision == "float16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    if precision == "bfloat16":
        _, exponent = np.frexp(x)
        exponent = np.maximum(exponent, -125)
        return np.ldexp(np.rint(np.ldexp(x, 8 - exponent)), exponent - 8).astype(np.float32)
    return x.astype(np.float32)


def judge_readers(readers: Mapping[str, Callable[[], ReaderValues]], reference: np.ndarray) -> dict[str, dict]:
    """Each reader's status on one layer against the reference decode (``qformats conformance checkpoint``).

    A reader is ``correct`` when it returns the reference rounded once to its own precision (the best
    its weight dtype can hold; KC-2.2's rule for narrower results), ``wrong`` with the count of weights
    that differ otherwise (+0 and -0 compare equal), ``cannot read`` with the path's refusal (an
    ``argument.invalid`` error whose ``actual`` is the path's own phrase), ``not judged`` when only its
    refusals are emulated.
    """
    out: dict[str, dict] = {}
    for name, read in readers.items():
        try:
            got = read()
        except NotEmulated as why:
            out[name] = {"status": "not judged", "detail": str(why)}
            continue
        except QFormatsError as err:
            detail = err.actual if isinstance(err.actual, str) else err.constraint or str(err)
            out[name] = {"status": "cannot read", "detail": detail}
            continue
        expected = round_to(reference, got.precision)
        wrong = int(np.count_nonzero(got.values != expected))
        out[name] = {"status": "wrong" if wrong else "correct", "wrong_weights": wrong, "judged_at": got.precision}
    return out
