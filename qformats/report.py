"""Text and JSON renderings of a validation :class:`~qformats.validate.Report` (DESIGN.md §4)."""

from __future__ import annotations

import textwrap
from collections import defaultdict

from . import jsontext
from .findings import plural
from .validate import Report

__all__ = ["to_json", "to_text", "plural", "not_checked", "scope", "layer_of"]

SEVERITY_ORDER = ("error", "warning", "info")
MAX_PER_GROUP = 5  # keep the text short enough to read; --json has everything
DEEP_ROWS = 10     # --deep: the layers with the largest |w| in text; --json has every layer


def to_json(report: Report) -> str:
    """The contract object: path, verdict, format, findings, layers, summary."""
    return jsontext.dumps(report.model_dump(), indent=2, default=str)


def _layer_of(tensor: str | None, layers: list[str]) -> str | None:
    """The layer a finding's tensor belongs to, or None when it names something else (a config key)."""
    if not tensor:
        return None
    matches = [name for name in layers if tensor == name or tensor.startswith(name + ".")]
    return max(matches, key=len) if matches else None


layer_of = _layer_of      # the inspect page links each finding to its layer the same way (qformats/pictures/page.py)


def _headline(report: Report) -> str:
    s = report.summary
    verdict = report.verdict.upper()
    if s.get("strict") and s["warnings"] and not s["errors"]:
        verdict += f" (strict: {plural(s['warnings'], 'warning')})"
    return (f"{report.path}: {verdict} ({report.format}, {scope(s)}, "
            f"{plural(s['errors'], 'error')}, {plural(s['warnings'], 'warning')}{not_checked(s)})")


def scope(summary: dict, *, names: str = "-v names them") -> str:
    """What was checked, the same words for every format (CKPT-5.1, GGML-3.5): ``14 layers, 56 of 62 tensors
    checked (not checked: 6 float; -v names them)``; GGUF files count tensors only (each is a layer). ``names``:
    how the command at hand lists them (``validate -v names them`` from inspect and conformance)."""
    if summary.get("container") == "unreadable":
        return "unreadable: 0 tensors checked"
    gguf = summary.get("container") == "gguf"
    layers = "" if gguf or "layers" not in summary else plural(summary["layers"], "layer") + ", "
    if "tensors" not in summary:
        return layers.rstrip(", ")
    text = f"{layers}{summary['tensors_checked']} of {plural(summary['tensors'], 'tensor')} checked"
    missed = [f"{v['total'] - v['checked']} {kind}" for kind, v in summary.get("tensors_by_kind", {}).items()
              if v["total"] > v["checked"]]
    return text + (f" (not checked: {', '.join(missed)}; {names})" if missed else "")


def sampled_lines(summary: dict) -> list[str]:
    """REMOTE-4.3: what --sample checked and, for a remote checkpoint, the bytes fetched against its size."""
    lines = []
    sample = summary.get("sample")
    if sample is not None:
        checked = sample["checked"]
        unit = "tensor" if summary.get("container") == "gguf" else "layer"
        what = f"headers only, no {unit} read" if not checked else \
            f"{plural(len(checked), unit)} checked: {', '.join(checked[:4])}{', ...' if len(checked) > 4 else ''}"
        lines.append(f"sampled: --sample {sample['asked']}: {what}; the rest are named as not checked")
    remote = summary.get("remote")
    if remote is not None:
        share = remote["bytes_fetched"] / remote["bytes_listed"] if remote["bytes_listed"] else 0.0
        lines.append(f"fetched: {_size(remote['bytes_fetched'])} in {plural(remote['requests'], 'request')} "
                     f"({share:.2%} of the {_size(remote['bytes_listed'])} listed) from {remote['url']}")
    return lines


def _size(n: int) -> str:
    """Exact bytes, and in binary units past 1 KiB: ``1167 bytes (1.1 KiB)``."""
    if n < 1024:
        return f"{n} bytes"
    scaled, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB", "TiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, bigger
    return f"{n} bytes ({scaled:.1f} {unit})"


def _not_checked_lines(report: Report, verbose: bool) -> list[str]:
    """-v: every tensor not checked, grouped by the reason (CKPT-5.1)."""
    entries = report.summary.get("not_checked") or []
    others = report.summary.get("not_read") or []
    if not verbose or not (entries or others):
        return []
    by_reason: dict[str, list[str]] = defaultdict(list)
    for entry in entries:
        by_reason[entry["reason"]].append(entry["tensor"])
    lines = ["not checked:"]
    for reason, names in by_reason.items():
        lines.append(f"  {plural(len(names), 'tensor')}: {_indented(reason)}")
        lines.append(f"    {', '.join(names)}")
    by_reason = defaultdict(list)
    for entry in others:
        by_reason[entry["reason"]].append(entry["what"])
    for reason, names in by_reason.items():
        lines.append(f"  {', '.join(names)}: {reason}")
    return lines


