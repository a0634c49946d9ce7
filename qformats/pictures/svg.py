"""Small SVG pictures from plain data: data in, a string out (DESIGN.md §7).

Each function returns one ``<svg>`` element, well-formed XML that pages inline (no ``xmlns``, which inline
SVG does not need; ``standalone=True`` adds it for a file of its own), with no script, no external reference
and no style sheet: fills are attributes, so the picture means the same wherever it is pasted. Tooltips are
SVG ``<title>`` children; a cell with an ``href`` is wrapped in ``<a href=...>``. The inspect page
(:mod:`qformats.pictures.page`) and the audit summary page draw with these.

    heatmap([{"row": 0, "col": 1, "fill": "#e4606d", "title": "...", "href": "#f-0"}], rows=2, cols=3,
            row_labels=["0", "1"], col_labels=["q", "k", "v"])
    histogram([0, 3, 5, 1], x_min=-4, bin_width=1, y_max=10, title="scales")
    bar_chart(["valid", "invalid"], [18, 2], fills=["#8fd19e", "#e4606d"])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .style import COLOURS, esc

__all__ = ["heatmap", "histogram", "bar_chart"]

FONT = 'font-family="system-ui,sans-serif" font-size="11"'
CHAR_W = 6.5          # an 11 px label's average advance: room reserved for labels, no font metrics needed


def _open(width: float, height: float, cls: str, data: Mapping[str, Any] | None, standalone: bool) -> str:
    ns = ' xmlns="http://www.w3.org/2000/svg"' if standalone else ""
    attrs = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in (data or {}).items())
    return (f'<svg{ns} class="{esc(cls)}" width="{width:g}" height="{height:g}" '
            f'viewBox="0 0 {width:g} {height:g}" role="img"{attrs}>')


def _rect(x: float, y: float, w: float, h: float, fill: str, cls: str = "", title: str | None = None,
          data: Mapping[str, Any] | None = None) -> str:
    attrs = "".join(f' data-{esc(k)}="{esc(v)}"' for k, v in (data or {}).items())
    klass = f' class="{esc(cls)}"' if cls else ""
    inner = f"<title>{esc(title)}</title>" if title else ""
    return f'<rect{klass} x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" fill="{esc(fill)}"{attrs}>{inner}</rect>'


def heatmap(cells: Iterable[Mapping[str, Any]], *, rows: int, cols: int, cell_w: float = 18, cell_h: float = 18,
            row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
            background: str | None = None, gap: float = 0, css_class: str = "heatmap", title: str | None = None,
            data: Mapping[str, Any] | None = None, standalone: bool = False) -> str:
    """A grid of ``rows`` x ``cols`` cells; only the cells given are drawn, over ``background`` (a fill for the
    whole grid, or None for none).

    Each cell is a mapping: ``row``, ``col`` (0-based), ``fill``; optional ``cls`` (its class), ``title`` (its
    tooltip), ``href`` (a link, e.g. ``#finding-3``) and ``data`` (``data-*`` attributes). Row labels go on the
    left, column labels above, turned 45 degrees when wider than a cell. ``gap``: pixels left between cells
    (the background, or the page, shows through).
    """
    left = max((len(s) for s in row_labels or ()), default=0) * CHAR_W + (8 if row_labels else 0)
    turned = bool(col_labels) and max(len(s) for s in col_labels) * CHAR_W > cell_w
    top = (max(len(s) for s in col_labels) * CHAR_W * 0.72 + 14 if turned else 16) if col_labels else 0
    width, height = left + cols * cell_w + (40 if turned else 2), top + rows * cell_h + 2
    out = [_open(width, height, css_class, data, standalone)]
    if title:
        out.append(f"<title>{esc(title)}</title>")
    if background:
        out.append(_rect(left, top, cols * cell_w, rows * cell_h, background, "background"))
    for i, label in enumerate(row_labels or ()):
        out.append(f'<text {FONT} x="{left - 6:g}" y="{top + (i + 0.5) * cell_h + 4:g}" text-anchor="end">{esc(label)}</text>')
    for j, label in enumerate(col_labels or ()):
        x = left + (j + 0.5) * cell_w
        turn = f' transform="rotate(-45 {x:g} {top - 6:g})" text-anchor="start"' if turned else ' text-anchor="middle"'
        out.append(f'<text {FONT} x="{x:g}" y="{top - 6:g}"{turn}>{esc(label)}</text>')
    for c in cells:
        rect = _rect(left + c["col"] * cell_w, top + c["row"] * cell_h, cell_w - gap, cell_h - gap, c["fill"],
                     c.get("cls", "cell"), c.get("title"), c.get("data"))
        out.append(f'<a href="{esc(c["href"])}">{rect}</a>' if c.get("href") else rect)
    out.append("</svg>")
    return "".join(out)


def histogram(counts: Sequence[float], *, x_min: float, bin_width: float, y_max: float, width: float = 260,
              height: float = 90, fill: str = COLOURS["scale"], title: str | None = None, x_label: str = "",
              x_ticks: Sequence[float] = (), css_class: str = "histogram", data: Mapping[str, Any] | None = None,
              standalone: bool = False) -> str:
    """Bars of ``counts`` (bin ``i`` spans ``x_min + i * bin_width`` to the next edge) on axes fixed by the caller:
    pictures drawn with the same ``x_min``, ``len(counts)``, ``bin_width`` and ``y_max`` share their axes.

    The ``svg`` carries ``data-x-min``, ``data-x-max`` and ``data-y-max``, so a reader can check that. A bar
    taller than ``y_max`` is clipped at the top; every bar's ``<title>`` says its bin and count.
    """
    if y_max <= 0 or bin_width <= 0:
        raise ValueError("histogram axes need y_max > 0 and bin_width > 0")
    left, bottom, top = 6, 18 if x_label or x_ticks else 4, 14 if title else 4
    plot_w, plot_h = width - 2 * left, height - bottom - top
    x_max = x_min + len(counts) * bin_width
    scale_x = plot_w / (x_max - x_min)
    axes = {"x-min": f"{x_min:g}", "x-max": f"{x_max:g}", "y-max": f"{y_max:g}", **(data or {})}
    out = [_open(width, height, css_class, axes, standalone)]
    if title:
        out.append(f'<text {FONT} x="{left}" y="11">{esc(title)}</text>')
    out.append(f'<line x1="{left}" y1="{top + plot_h:g}" x2="{left + plot_w:g}" y2="{top + plot_h:g}" '
               f'stroke="{COLOURS["axis"]}"/>')
    for i, n in enumerate(counts):
        if n <= 0:
            continue
        h = min(n / y_max, 1.0) * plot_h
        lo = x_min + i * bin_width
        out.append(_rect(left + i * bin_width * scale_x, top + plot_h - h, max(bin_width * scale_x - 1, 1), h, fill,
                         "bar", f"[{lo:g}, {lo + bin_width:g}): {n:g}"))
    for t in x_ticks:
        x = left + (t - x_min) * scale_x
        out.append(f'<line x1="{x:g}" y1="{top + plot_h:g}" x2="{x:g}" y2="{top + plot_h + 3:g}" stroke="{COLOURS["axis"]}"/>'
                   f'<text {FONT} x="{x:g}" y="{top + plot_h + 14:g}" text-anchor="middle">{esc(f"{t:g}")}</text>')
    if x_label:
        out.append(f'<text {FONT} x="{left + plot_w:g}" y="{top + 10:g}" text-anchor="end" fill="{COLOURS["axis"]}">'
                   f"{esc(x_label)}</text>")
    out.append("</svg>")
    return "".join(out)


def bar_chart(labels: Sequence[str], values: Sequence[float], *, fills: Sequence[str] | None = None,
              width: float = 360, bar_h: float = 16, title: str | None = None, css_class: str = "bar-chart",
              standalone: bool = False) -> str:
    """Horizontal bars, one per label, scaled to the largest value, each with its value written after it."""
    if len(labels) != len(values):
        raise ValueError("bar_chart needs one value per label")
    left = max((len(s) for s in labels), default=0) * CHAR_W + 10
    top = 16 if title else 2
    room = width - left - 50
    biggest = max((v for v in values), default=0) or 1
    out = [_open(width, top + len(labels) * (bar_h + 4) + 2, css_class, None, standalone)]
    if title:
        out.append(f'<text {FONT} x="2" y="11">{esc(title)}</text>')
    for i, (label, v) in enumerate(zip(labels, values)):
        y = top + i * (bar_h + 4)
        fill = fills[i] if fills else COLOURS["scale"]
        w = max(v / biggest * room, 0)
        out.append(f'<text {FONT} x="{left - 6:g}" y="{y + bar_h - 4:g}" text-anchor="end">{esc(label)}</text>')
        out.append(_rect(left, y, w, bar_h, fill, "bar", f"{label}: {v:g}"))
        out.append(f'<text {FONT} x="{left + w + 4:g}" y="{y + bar_h - 4:g}">{esc(f"{v:g}")}</text>')
    out.append("</svg>")
    return "".join(out)
