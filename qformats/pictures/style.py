"""The one style of qformats' pages (DESIGN.md §7): the conformance results page and the inspect page share it.

``BASE_CSS`` is the page frame (colours, header band, sections, tables); each page appends its own rules.
``COLOURS`` are the fills the pictures use, so a test (or a screenshot) can tell a cell's meaning by its colour.
"""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["BASE_CSS", "COLOURS", "esc", "header"]

BASE_CSS = """
:root{--ok:#d7f0dc;--bad:#f8d0d0;--na:#e4e8f0;--ni:#d9d9d9;--none:#f4f4f4;--line:#d0d4da;--ink:#1d232b;--dim:#5b6470;--hi:#fff3b0}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink)}
header{padding:14px 24px;background:#24303f;color:#fff}header h1{margin:0 0 4px;font-size:20px}
header .meta{margin:0;color:#c9d3df}header nav{margin-top:6px}header a{color:#9fd0ff}header code{color:#fff}
main{padding:8px 24px 40px}h2{margin:26px 0 6px;font-size:17px;border-bottom:1px solid var(--line)}
.help{color:var(--dim);margin:4px 0 8px;max-width:70em}.warn{background:#fff1c2;color:#5a4300;padding:6px 10px}
.controls{display:flex;gap:18px;align-items:center;margin:8px 0;flex-wrap:wrap}
input[type=search]{width:22em;padding:4px 6px}.scroll{overflow:auto;max-height:70vh}
table{border-collapse:collapse;margin:4px 0}th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
"""

# Fills of the pictures' cells. Verdicts as the results page's cells (ok, bad, na); the map's non-finite cell a
# saturated red no other cell uses, so a screenshot's pixel says which it is.
COLOURS = {
    "valid": "#8fd19e", "warning": "#ffd166", "invalid": "#e4606d", "unchecked": "#c4c4c4", "absent": "#f4f4f4",
    "clean": "#dfe7ef", "outlier": "#f39c12", "nonfinite": "#b00020",
    "scale": "#3b6ea5", "zero": "#8e5ea2", "axis": "#5b6470", "grid": "#d0d4da",
}


def esc(value: Any) -> str:
    """Text for HTML or SVG (an attribute or an element's text): None is empty, quotes escaped."""
    return escape("" if value is None else str(value), quote=True)


def header(title: str, meta: list[str], nav: list[tuple[str, str]], extra: str = "") -> str:
    """The dark band atop a page: its title, a line of facts (already HTML), links to the page's sections."""
    links = " · ".join(f'<a href="#{esc(k)}">{esc(v)}</a>' for k, v in nav)
    return (f'<header><h1>{esc(title)}</h1><p class="meta">{" · ".join(m for m in meta if m)}</p>'
            f"{extra}<nav>{links}</nav></header>")
