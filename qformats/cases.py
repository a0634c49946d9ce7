"""Conformance cases: the data a kernel or writer is called with, and what its answer is judged by.

A case is data plus one expectation (ONNX's ``expect``): the keyword arrays of the call as the
on-disk tensors (``inputs``), its scalar keywords (``params``), data only the judge sees (``aux``:
the logical codes behind a packed layer, say), the clauses it exercises and feature tags (DESIGN.md
§5). Each format package builds its own cases (``qformats/formats/<name>/cases.py``) from the
reference encoders with a fixed seed; :func:`case_digest` is the sha256 the fixture manifest pins,
so a case regenerated on another machine is proven to be the same bytes before it is run.

``expect`` says what a conforming subject does with the case:

- ``values``: returns the reference values (dequantize, matmul, pack, quantize);
- ``reject``: the input is non-conforming and a reader must raise (GPTQ-3.4 v1 zero-0 fields),
  a writer must refuse it (GPTQ v1 zero point 0);
- ``informative``: the spec leaves the result open (q4_K inf/NaN super-scales, Q4K-3.3); compared
  NaN-aware, a difference is a warning, never a failure.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = ["Case", "case_bytes", "case_digest", "READ_OPS", "Expect", "judge_blocks", "judge_packed"]

READ_OPS = ("dequantize", "matmul")
Expect = Literal["values", "reject", "informative"]


@dataclass(frozen=True)
class Case:
    """One conformance case (see the module docstring)."""

    id: str
    format: str                                   # subject format: gptq_v1 | gptq_v2 | q4_k | spqr
    ops: tuple[str, ...]                          # the ops it serves: dequantize/matmul, pack, quantize
    inputs: Mapping[str, np.ndarray]
    params: Mapping[str, int]
    clauses: tuple[str, ...]
    features: tuple[str, ...]
    expect: Expect = "values"
    aux: Mapping[str, np.ndarray] = field(default_factory=dict)
    provenance: Mapping[str, str] = field(default_factory=lambda: {"source": "qformats-reference"})
    description: str = ""

    def feature(self, key: str) -> list[str]:
        """Values of the ``key:value`` feature tags (``bits:3`` -> ``["3"]``)."""
        return [f.split(":", 1)[1] for f in self.features if f.startswith(key + ":")]


def _frame(blob: bytes) -> bytes:
    return struct.pack("<Q", len(blob)) + blob


def case_bytes(case: Case) -> bytes:
    """The canonical bytes of a case: its description as sorted JSON, then each array (sorted by
    name) as ``group.name:dtype:shape`` and its little-endian bytes, each part length-prefixed."""
    head = {"id": case.id, "format": case.format, "ops": list(case.ops), "params": dict(case.params),
            "clauses": list(case.clauses), "features": list(case.features), "expect": case.expect}
    parts = [_frame(json.dumps(head, sort_keys=True).encode())]
    for group, arrays in (("inputs", case.inputs), ("aux", case.aux)):
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            a = a.astype(a.dtype.newbyteorder("<"), copy=False)
            parts.append(_frame(f"{group}.{name}:{a.dtype.str}:{list(a.shape)}".encode()))
            parts.append(_frame(a.tobytes()))
    return b"".join(parts)


def case_digest(case: Case) -> str:
    """sha256 of :func:`case_bytes`: what fixtures/manifest.json pins for a regenerated case."""
    return hashlib.sha256(case_bytes(case)).hexdigest()


QUALITY_FACTOR = 2.0   # a valid encoder more than twice the reference's RMS error gets a warning


def judge_blocks(case: Case, arrays, kind: str, expected: np.ndarray, *, check, decode, equivalent: str,
                 conforming: str) -> tuple[str, str]:
    """An encoder's blocks (Q4K-6.2/6.3, GGML-5.3): the reference bytes are the reference-equivalent level
    (``equivalent`` says whose bytes and which clause); other blocks that ``check`` accepts conform
    (``conforming``: the clause); an RMS error over QUALITY_FACTOR x the reference's is a warning, never a
    failure. ``decode(blocks)`` gives the values the RMS error is taken of."""
    from .errors import QFormatsError

    blocks = arrays.get("result")
    if kind != "array" or blocks is None or blocks.dtype != np.uint8 or blocks.shape != expected.shape:
        got = "nothing" if blocks is None else f"{blocks.dtype}{list(blocks.shape)}"
        return "error", f"returned {got}, expected uint8{list(expected.shape)} blocks"
    if np.array_equal(blocks, expected):
        return "pass", f"byte-identical to {equivalent}"
    try:
        check(blocks)
    except QFormatsError as err:
        return "fail", f"wrote invalid blocks: {err}"
    x = case.inputs["x"].astype(np.float64)
    with np.errstate(all="ignore"):
        mine, ref = (float(np.sqrt(np.mean((decode(b).astype(np.float64) - x) ** 2))) for b in (blocks, expected))
    if mine > QUALITY_FACTOR * ref + 1e-30:
        return "warning", f"valid blocks ({conforming}), but RMS error {mine:.4g} is over {QUALITY_FACTOR:g}x " \
                          f"the reference encoder's {ref:.4g}"
    return "pass", f"valid blocks (conforming, {conforming}), not byte-identical; RMS error {mine:.4g} (reference {ref:.4g})"


def judge_packed(arrays, kind: str, wanted: tuple[str, ...], *, decode, expected: np.ndarray,
                 reference_packed) -> tuple[str, str]:
    """A packer's answer (GPTQ-3, AWQ-3.2, CT-3.2): a mapping of the ``wanted`` tensors that ``decode``
    accepts and decodes to ``expected`` exactly. Byte identity with ``reference_packed()`` (the
    reference packer's mapping, built only for a conforming answer) is reported as the higher level;
    a tensor of another dtype holding the same values is named, never called byte-identical."""
    from .errors import QFormatsError

    missing = [name for name in wanted if name not in arrays]
    if kind != "mapping" or missing:
        return "error", f"returned a {kind} without {', '.join(missing) or 'named tensors'}; expected a mapping " \
                        f"of {', '.join(wanted)}"
    try:
        decoded = np.ascontiguousarray(decode({name: arrays[name] for name in wanted}))
    except QFormatsError as err:
        return "fail", f"wrote a non-conforming layer: {err}"
    bad = decoded != expected
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return "fail", (f"{int(bad.sum())} / {bad.size} weights decode differently; first at {list(i)}: "
                        f"{decoded[i]!r}, expected {expected[i]!r}")
    return "pass", "decodes to the reference values" + _identity(arrays, reference_packed(), wanted)


def _identity(arrays, own: Mapping[str, np.ndarray], wanted: tuple[str, ...]) -> str:
    """'; bytes identical to the reference packer', the tensors whose dtype alone differs, or nothing."""
    got = {name: np.ascontiguousarray(arrays[name]) for name in wanted}
    if not all(got[n].shape == own[n].shape and np.array_equal(got[n], own[n]) for n in wanted):
        return ""
    other = [f"{n} {got[n].dtype}, reference {own[n].dtype}" for n in wanted if got[n].dtype != own[n].dtype]
    if other:
        return f"; the reference packer's values in another dtype ({'; '.join(other)})"
    return "; bytes identical to the reference packer"
