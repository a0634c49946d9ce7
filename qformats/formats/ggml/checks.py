"""Validity of block data (spec/ggml.md GGML-3): what ``ggml_validate_row_data`` checks, and a little more.

ggml refuses a row whose float16 super-scales (``d``, ``dmin``, ``m``; iq1_m's reassembled scale;
mxfp4's E8M0 ``e``) are not finite, and a plain float tensor with a non-finite element (GGML-3.1,
GGML-3.3). qformats also warns where a scale that no ggml encoder of the type writes negative is
negative (GGML-3.2). Findings count bad blocks and rows per tensor and show the first few.
"""

from __future__ import annotations

import numpy as np

from ...findings import Finding, finding
from .base import BlockType

__all__ = ["first_bad_scale", "spread", "scale_findings", "SHOWN_BLOCKS", "CHECK_CHUNK_BYTES"]

SHOWN_BLOCKS = 3
CHECK_CHUNK_BYTES = 1 << 22     # rows of blocks per pass: a 4 MiB slice of a memory-mapped tensor


def _label(v: float) -> str:
    return "NaN" if v != v else ("inf" if v > 0 else "-inf")


def _row_chunks(bt: BlockType, arr: np.ndarray):
    """(first row, (rows, nb, type_size) view) over slices of about CHECK_CHUNK_BYTES."""
    rows, nbytes = arr.shape
    nb = nbytes // bt.type_size
    step = max(1, CHECK_CHUNK_BYTES // max(nbytes, 1))
    for start in range(0, rows, step):
        part = arr[start:start + step]
        yield start, part.reshape(part.shape[0], nb, bt.type_size)


def _fields(bt: BlockType, blk3: np.ndarray) -> dict[str, np.ndarray]:
    """Scale fields of (r, nb, type_size) blocks as (r, nb, k) float arrays."""
    r, nb, size = blk3.shape
    with np.errstate(all="ignore"):
        got = bt.scales(blk3.reshape(r * nb, size))
    return {name: np.asarray(v).reshape(r, nb, -1) for name, v in got.items()}


def first_bad_scale(bt: BlockType, arr: np.ndarray) -> tuple[str, int, int, str] | None:
    """(field, row, block in row, "NaN" | "inf" | "-inf") of the first block with a non-finite scale."""
    for start, blk3 in _row_chunks(bt, arr):
        firsts = []
        for name, v in _fields(bt, blk3).items():
            bad = ~np.isfinite(v)
            if bad.any():
                r, b, k = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape)
                firsts.append(((r, b, k), name, _label(float(v[r, b, k]))))
        if firsts:
            (r, b, _), name, label = min(firsts)
            return name, start + int(r), int(b), label
    return None


def _tally(bt: BlockType, arr: np.ndarray, predicate, names) -> tuple[np.ndarray, dict[str, int]]:
    """(rows, nb) mask of blocks where ``predicate`` holds for any of the named fields; value counts."""
    rows, nbytes = arr.shape
    mask = np.zeros((rows, nbytes // bt.type_size), bool)
    counts: dict[str, int] = {}
    for start, blk3 in _row_chunks(bt, arr):
        for name, v in _fields(bt, blk3).items():
            if names is not None and name not in names:
                continue
            hit = predicate(v)
            mask[start:start + blk3.shape[0]] |= hit.any(axis=2)
            for label, sel in (("NaN", np.isnan(v)), ("inf", np.isposinf(v)), ("-inf", np.isneginf(v))):
                n = int((hit & sel).sum())
                if n:
                    counts[label] = counts.get(label, 0) + n
    return mask, counts


def _where(mask: np.ndarray) -> str:
    where = ", ".join(f"({int(r)}, {int(b)})" for r, b in np.argwhere(mask)[:SHOWN_BLOCKS])
    return where + (", ..." if int(mask.sum()) > SHOWN_BLOCKS else "")


def spread(bt: BlockType, arr: np.ndarray) -> str:
    """How many blocks and rows hold a non-finite scale, and where the first few are ("" for one)."""
    mask, _ = _tally(bt, arr, lambda v: ~np.isfinite(v), None)
    if int(mask.sum()) <= 1:
        return ""
    return (f"; {int(mask.sum())} blocks in {int(mask.any(axis=1).sum())} rows are non-finite, "
            f"(row, block): {_where(mask)}")


def scale_findings(bt: BlockType, arr: np.ndarray, tensor: str) -> list[Finding]:
    """GGML-3.1 (error) and GGML-3.2 (warning) findings for one tensor's blocks, counted."""
    findings: list[Finding] = []
    mask, counts = _tally(bt, arr, lambda v: ~np.isfinite(v), None)
    if mask.any():
        field, r, b, label = first_bad_scale(bt, arr)
        kinds = ", ".join(f"{n} {label}" for label, n in counts.items())
    if mask.any() and bt.plain:
        findings.append(finding(
            "ggml.float.nonfinite", "error",
            f"'{tensor}' ({bt.name}) has {sum(counts.values())} non-finite elements ({kinds}) in "
            f"{int(mask.any(axis=1).sum())} of {mask.shape[0]} rows; first {label} at [{r}, {b}]; "
            "ggml_validate_row_data refuses such a tensor", tensor=tensor, count=sum(counts.values())))
    elif mask.any():
        findings.append(finding(
            "ggml.scale.nonfinite", "error",
            f"'{tensor}' ({bt.name}) has non-finite scales in {int(mask.sum())} of {mask.size} blocks in "
            f"{int(mask.any(axis=1).sum())} of {mask.shape[0]} rows ({kinds}); first {field} = {label} in block {b} "
            f"of row {r}; (row, block): {_where(mask)}; ggml_validate_row_data refuses such a row",
            tensor=tensor, count=int(mask.sum())))
    if bt.never_negative:
        neg, _ = _tally(bt, arr, lambda v: np.isfinite(v) & (v < 0), set(bt.never_negative))
        if neg.any():
            fields = "/".join(bt.never_negative)
            findings.append(finding(
                "ggml.scale.negative", "warning",
                f"'{tensor}' ({bt.name}) has a negative {fields} in {int(neg.sum())} of {neg.size} blocks in "
                f"{int(neg.any(axis=1).sum())} rows, (row, block): {_where(neg)}; no ggml encoder writes one "
                "(the blocks decode, but the file was not written by llama.cpp's quantizer as is)",
                tensor=tensor, count=int(neg.sum())))
    return findings
