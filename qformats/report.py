"""Text and JSON renderings of a validation :class:`~qformats.validate.Report` (DESIGN.md §4)."""

from __future__ import annotations

import json
from collections import defaultdict

from .validate import Report

__all__ = ["to_json", "to_text"]

SEVERITY_ORDER = ("error", "warning", "info")
MAX_PER_GROUP = 5  # keep the text short enough to read; --json has everything


def to_json(report: Report) -> str:
    """The contract object: path, verdict, format, findings, layers, summary."""
    return json.dumps(report.model_dump(), indent=2, default=str)


def _layer_of(tensor: str | None, layers: list[str]) -> str:
    if not tensor:
        return "(checkpoint)"
    matches = [name for name in layers if tensor == name or tensor.startswith(name + ".")]
    return max(matches, key=len) if matches else tensor


def to_text(report: Report, *, verbose: bool = False) -> str:
    """Findings grouped by severity, then by code, with the layers each code touched."""
    layer_names = [row["layer"] for row in report.layers]
    lines = [f"{report.path}: {report.verdict.upper()} ({report.format}, {report.summary['layers']} layers, "
             f"{report.summary['errors']} errors, {report.summary['warnings']} warnings)"]
    for severity in SEVERITY_ORDER:
        group = [f for f in report.findings if f.severity == severity]
        if not group or (severity == "info" and not verbose):
            continue
        by_code: dict[str, list] = defaultdict(list)
        for f in group:
            by_code[f.code].append(f)
        lines.append(f"{severity}s:")
        for code, items in by_code.items():
            layers = sorted({_layer_of(f.tensor, layer_names) for f in items})
            lines.append(f"  {code} [{items[0].clause}] in {len(items)} place(s): {items[0].message}")
            shown = ", ".join(layers[:MAX_PER_GROUP]) + (f", ... (+{len(layers) - MAX_PER_GROUP})"
                                                         if len(layers) > MAX_PER_GROUP else "")
            lines.append(f"    layers: {shown}")
            for extra in items[1:MAX_PER_GROUP if verbose else 1]:
                lines.append(f"    also: {extra.message}")
    return "\n".join(lines) + "\n"
