"""``qformats inspect``: one row per layer (or per GGUF tensor), fitted to the terminal.

Safetensors checkpoints show their quantized layers as ``validate --deep`` sees them. GGUF files
show every tensor, each with its ggml type and real bits per weight (block bytes x 8 / block
elements); statistics where a decoder is at hand: q4_K by the reference, plain types directly, other
quantized types by gguf-py's ``quants.dequantize`` when it is installed, after our reader has
checked every byte range.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from .containers.checkpoint import open_checkpoint
from .containers.ggml_types import GGML_TYPES
from .containers.gguf import PLAIN_TYPES
from .errors import QFormatsError, fail
from .stats import Moments
from .validate import Report, validate

__all__ = ["rows", "render"]

# (row key, header); the layer column is shortened from the left when the table is too wide.
COLUMNS = (("layer", "layer"), ("format", "format"), ("bits", "bits"), ("group_size", "gs"),
           ("in_features", "in"), ("out_features", "out"), ("bits_per_weight", "bpw"), ("g_idx", "g_idx"),
           ("evidence", "label"), ("outlier_fraction", "outliers"), ("max_abs", "max|w|"), ("std", "std"))


def rows(path: str, fmt: str = "auto") -> tuple[Report | None, list[dict[str, Any]]]:
    """The validator's report and the table rows: its layers, or every tensor of a GGUF file (whose
    report is None when it holds nothing qformats validates, a Q6_K-only file say)."""
    try:
        report = validate(path, deep=True, fmt=fmt)
    except QFormatsError as err:
        if err.code != "checkpoint.empty" or fmt != "auto" or not str(path).lower().endswith(".gguf"):
            raise
        report = None
    if report is not None and (not report.layers or report.format == "unknown" or not
                               str(path).lower().endswith(".gguf")):
        return report, report.layers
    checked = {row["layer"]: row for row in (report.layers if report else [])}
    with open_checkpoint(path) as ckpt:
        return report, [checked.get(info.name) or _gguf_row(ckpt.gguf, info) for info in ckpt.gguf.tensors]


def _gguf_row(gf: Any, info: Any) -> dict[str, Any]:
    gtype = GGML_TYPES[info.ggml_type]
    ne0 = info.dims[0] if info.dims else 1
    row: dict[str, Any] = {"layer": info.name, "format": info.type_name.lower(), "in_features": ne0,
                           "out_features": info.n_elements // max(ne0, 1),
                           "bits_per_weight": round(gtype.type_size * 8 / gtype.block_size, 4)}
    values = _decoded(gf, info)
    if values is not None:
        row.update(Moments.of(values.reshape(row["out_features"], -1).astype(np.float32)).row())
    return row


def _decoded(gf: Any, info: Any) -> np.ndarray | None:
    if info.type_name in PLAIN_TYPES:
        return gf.tensor_array(info.name)
    try:
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize
    except ImportError:
        return None
    try:
        return dequantize(np.asarray(gf.tensor_rows(info.name)), GGMLQuantizationType(info.ggml_type))
    except (NotImplementedError, ValueError, KeyError):
        return None


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(table: list[dict[str, Any]], width: int | None = None) -> list[str]:
    """Lines of the table, no trailing spaces, at most ``width`` columns (the terminal's, or 100)."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    present = [(key, head) for key, head in COLUMNS if any(row.get(key) is not None for row in table)]
    cells = [[_cell(row.get(key)) for key, _ in present] for row in table]
    widths = [max([len(head)] + [len(r[i]) for r in cells]) for i, (_, head) in enumerate(present)]
    spare = width - (sum(widths) + 2 * (len(widths) - 1))
    if spare < 0 and widths:                               # shorten layer names from the left
        keep = max(len("layer"), widths[0] + spare)
        cells = [[c if len(c) <= keep else "…" + c[len(c) - keep + 1:]] + rest for c, *rest in cells]
        widths[0] = keep
    header = "  ".join(head.ljust(w) for (_, head), w in zip(present, widths)).rstrip()
    return [header] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]


def empty_reason(report: Report) -> str:
    """Why there is no table: the first error, which ``qformats validate`` explains in full."""
    errors = [f for f in report.findings if f.severity == "error"]
    if not errors:
        raise fail("checkpoint.empty", None, "a checkpoint with layers to inspect", "none", file=report.path)
    return f"no layer could be inspected: {errors[0].message} [{errors[0].code}]"
