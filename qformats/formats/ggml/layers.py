"""Every tensor of a GGUF file: checked by its type's rules, summarised, decoded (spec/ggml.md GGML-3).

``check_gguf`` walks the file's tensors in order. A tensor of a registered type is checked
(GGML-3.1 .. 3.3; q4_K through its own chapter's Q4K-5.4) and gets a row; a tensor of a type qformats
cannot check is a warning (GGML-3.5), so ``--strict`` fails on it. ``--deep`` decodes each tensor in
slices of rows and folds its statistics, so memory follows the slice, not the tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import QFormatsError
from ...findings import Finding, finding, from_error
from ...layers import Progress, decode_stats, tick
from ...stats import Moments
from . import TYPES
from .base import BlockType
from .checks import scale_findings
from .codec import dequantize
from .readers import READERS, reader_rows

__all__ = ["GGUF_TYPES", "READERS", "check_gguf", "decode_gguf", "reader_rows", "tensor_type"]

GGUF_TYPES = tuple(bt.ggml.name for bt in TYPES.values())
DEEP_CHUNK_BYTES = 1 << 24      # rows of blocks decoded at once by --deep: 16 MiB in, 4-8x that out


def tensor_type(info: Any) -> BlockType | None:
    """The registered type of a GGUF tensor info, or None."""
    return TYPES.get(info.type_name.lower())


def _moments(bt: BlockType, rows: np.ndarray) -> Moments:
    """Moments of the decoded tensor, decoded a slice of rows at a time and merged exactly."""
    step = max(1, DEEP_CHUNK_BYTES // max(rows.shape[1], 1))
    parts = []
    for start in range(0, rows.shape[0], step):
        with np.errstate(all="ignore"):         # inf - inf in the sums of a tensor found non-finite
            m = Moments.of(dequantize(bt, rows[start:start + step]))
        if m.first_nonfinite is not None:
            label, (r, c) = m.first_nonfinite
            m = Moments(m.count, m.total, m.squares, m.max_abs, m.nonfinite, (label, [r + start, c]))
        parts.append(m)
    first = next((p.first_nonfinite for p in parts if p.first_nonfinite is not None), None)
    return Moments(count=sum(p.count for p in parts), total=sum(p.total for p in parts),
                   squares=sum(p.squares for p in parts), max_abs=max(p.max_abs for p in parts),
                   nonfinite=sum(p.nonfinite for p in parts), first_nonfinite=first)


def _row(bt: BlockType, info: Any, rows: np.ndarray) -> dict[str, Any]:
    ne0 = info.dims[0] if info.dims else 1
    row = {"layer": info.name, "format": bt.name, "bits": bt.bits, "group_size": bt.group, "in_features": ne0,
           "out_features": rows.shape[0], "bits_per_weight": round(bt.type_size * 8 / bt.block_size, 4)}
    return {k: v for k, v in row.items() if v is not None}


def _content_findings(bt: BlockType, rows: np.ndarray, name: str) -> list[Finding]:
    if bt.name == "q4_k":              # q4_K keeps its own chapter's code for the same rule (Q4K-5.4)
        from ..q4_k.checks import check_blocks as q4k_check

        try:
            q4k_check(rows, tensor=name)
        except QFormatsError as err:
            return [from_error(err)] + [f for f in scale_findings(bt, rows, name) if f.code != "ggml.scale.nonfinite"]
    return scale_findings(bt, rows, name)


def check_gguf(ckpt: Any, deep: bool, progress: Progress | None,
               only: frozenset[str] | None = None) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Rows and findings for the tensors of ``ckpt.gguf`` (those of the types in ``only``, if given)."""
    infos = [info for info in ckpt.gguf.tensors if only is None or info.type_name.lower() in only]
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    unchecked: dict[str, list[str]] = {}
    for i, info in enumerate(infos):
        tick(progress, i, len(infos), info.name)
        bt = tensor_type(info)
        if bt is None:
            unchecked.setdefault(info.type_name, []).append(info.name)
            continue
        data = ckpt.gguf.tensor_rows(info.name)
        row = _row(bt, info, data)
        more = _content_findings(bt, data, info.name)
        findings += more
        if deep:
            moments = _moments(bt, data)
            row["nonfinite"] = moments.nonfinite
            if any(f.severity == "error" for f in more):     # said already: the statistics of the finite rest
                row.update(moments.row())
            else:
                row.update(decode_stats(info.name, moments, findings))
        rows.append(row)
    for type_name, names in unchecked.items():
        findings.append(finding(
            "ggml.type.unchecked", "warning",
            f"{len(names)} tensor{'s' if len(names) > 1 else ''} of type {type_name} (first '{names[0]}') could not be "
            "checked: qformats has no decoder for that type; only their size and placement were checked",
            tensor=names[0], count=len(names)))
    return rows, findings


def decode_gguf(ckpt: Any, name: str) -> np.ndarray:
    """One tensor decoded to float32 ``(rows, ne0)`` (F64 stays float64, integers keep their dtype)."""
    info = ckpt.gguf.tensor(name)
    bt = tensor_type(info)
    if bt is None:
        from ...errors import fail

        raise fail("ggml.type.unchecked", name, "a tensor of a type qformats decodes", info.type_name,
                   file=ckpt.path)
    return dequantize(bt, ckpt.gguf.tensor_rows(name))
