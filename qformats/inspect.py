"""``qformats inspect``: one row per layer (or per GGUF tensor), fitted to the terminal.

Safetensors checkpoints show their quantized layers as ``validate --deep`` sees them. GGUF files
show every tensor, each with its ggml type, real bits per weight (block bytes x 8 / block elements),
statistics from qformats' own decoder of that type and the count of non-finite decoded values; a
tensor of a type qformats cannot decode is listed as unchecked, without statistics. Above a GGUF file's
table, its header summary (``gguf_header``); ``--json`` prints validate's document with ``rows`` and
``header`` added (spec/schemas/report.json).
"""

from __future__ import annotations

import shutil
from typing import Any


from .containers.checkpoint import open_checkpoint
from .containers.ggml_types import GGML_TYPES
from .errors import QFormatsError, fail
from .gguf_summary import header_summary
from .layers import Progress
from .validate import Report, validate

__all__ = ["rows", "render", "gguf_header", "empty_reason"]

# (row key, header). The format column carries the label (gptq_v1 = checkpoint_format gptq); "zeros say"
# is what the stored zeros testify (GPTQ-8). Layer names are never shortened: when the table is too wide,
# the rightmost columns are left out, and a last line says which.
COLUMNS = (("layer", "layer"), ("format", "format"), ("bits", "bits"), ("group_size", "gs"),
           ("in_features", "in"), ("out_features", "out"), ("bits_per_weight", "bpw"), ("g_idx", "g_idx"),
           ("evidence", "zeros say"), ("outlier_fraction", "outliers"), ("max_abs", "max|w|"), ("std", "std"),
           ("nonfinite", "non-finite"))
KEEP = 3   # layer, format, bits: never left out


def rows(path: str, fmt: str = "auto", progress: Progress | None = None,
         sample: int | None = None) -> tuple[Report | None, list[dict[str, Any]]]:
    """The validator's report and the table rows: its layers, or every tensor of a GGUF file (tensors
    of types qformats cannot check get a row without statistics; the report warns about them).
    ``progress``: called per layer as validate calls it (the CLI's bar on a terminal)."""
    report, table, _ = rows_and_header(path, fmt, progress, sample)
    return report, table


def rows_and_header(path: str, fmt: str = "auto", progress: Progress | None = None,
                    sample: int | None = None) -> tuple[Report | None, list[dict[str, Any]], dict[str, Any] | None]:
    """:func:`rows` and :func:`gguf_header` from one more opening of a GGUF file; a remote file's second
    header read is added to the bytes and requests the report says were fetched (REMOTE-4.3)."""
    report = validate(path, deep=True, fmt=fmt, progress=progress, sample=sample)
    if not str(path).lower().endswith(".gguf"):
        return report, report.layers, None
    checked = {row["layer"]: row for row in report.layers}
    try:
        with open_checkpoint(path) as ckpt:
            header = header_summary(ckpt.gguf) if ckpt.kind == "gguf" else None
            table = report.layers if report.format == "unknown" else [
                checked.get(info.name) or _unchecked_row(info) for info in ckpt.gguf.tensors
                if fmt == "auto" or info.name in checked]
            report = with_traffic(report, getattr(ckpt, "io", None))
    except QFormatsError:            # a malformed file: the report's finding says why; there is no header
        return report, report.layers, None
    return report, table, header


def with_traffic(report: Report, io: Any) -> Report:
    """The report with a remote checkpoint's further reads through ``io`` (another opening of it: the GGUF
    header, the pictures) counted in ``summary.remote`` (bytes and requests, REMOTE-4.3)."""
    remote = report.summary.get("remote") if getattr(io, "remote", False) else None
    if not remote:
        return report
    more = io.summary()
    remote = {**remote, "bytes_fetched": remote["bytes_fetched"] + more["bytes_fetched"],
              "requests": remote["requests"] + more["requests"]}
    return report.model_copy(update={"summary": {**report.summary, "remote": remote}})


def gguf_header(path: str) -> dict[str, Any] | None:
    """A GGUF file's header summary (architecture, file type, tensors, parameters, bits per weight; spec/ggml.md
    GGML-7.1), None for a safetensors checkpoint."""
    if not str(path).lower().endswith(".gguf"):
        return None
    try:
        with open_checkpoint(path) as ckpt:
            return header_summary(ckpt.gguf) if ckpt.kind == "gguf" else None
    except QFormatsError:            # a malformed file: the report's finding says why; there is no header
        return None


def _unchecked_row(info: Any) -> dict[str, Any]:
    gtype = GGML_TYPES[info.ggml_type]
    ne0 = info.dims[0] if info.dims else 1
    return {"layer": info.name, "format": info.type_name.lower() + " (unchecked)", "in_features": ne0,
            "out_features": info.n_elements // max(ne0, 1),
            "bits_per_weight": round(gtype.type_size * 8 / gtype.block_size, 4)}


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render(table: list[dict[str, Any]], width: int | None = None) -> list[str]:
    """Lines of the table, no trailing spaces, at most ``width`` columns (the terminal's, or 100) unless a
    layer name alone is wider: names are shown whole, columns on the right are left out to fit."""
    width = width or shutil.get_terminal_size((100, 24)).columns
    present = [(key, head) for key, head in COLUMNS if any(row.get(key) is not None for row in table)]
    cells = [[_cell(row.get(key)) for key, _ in present] for row in table]
    widths = [max([len(head)] + [len(r[i]) for r in cells]) for i, (_, head) in enumerate(present)]
    shown = len(present)
    while shown > KEEP and sum(widths[:shown]) + 2 * (shown - 1) > width:
        shown -= 1
    header = "  ".join(head.ljust(w) for (_, head), w in zip(present[:shown], widths)).rstrip()
    lines = [header] + ["  ".join(c.ljust(w) for c, w in zip(r[:shown], widths)).rstrip() for r in cells]
    if shown < len(present):
        lines.append(f"(left out to fit {width} columns: {', '.join(h for _, h in present[shown:])}; "
                     "--width to widen)"[:max(width, 20)])
    return lines


def empty_reason(report: Report) -> str:
    """Why there is no table: the first error, which ``qformats validate`` explains in full."""
    errors = [f for f in report.findings if f.severity == "error"]
    if not errors and (report.summary.get("sample") or {}).get("asked") == 0:     # REMOTE-4.1
        return "headers only (a remote path's default, --sample 0): no layer read; --sample N reads N layers"
    if not errors:
        raise fail("checkpoint.empty", None, "a checkpoint with layers to inspect", "none", file=report.path)
    return f"no layer could be inspected: {errors[0].message} [{errors[0].code}]"
