"""The inspect page: ``qformats inspect --html report.html PATH`` (spec/checkpoints.md INSPECT-1, INSPECT-2).

    inspect_page(doc) -> str      # doc: the inspect --json document with its ``pictures``

One self-contained HTML file in the results page's style (:mod:`qformats.pictures.style`): inline SVG and CSS,
no script and nothing fetched. Drawn from the document only (DESIGN.md §7): a layer x module heatmap of
verdicts with each cell's statistics as its tooltip; a map per tensor of its blocks holding non-finite values
or outliers, each coloured cell a link to its finding's row; scale and zero-point histograms per layer on
shared axes; the findings and the layers as tables.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..report import layer_of, plural, scope
from .style import BASE_CSS, COLOURS, esc, header
from .svg import heatmap, histogram

__all__ = ["inspect_page", "layer_and_module", "FULL_MAP_CELLS"]

# Layer-indexed names: llama.cpp's blk.N.attn_q.weight, transformers' model.layers.N.self_attn.q_proj, GPT-2's h.N.
LAYER = re.compile(r"(?:^|\.)(?:blk|layers|h|block|blocks)\.(\d+)\.(.+)$")
OTHER = "other"             # the heatmap row of tensors outside the numbered layers (embeddings, output, norms)
FULL_MAP_CELLS = 4096       # maps up to this many cells draw each cell; larger ones a background and the hits
RANK = {"invalid": 3, "warning": 2, "unchecked": 1, "valid": 0}
STATS = (("format", "format"), ("bits_per_weight", "bpw"), ("mean", "mean"), ("std", "std"), ("max_abs", "max|w|"),
         ("nonfinite", "non-finite"))


def layer_and_module(name: str) -> tuple[str, str]:
    """(layer, module kind) of a tensor or module name: ``blk.3.attn_q.weight`` -> ("3", "attn_q"),
    ``model.layers.3.self_attn.q_proj`` -> ("3", "q_proj"), experts folded into their projection;
    ``token_embd.weight`` -> ("other", "token_embd")."""
    m = LAYER.search(name)
    rest = m.group(2) if m else name
    parts = [p for p in rest.split(".") if p not in ("weight", "bias")]
    return (m.group(1) if m else OTHER), (parts[-1] if parts else rest)


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# -- links: each layer's row, each finding's row ----------------------------------------------------------------


class _Links:
    def __init__(self, doc: dict[str, Any]):
        self.layers = [r["layer"] for r in doc.get("rows") or doc.get("layers") or []]
        self.row_id = {name: f"layer-{i}" for i, name in enumerate(self.layers)}
        self.findings: dict[str, list[tuple[int, dict]]] = {}
        for i, f in enumerate(doc.get("findings") or []):
            self.findings.setdefault(layer_of(f.get("tensor"), self.layers) or "", []).append((i, f))

    def verdict(self, row: dict[str, Any]) -> str:
        severities = {f["severity"] for _, f in self.findings.get(row["layer"], [])}
        if "error" in severities:
            return "invalid"
        if "warning" in severities:
            return "warning"
        return "unchecked" if "(unchecked)" in str(row.get("format", "")) else "valid"

    def finding(self, layer: str, prefer: tuple[str, ...] = ()) -> str:
        """The anchor of the layer's first finding whose code has one of ``prefer`` in it, else its first error,
        else its first finding, else its own row."""
        found = self.findings.get(layer, [])
        for test in ([lambda f: any(p in f["code"] for p in prefer)] if prefer else []) + \
                [lambda f: f["severity"] == "error", lambda f: True]:
            for i, f in found:
                if test(f):
                    return f"#finding-{i}"
        return f"#{self.row_id[layer]}" if layer in self.row_id else "#layers"


# -- the heatmap ----------------------------------------------------------------------------------------------


def _heatmap(doc: dict[str, Any], links: _Links) -> str:
    rows = doc.get("rows") or doc.get("layers") or []
    if not rows:
        return "<p>No layer to draw.</p>"
    cells: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        cells.setdefault(layer_and_module(row["layer"]), []).append(row)
    layers = sorted({k[0] for k in cells}, key=lambda s: (s == OTHER, int(s) if s.isdigit() else 0))
    modules = list(dict.fromkeys(k[1] for k in cells))
    drawn = []
    for (layer, module), members in cells.items():
        verdict = max((links.verdict(r) for r in members), key=RANK.get)
        lines = [f"layer {layer}, {module}: {verdict}"]
        for r in members:
            stats = ", ".join(f"{label} {_fmt(r[k])}" for k, label in STATS if r.get(k) is not None)
            codes = sorted({f["code"] for _, f in links.findings.get(r["layer"], [])})
            lines.append(f"{r['layer']}: {stats}" + (f"; findings: {', '.join(codes)}" if codes else ""))
        worst = next(r for r in members if links.verdict(r) == verdict)
        drawn.append({"row": layers.index(layer), "col": modules.index(module), "fill": COLOURS[verdict],
                      "cls": f"cell {verdict}", "title": "\n".join(lines), "href": links.finding(worst["layer"]),
                      "data": {"layer": layer, "module": module, "verdict": verdict}})
    legend = " ".join(f'<span class="key" style="background:{COLOURS[v]}"></span>{v}' for v in RANK)
    return (f'<p class="help">One row per layer, one column per module kind; the colour is the verdict of the '
            f"module's checks (its findings), the tooltip its statistics; a click opens its first finding. "
            f"{legend}</p><div class=\"scroll\">"
            + heatmap(drawn, rows=len(layers), cols=len(modules), cell_w=28, cell_h=18, row_labels=layers,
                      col_labels=modules, background=COLOURS["absent"], gap=1, css_class="heatmap layers",
                      title="layer x module verdicts") + "</div>")


# -- the maps -------------------------------------------------------------------------------------------------


def _span(lo: int, n: int, end: int, what: str) -> str:
    hi = min(lo + n, end) - 1
    return f"{what} {lo}" if hi == lo else f"{what}s {lo}..{hi}"


def _map_cell(t: dict[str, Any], i: int, j: int) -> str:
    """Which blocks a cell holds, and their elements when it holds one block."""
    rows = _span(i * t["cell_rows"], t["cell_rows"], t["rows"], "row")
    blocks = _span(j * t["cell_blocks"], t["cell_blocks"], t["blocks"], "block")
    if t["cell_rows"] == 1 and t["cell_blocks"] == 1:
        e = t["block_elements"]
        blocks += f" (elements {j * e}..{(j + 1) * e - 1})"
    return f"{t['tensor']} {rows}, {blocks}"


def _tensor_map(t: dict[str, Any], links: _Links) -> str:
    gr, gc = t["grid"]
    hits: dict[tuple[int, int], dict] = {}
    for i, j, n, r, b, x in t["outliers"]:
        hits[(i, j)] = {"row": i, "col": j, "fill": COLOURS["outlier"], "cls": "cell outlier",
                        "title": f"{_map_cell(t, i, j)}: {plural(int(n), 'outlier block')}, first row {r} block {b} "
                                 f"(|w - mean| up to {x:.4g})", "href": links.finding(t["tensor"], ("outlier",)),
                        "data": {"row": r, "block": b}}
    for i, j, n, r, b in t["nonfinite"]:
        hits[(i, j)] = {"row": i, "col": j, "fill": COLOURS["nonfinite"], "cls": "cell nonfinite",
                        "title": f"{_map_cell(t, i, j)}: {plural(n, 'non-finite value')}, first in row {r} block {b}",
                        "href": links.finding(t["tensor"], ("nonfinite", "nan", "inf")),
                        "data": {"row": r, "block": b}}
    cells = list(hits.values())
    if gr * gc <= FULL_MAP_CELLS:         # every cell drawn, each naming its block
        cells += [{"row": i, "col": j, "fill": COLOURS["clean"], "cls": "cell clean", "title": _map_cell(t, i, j),
                   "data": {"row": i * t["cell_rows"], "block": j * t["cell_blocks"]}}
                  for i in range(gr) for j in range(gc) if (i, j) not in hits]
    cw, ch = max(2, min(40, 480 // max(gc, 1))), max(2, min(18, 240 // max(gr, 1)))
    pooled = "" if t["cell_rows"] == t["cell_blocks"] == 1 else \
        f" (a cell: {t['cell_rows']} rows x {t['cell_blocks']} blocks)"
    head = (f'<h3 id="map-{esc(links.row_id.get(t["tensor"], t["tensor"]))}">{esc(t["tensor"])}</h3>'
            f'<p class="help">{t["rows"]} rows x {t["blocks"]} blocks of {t["block_elements"]} elements{pooled}; '
            f'{plural(sum(c[2] for c in t["nonfinite"]), "non-finite value")}, '
            f'{plural(int(sum(c[2] for c in t["outliers"])), "outlier block")}.</p>')
    every = gr * gc <= FULL_MAP_CELLS
    return head + heatmap(cells, rows=gr, cols=gc, cell_w=cw, cell_h=ch, background=None if every else COLOURS["clean"],
                          gap=1 if every and min(cw, ch) >= 6 else 0, css_class="heatmap tensor-map",
                          data={"tensor": t["tensor"], "grid": f"{gr}x{gc}"})


def _maps(pictures: dict[str, Any], links: _Links) -> str:
    shown = [t for t in pictures["tensors"] if t["nonfinite"] or t["outliers"]]
    clean = [t["tensor"] for t in pictures["tensors"] if not (t["nonfinite"] or t["outliers"])]
    out = [f'<p class="help">Each tensor as a grid of its blocks (rows down, blocks of a row across), pooled to at '
           f'most {pictures["max_cells"]} x {pictures["max_cells"]} cells: '
           f'<span class="key" style="background:{COLOURS["nonfinite"]}"></span>non-finite values, '
           f'<span class="key" style="background:{COLOURS["outlier"]}"></span>a block deviating more than '
           f'{pictures["outlier_factor"]:g} standard deviations from the mean (the tensor\'s finite weights), '
           f'<span class="key" style="background:{COLOURS["clean"]}"></span>neither. A coloured cell links to its '
           f"finding; its tooltip names its block.</p>"]
    out += [_tensor_map(t, links) for t in shown]
    if clean:
        out.append(f"<details><summary>{plural(len(clean), 'tensor')} with no non-finite value and no outlier block"
                   f"</summary><p>{esc(', '.join(clean))}</p></details>")
    if pictures.get("not_drawn"):
        out.append("<details><summary>not drawn: " + plural(len(pictures["not_drawn"]), "layer") + "</summary><ul>"
                   + "".join(f"<li>{esc(k)}: {esc(v)}</li>" for k, v in pictures["not_drawn"].items()) + "</ul></details>")
    return "".join(out)


# -- the histograms -------------------------------------------------------------------------------------------


def _summed(hists: list[dict]) -> dict[str, Any] | None:
    if not hists:
        return None
    return {"counts": [sum(c) for c in zip(*(h["counts"] for h in hists))], "total": sum(h["total"] for h in hists),
            "zero": sum(h["zero"] for h in hists), "negative": sum(h["negative"] for h in hists),
            "nonfinite": sum(h["nonfinite"] for h in hists),
            "fields": sorted({f for h in hists for f in h["fields"]})}


def _histograms(pictures: dict[str, Any]) -> str:
    per_layer: dict[str, dict[str, list[dict]]] = {}
    for t in pictures["tensors"]:
        layer = layer_and_module(t["tensor"])[0]
        for kind in ("scales", "zeros"):
            if t.get(kind):
                per_layer.setdefault(layer, {"scales": [], "zeros": []})[kind].append(t[kind])
    if not per_layer:
        return "<p>No layer has scales qformats could histogram.</p>"
    sums = {layer: {k: _summed(v) for k, v in kinds.items()} for layer, kinds in per_layer.items()}
    every = [h for kinds in sums.values() for h in kinds.values() if h and h["total"]]
    used = [i for h in every for i, n in enumerate(h["counts"]) if n]
    lo, hi = (min(used), max(used) + 1) if used else (0, 1)
    lo, hi = max(lo - 1, 0), min(max(hi + 1, lo + 8), len(every[0]["counts"]) if every else hi)
    y_max = max((n / h["total"] for h in every for n in h["counts"][lo:hi]), default=1.0) or 1.0
    x0 = pictures["log2_min"] + lo
    ticks = [x for x in range(math.ceil(x0 / 4) * 4, x0 + hi - lo + 1, 4)]
    body = []
    for layer in sorted(sums, key=lambda s: (s == OTHER, int(s) if s.isdigit() else 0)):
        cells = []
        for kind, colour in (("scales", COLOURS["scale"]), ("zeros", COLOURS["zero"])):
            h = sums[layer][kind]
            if not h or not h["total"]:
                cells.append("<td>—</td>")
                continue
            bad = f' <span class="bad">{h["nonfinite"]} non-finite</span>' if h["nonfinite"] else ""
            svg = histogram([n / h["total"] for n in h["counts"][lo:hi]], x_min=x0, bin_width=1, y_max=y_max,
                            fill=colour, x_label="log2 |x|", x_ticks=ticks, css_class=f"histogram {kind}",
                            title=f"{', '.join(h['fields'])}: {h['total']} values",
                            data={"layer": layer, "kind": kind})
            cells.append(f'<td>{svg}<div class="counts">zero {h["zero"]}, negative {h["negative"]}{bad}</div></td>')
        body.append(f"<tr><th>{esc(layer)}</th>{''.join(cells)}</tr>")
    return (f'<p class="help">Per layer, the fraction of its scales (ggml d; safetensors scales) and zero-points '
            f"(ggml dmin, m; safetensors zero-points) in each bin of floor(log2 |x|); every histogram has the same "
            f"axes: x from 2^{x0} to 2^{x0 + hi - lo}, y up to {y_max:.3g} of a layer's values. Zeros and non-finite "
            f"values are counted below each.</p><table class=\"hist\"><thead><tr><th>layer</th><th>scales</th>"
            f"<th>zero-points</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


# -- tables and the page --------------------------------------------------------------------------------------


def _findings(doc: dict[str, Any]) -> str:
    found = doc.get("findings") or []
    if not found:
        return "<p>No finding.</p>"
    trs = "".join(f'<tr id="finding-{i}" class="{esc(f["severity"])}"><td>{esc(f["severity"])}</td>'
                  f'<td><code>{esc(f["code"])}</code></td><td>{esc(f.get("clause"))}</td><td>{esc(f.get("tensor"))}</td>'
                  f'<td class="detail">{esc(f["message"])}</td><td>{esc(f.get("count"))}</td></tr>'
                  for i, f in enumerate(found))
    return ("<table><thead><tr><th>severity</th><th>code</th><th>clause</th><th>tensor</th><th>message</th>"
            f"<th>count</th></tr></thead><tbody>{trs}</tbody></table>")


def _layers(doc: dict[str, Any], links: _Links) -> str:
    from ..inspect import COLUMNS

    rows = doc.get("rows") or doc.get("layers") or []
    present = [(k, h) for k, h in COLUMNS if any(r.get(k) is not None for r in rows)]
    head = "".join(f"<th>{esc(h)}</th>" for _, h in present)
    trs = "".join(f'<tr id="{links.row_id[r["layer"]]}" class="{links.verdict(r)}">'
                  + "".join(f"<td>{esc(_fmt(r.get(k)) if r.get(k) is not None else '-')}</td>" for k, _ in present)
                  + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table></div>'


# Nothing may be fetched: no script, no font, no image, no frame; inline CSS only (INSPECT-1.2).
CSP = ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
       'img-src data:">')
CSS = """
.key{display:inline-block;width:12px;height:12px;margin:0 4px 0 10px;vertical-align:-1px;border:1px solid #0002}
svg{display:block}svg a rect:hover{stroke:#1d232b;stroke-width:1.5}h3{margin:16px 0 2px;font-size:14px}
table.hist td{padding:2px 6px}.counts{font-size:11px;color:var(--dim)}.bad{color:#a40d0d;font-weight:600}
tr.invalid td:first-child{box-shadow:inset 4px 0 #e4606d}tr.warning td:first-child{box-shadow:inset 4px 0 #ffd166}
tr.error td:first-child{color:#a40d0d;font-weight:600}td.detail{font-size:12px;max-width:60em}
.verdict.invalid{color:#ffb3b8;font-weight:700}.verdict.valid{color:#a8e6b4;font-weight:700}
"""


def inspect_page(doc: dict[str, Any]) -> str:
    """The page of one ``inspect --json`` document that carries ``pictures`` (without them, no maps or histograms)."""
    links = _Links(doc)
    pictures = doc.get("pictures")
    s = doc.get("summary") or {}
    meta = [f'<span class="verdict {esc(doc["verdict"])}">{esc(doc["verdict"].upper())}</span>', esc(doc.get("format")),
            esc(scope(s, names="validate -v names them")) if s else "",
            f"{plural(s.get('errors', 0), 'error')}, {plural(s.get('warnings', 0), 'warning')}"]
    head = doc.get("header") or {}
    if head:
        meta.append(esc(f"{head.get('architecture') or '?'} {head.get('file_type_name') or ''}".strip()))
    sections = [("heatmap", "Layers x modules", _heatmap(doc, links))]
    if pictures:
        sections += [("maps", "Non-finite values and outliers", _maps(pictures, links)),
                     ("histograms", "Scales and zero-points", _histograms(pictures))]
    sections += [("findings", "Findings", _findings(doc)), ("layers", "Layers", _layers(doc, links))]
    body = "".join(f'<section id="{k}"><h2>{esc(t)}</h2>{html}</section>' for k, t, html in sections)
    top = header(f"qformats inspect: {doc['path']}", meta, [(k, t) for k, t, _ in sections])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{CSP}<title>qformats inspect: {esc(doc["path"])}'
            f'</title><style>{BASE_CSS}{CSS}</style></head><body data-ready="1">{top}<main>{body}</main></body></html>\n')
