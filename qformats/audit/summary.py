"""``qformats audit summarize DIR``: counts from the audit table, and a page drawn from them (AUDIT-3.3).

    doc = summarize("out/")       # units by verdict, by format, by finding code; bytes, seconds, the units not valid
    html = page(doc)              # one self-contained file: inline SVG bars, the shared style, no network

The page is a function of the summary document alone (DESIGN.md §7), which it also carries as JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..findings import plural
from ..pictures.page import CSP
from ..pictures.style import BASE_CSS, COLOURS, esc, header
from ..pictures.svg import bar_chart
from . import table
from .progress import megabytes

__all__ = ["summarize", "page", "to_text", "NOT_VALID_SHOWN"]

VERDICTS = table.VERDICTS
NOT_VALID_SHOWN = 1000          # rows of the units-not-valid list kept in the document (the rest are counted)
BARS_SHOWN = 40


def summarize(out: str | Path) -> dict[str, Any]:
    """The summary document of the table under ``out``."""
    rows = table.rows(Path(out))
    verdicts = Counter(row["verdict"] for row in rows)
    read = [row["bytes_read"] for row in rows if row["bytes_read"] is not None]
    not_valid = [{"unit": row["unit"], "verdict": row["verdict"], "format": row["format"],
                  "codes": row["finding_codes"], "error_code": row["error_code"], "error": row["error"]}
                 for row in sorted(rows, key=lambda r: (r["verdict"], r["unit"])) if row["verdict"] != "valid"]
    return {
        "dir": str(out), "units": len(rows),
        "by_verdict": {v: verdicts.get(v, 0) for v in VERDICTS},
        "by_format": _ranked(Counter(row["format"] for row in rows if row["format"] is not None)),
        "by_code": _ranked(Counter(code for row in rows for code in row["finding_codes"])),
        "by_error": _ranked(Counter(row["error_code"] or "internal error" for row in rows
                                    if row["verdict"] == "could-not-run")),
        "bytes": sum(row["bytes"] or 0 for row in rows),
        "bytes_read": sum(read) if read else None,
        "seconds": round(sum(row["seconds"] for row in rows), 3),
        "qformats_versions": sorted({row["qformats_version"] for row in rows}),
        "options": sorted({row["options"] for row in rows}),
        "not_valid": not_valid[:NOT_VALID_SHOWN], "not_valid_total": len(not_valid),
    }


def _ranked(counts: Counter) -> dict[str, int]:
    """Most units first, then by name: a stable order for the page and the text."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def to_text(doc: dict[str, Any]) -> str:
    v = doc["by_verdict"]
    lines = [f"{plural(doc['units'], 'unit')}: {v['valid']} valid, {v['invalid']} invalid, {v['could-not-run']} "
             f"could not run; {megabytes(doc['bytes'])}, {doc['seconds']:.1f} s"]
    for title, key in (("by format", "by_format"), ("by finding code (units)", "by_code"),
                       ("could not run, by error", "by_error")):
        if doc[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} {n}" for k, n in doc[key].items()))
    return "\n".join(lines) + "\n"


def _bars(counts: dict[str, int], fill: str | dict[str, str]) -> str:
    shown = list(counts.items())[:BARS_SHOWN]
    if not shown:
        return '<p class="help">none</p>'
    fills = [fill.get(k, COLOURS["unchecked"]) if isinstance(fill, dict) else fill for k, _ in shown]
    more = f'<p class="help">and {len(counts) - BARS_SHOWN} more</p>' if len(counts) > BARS_SHOWN else ""
    return bar_chart([k for k, _ in shown], [n for _, n in shown], fills=fills, width=720) + more


def _not_valid(doc: dict[str, Any]) -> str:
    if not doc["not_valid"]:
        return '<p class="help">every unit is valid</p>'
    rows = "".join(f'<tr class="{esc(r["verdict"])}"><td>{esc(r["unit"])}</td><td>{esc(r["verdict"])}</td>'
                   f'<td>{esc(r["format"])}</td><td>{esc(", ".join(r["codes"]))}</td>'
                   f'<td class="detail">{esc(r["error"])}</td></tr>' for r in doc["not_valid"])
    cut = doc["not_valid_total"] - len(doc["not_valid"])
    more = f'<p class="help">and {cut} more (the table has them all)</p>' if cut else ""
    return (f'<div class="scroll"><table><thead><tr><th>unit</th><th>verdict</th><th>format</th><th>codes</th>'
            f"<th>could not run</th></tr></thead><tbody>{rows}</tbody></table></div>{more}")


VERDICT_FILLS = {"valid": COLOURS["valid"], "invalid": COLOURS["invalid"], "could-not-run": COLOURS["unchecked"]}
CSS = """svg{display:block}td.detail{font-size:12px;max-width:50em}
tr.invalid td:first-child{box-shadow:inset 4px 0 #e4606d}tr.could-not-run td:first-child{box-shadow:inset 4px 0 #c4c4c4}"""


def page(doc: dict[str, Any]) -> str:
    """The summary page: verdicts, formats, finding codes and errors as bars, then the units not valid."""
    sections = [("verdicts", "Verdicts", _bars(doc["by_verdict"], VERDICT_FILLS)),
                ("formats", "Formats", _bars(doc["by_format"], COLOURS["scale"])),
                ("codes", "Finding codes (units showing each)", _bars(doc["by_code"], COLOURS["invalid"])),
                ("errors", "Could not run, by error", _bars(doc["by_error"], COLOURS["unchecked"])),
                ("units", "Units not valid", _not_valid(doc))]
    body = "".join(f'<section id="{k}"><h2>{esc(t)}</h2>{html}</section>' for k, t, html in sections)
    bytes_read = f", {megabytes(doc['bytes_read'])} read" if doc["bytes_read"] is not None else ""
    meta = [esc(plural(doc["units"], "unit")), esc(f"{megabytes(doc['bytes'])}{bytes_read}, {doc['seconds']:.1f} s"),
            esc("qformats " + ", ".join(doc["qformats_versions"])), esc("options " + "; ".join(doc["options"]))]
    top = header(f"qformats audit: {doc['dir']}", meta, [(k, t) for k, t, _ in sections])
    data = json.dumps(doc, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{CSP}<title>qformats audit: '
            f'{esc(doc["dir"])}</title><style>{BASE_CSS}{CSS}</style></head><body>{top}<main>{body}</main>'
            f'<script type="application/json" id="summary-data">{data}</script></body></html>\n')