def not_checked(summary: dict) -> str:
    """``, 1 module not checked`` where modules of foreign layouts were left unchecked (QF-5.2), else nothing."""
    n = summary.get("modules_not_checked", 0)
    return f", {plural(n, 'module')} not checked" if n else ""


def _group_lines(code: str, items: list, layer_names: list[str], verbose: bool) -> list[str]:
    layers = [_layer_of(f.tensor, layer_names) for f in items]
    named = sorted({name for name in layers if name})
    where = "in " + plural(len(named), "layer") if named and len(named) == len(items) else \
        "in " + plural(len(items), "place")
    counts = [(name or f.tensor, f.count) for name, f in zip(layers, items) if f.count is not None]
    if len(counts) > 1:
        total = sum(n for _, n in counts)
        per = ", ".join(f"{name or '?'} {n}" for name, n in counts[:MAX_PER_GROUP])
        where += f" ({total} in all: {per}{', ...' if len(counts) > MAX_PER_GROUP else ''})"
    lines = [f"  {code} [{items[0].clause}] {where}: {_indented(items[0].message, verbose)}"]
    if named:
        shown = ", ".join(named[:MAX_PER_GROUP]) + (f", ... (+{len(named) - MAX_PER_GROUP})"
                                                    if len(named) > MAX_PER_GROUP else "")
        lines.append(f"    layers: {shown}")
    others = sorted({f.tensor for f, name in zip(items, layers) if f.tensor and not name})
    if others:
        lines.append(f"    where: {', '.join(others[:MAX_PER_GROUP])}")
    lines += [f"    also: {_indented(extra.message, verbose)}" for extra in items[1:MAX_PER_GROUP if verbose else 1]]
    return lines


def _indented(message: str, verbose: bool = True) -> str:
    """A message's own lines (a finding's "fix:" line) indented under its first; without -v only the first,
    saying that -v shows the rest."""
    first, _, details = message.partition("\n")
    if not details:
        return first
    return message.replace("\n", "\n    ") if verbose else f"{first} (-v: fix and details)"


def _wrapped(line: str, width: int | None) -> list[str]:
    """A line longer than ``width`` broken at spaces, its continuations indented 4 past its own indent
    (names and paths are never broken inside); ``width`` None leaves it whole (pipes and logs)."""
    if width is None or len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _deep_lines(report: Report, verbose: bool) -> list[str]:
    rows = [r for r in report.layers if "max_abs" in r or r.get("decoded")]
    if not rows:
        return []
    rows.sort(key=lambda r: -(r.get("max_abs") or float("inf")))
    shown = rows if verbose else rows[:DEEP_ROWS]
    width = max(len(r["layer"]) for r in shown)
    title = "decoded weights" + ("" if len(shown) == len(rows) else f" (the {len(shown)} largest of {len(rows)}; "
                                                                   "--verbose or --json for all)")
    lines = [f"{title}:", f"  {'layer':{width}}  {'mean':>11}  {'std':>11}  {'max |w|':>11}"]
    for r in shown:
        if r.get("decoded") == "non-finite":
            lines.append(f"  {r['layer']:{width}}  non-finite")
        else:
            lines.append(f"  {r['layer']:{width}}  {r['mean']:11.4g}  {r['std']:11.4g}  {r['max_abs']:11.4g}")
    return lines


def to_text(report: Report, *, verbose: bool = False, width: int | None = None) -> str:
    """Findings grouped by severity, then by code, with the layers each code touched; --deep statistics.
    ``width``: wrap long lines to it (the CLI passes the terminal's on a terminal); None: one line each."""
    layer_names = [row["layer"] for row in report.layers]
    lines = [_headline(report)] + sampled_lines(report.summary)
    for severity in SEVERITY_ORDER:
        group = [f for f in report.findings if f.severity == severity]
        if not group or (severity == "info" and not verbose):
            continue
        by_code: dict[str, list] = defaultdict(list)
        for f in group:
            by_code[f.code].append(f)
        lines.append(f"{severity}s:")
        for code, items in by_code.items():
            lines += _group_lines(code, items, layer_names, verbose)
    lines += _not_checked_lines(report, verbose)
    lines += _deep_lines(report, verbose)
    lines = [part for line in lines for text in line.split("\n") for part in _wrapped(text, width)]
    return "\n".join(line.rstrip() for line in lines) + "\n"
