"""Whose meaning a v1 layer's zero fields carry: the writer, named by metadata or by its signature.

Real writers agree on every zero point from 1 up and disagree about 0 (GPTQ-4.1): the same v1 word
means different zero points under AutoGPTQ's OR-bleed, GPTQModel's word borrow and a masked
writer. Whether a reader decodes a checkpoint "correctly" can therefore only be said relative to
a writer (``qformats conformance checkpoint``, GPTQ-4.3):

* :func:`named_writer` reads the writer from the config (GPTQ-8.5 provenance keys):
  ``meta.quantizer`` ``gptqmodel:<version>`` (GPTQModel before 0.9.0 wrote as AutoGPTQ, 0.9.0 to
  6.x with the legacy 3-bit constants, GPTQ-4.5), or AutoGPTQ's keys (``model_file_base_name``
  and no ``checkpoint_format``, no ``meta``).
* :func:`meaning` gives the zero points each writer meant by the stored words, and for AutoGPTQ
  which of them its bleed overwrote (no reading can recover those) and whether the words can be
  AutoGPTQ's at all: under the bleed every field above an all-ones field of its word is all ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...bits import field_positions, unpack
from .quirks import ONES, _legacy_offsets, _word_add, write_autogptq

__all__ = ["WRITERS", "WriterClaim", "Meaning", "named_writer", "meaning", "PLAUSIBLE_ORDER"]

# Writer key -> what it does with a zero point 0 in v1 (GPTQ-4.1).
WRITERS = {
    "gptqmodel": "GPTQModel >= 7.0 (a zero point 0 borrows 1 from the field above; per field at 3 bits)",
    "gptqmodel_legacy_int3": "GPTQModel 0.9.0 - 6.x (word borrow; 3 bits with the legacy constants, GPTQ-4.5)",
    "autogptq": "AutoGPTQ (OR-bleed: a zero point 0 overwrites every higher field of its word)",
    "masked": "a masked writer such as AutoGPTQ's pack_from_tensors (each field (z - 1) & maxq)",
}
# Writers that remain plausible when nothing names one (the legacy int3 writer needs its signature).
PLAUSIBLE_ORDER = ("gptqmodel", "autogptq", "masked")
# GPTQModel v0.9.0 introduced gptq_v2 and borrow semantics; v7.0.0 fixed the 3-bit constants (PR #2763).
_V2_SINCE, _INT3_FIXED = (0, 9, 0), (7, 0, 0)


@dataclass(frozen=True)
class WriterClaim:
    """Who wrote the checkpoint, as far as its files say: ``writer`` is a :data:`WRITERS` key or None."""

    writer: str | None
    basis: str            # "metadata", "provenance keys", "signature" or "unknown"
    detail: str


def _version(text: str) -> tuple[int, ...] | None:
    numbers = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    return tuple(int(n or 0) for n in numbers.groups()) if numbers else None


def _from_quantizer(entry: str) -> WriterClaim | None:
    name, _, version = entry.partition(":")
    name = name.strip().lower().replace("-", "_")
    said = f"meta.quantizer {entry!r}"
    if name in ("auto_gptq", "autogptq"):
        return WriterClaim("autogptq", "metadata", said)
    if name != "gptqmodel":
        return None
    parsed = _version(version)
    if parsed is None:
        return WriterClaim(None, "unknown", f"{said} names GPTQModel without a version, and its 3-bit "
                                            "and zero-0 conventions changed between versions")
    writer = "autogptq" if parsed < _V2_SINCE else "gptqmodel_legacy_int3" if parsed < _INT3_FIXED else "gptqmodel"
    return WriterClaim(writer, "metadata", said)


def named_writer(config: Any) -> WriterClaim:
    """The writer the config names (GPTQ-8.5), or an unknown claim saying what the config holds."""
    if config is None:
        return WriterClaim(None, "unknown", "no quantization config names a writer")
    quantizers = tuple(config.meta.quantizer) if config.meta is not None else ()
    for entry in quantizers:
        claim = _from_quantizer(str(entry))
        if claim is not None:
            return claim
    if quantizers:
        return WriterClaim(None, "unknown", f"meta.quantizer names {', '.join(map(str, quantizers))}, whose "
                                            "handling of a v1 zero point 0 qformats does not know")
    if config.meta is None and config.checkpoint_format is None and "model_file_base_name" in config.model_fields_set:
        return WriterClaim("autogptq", "provenance keys", "model_file_base_name without meta or checkpoint_format "
                                                          "(an AutoGPTQ or TheBloke-era config)")
    return WriterClaim(None, "unknown", "the config names no quantizer (no meta.quantizer)")


@dataclass(frozen=True)
class Meaning:
    """The zero points (G, N) a writer meant; ``lost`` marks those its own bytes no longer hold."""

    zeros: np.ndarray
    lost: np.ndarray | None
    plausible: bool = True


def _all_fields(qzeros: np.ndarray, b: int) -> np.ndarray:
    """Every field of the whole words, (G, words * 32 / b) int64."""
    return unpack(qzeros, b, axis=1).astype(np.int64)


def _autogptq(qzeros: np.ndarray, b: int, n: int) -> Meaning:
    """Under the OR-bleed the lowest all-ones field of a word is a zero point 0 and every field above
    it in that word (where it starts) is overwritten; the words must re-encode to themselves."""
    maxq = (1 << b) - 1
    f = _all_fields(qzeros, b)
    g, total = f.shape
    blocks = np.zeros((g, -(-total // 32) * 32), np.int64)
    blocks[:, :total] = f
    blocks = blocks.reshape(g, -1, 32)
    ones = blocks == maxq
    lost = np.zeros_like(ones)
    for k, (word, shift) in enumerate(field_positions(b)):
        for j, (word_j, shift_j) in enumerate(field_positions(b)):
            if word_j == word and shift_j < shift:
                lost[:, :, k] |= ones[:, :, j]
    zeros = (blocks + 1) & maxq            # all-ones -> 0, the rest zero - 1 + 1
    zeros, lost = zeros.reshape(g, -1)[:, :total], lost.reshape(g, -1)[:, :total]
    plausible = bool(np.array_equal(write_autogptq(zeros, b).view(np.uint32), qzeros.view(np.uint32)))
    return Meaning(zeros[:, :n], lost[:, :n], plausible)


def meaning(qzeros: np.ndarray, bits: int, n: int, writer: str) -> Meaning:
    """The zero points ``writer`` meant by these checked v1 words (GPTQ-4.1), (G, n) int64."""
    b = int(bits)
    maxq = (1 << b) - 1
    if writer == "autogptq":
        return _autogptq(qzeros, b, n)
    if writer == "gptqmodel_legacy_int3" and b == 3:
        return Meaning(_all_fields(_word_add(qzeros, _legacy_offsets(qzeros.shape[1], +1)), b)[:, :n], None)
    if writer in ("gptqmodel", "gptqmodel_legacy_int3") and b != 3:
        return Meaning(_all_fields(_word_add(qzeros, ONES[b]), b)[:, :n], None)
    return Meaning(((_all_fields(qzeros, b) + 1) & maxq)[:, :n], None)   # masked; GPTQModel >= 7.0 at 3 bits
