"""The results page: one self-contained HTML file (inline CSS and JS, no server, no network) laying one or
more conformance runs side by side (issue #21; the wpt.fyi / test262.report pattern).

    page(runs) -> str        # runs: documents of `qformats conformance kernel ... --json`

Sections: the matrix (subjects as columns; format / op groups as rows, each with its feature rows;
pass / total per cell; a click on a cell lists its cases, failing ones first, with the clause each is
attributed to and the first mismatch with both values), the cases that fail in exactly one subject,
declared expected failures with their reasons, conformance levels where the runs report them, clause
coverage (with the normative clauses no case exercises) and the provenance of every run. The tables
are rendered here, so the page reads without JavaScript; the script adds the filters and drill-downs,
reading the cases from a JSON block in the page.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from html import escape
from typing import Any

from qformats.pictures.style import BASE_CSS

from .clauses import Clause
from .matrix import NOT_IMPLEMENTED, Matrix, Row, case_tags, primary_clause, shown_status

__all__ = ["page"]


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _anchor(clause: str | None) -> str:
    return f'<a class="clause" href="#clause-{_e(clause)}">{_e(clause)}</a>' if clause else ""


def _script_json(data: Any) -> str:
    """JSON that cannot end its <script> element early."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# -- header and provenance ---------------------------------------------------------------------------

def _distinct(runs: list[dict], key: str, field: str) -> list[str]:
    return sorted({str((d.get(key) or {}).get(field)) for d in runs if (d.get(key) or {}).get(field) is not None})


def _short(commit: str | None) -> str:
    return (commit or "")[:12]


def _tree_note(runs: list[dict], checkout: tuple[str | None, bool | None]) -> str:
    """Whether the runs came from the tree this page was written in (the checkout's ``git rev-parse HEAD``):
    runs of another commit, of a modified tree, or that record none, are said to be so."""
    head, head_dirty = checkout
    recorded = [(d.get("suite") or {}) for d in runs]
    commits = [r.get("commit") for r in recorded]
    unknown = sum(c is None for c in commits)
    notes = []
    if head is None:
        if any(commits):
            notes.append(f"This page was written outside a git checkout: the runs' commits "
                         f"({', '.join(sorted({_short(c) for c in commits if c}))}) cannot be compared with it.")
    else:
        other = sorted({c for c in commits if c and c != head})
        if other:
            n = sum(c in other for c in commits)
            notes.append(f"{n} of {len(runs)} run{'s' if len(runs) != 1 else ''} came from commit "
                         f"{', '.join(_short(c) for c in other)}, not this checkout's {_short(head)}: their cases and "
                         f"verdicts are that tree's, which may differ from this one's.")
        dirty = sum(bool(r.get("dirty")) for r, c in zip(recorded, commits) if c == head)
        if dirty:
            notes.append(f"{dirty} run{'s were' if dirty != 1 else ' was'} made from a modified tree (uncommitted "
                         f"changes on {_short(head)}), not the commit itself.")
        clean = sum(not r.get("dirty") for r, c in zip(recorded, commits) if c == head)
        if head_dirty and clean:
            notes.append(f"This checkout has uncommitted changes on {_short(head)}: {clean} run{'s' if clean != 1 else ''} "
                         f"of the commit itself may not match what it gives now.")
    if unknown:
        notes.append(f"{unknown} run{'s record' if unknown != 1 else ' records'} no commit (an installed package): "
                     f"which tree {'they' if unknown != 1 else 'it'} came from is unknown.")
    return "".join(f'<p class="warn tree">{_e(n)}</p>' for n in notes)


def _header(m: Matrix, generated: str, checkout: tuple[str | None, bool | None] = (None, None)) -> str:
    runs = m.runs
    versions, manifests = _distinct(runs, "suite", "version"), _distinct(runs, "suite", "manifest_sha256")
    commits = sorted({f"{(d.get('suite') or {}).get('commit', '')[:12]}{' (modified)' if (d.get('suite') or {}).get('dirty') else ''}"
                      for d in runs if (d.get("suite") or {}).get("commit")})
    suite = f"qformats {', '.join(versions) or '(version not recorded)'}"
    spec = _distinct(runs, "suite", "spec_version")
    parts = [f"{len(runs)} run{'s' if len(runs) != 1 else ''} of {len(m.subjects)} subject{'s' if len(m.subjects) != 1 else ''}",
             f"suite {_e(suite)}" + (f" (spec {_e(', '.join(spec))})" if spec else ""),
             f"commit {_e(', '.join(commits))}" if commits else "",
             f"case manifest sha256 <code>{_e(', '.join(x[:16] for x in manifests))}</code>" if manifests else "",
             f"page written {_e(generated)}"]
    warn = _tree_note(runs, checkout)
    if len(versions) > 1 or len(manifests) > 1:
        warn += ('<p class="warn">These runs were made with different suite versions or case manifests: '
                 'compare their cells with care (each run\'s digests are under <a href="#subjects">Runs</a>).</p>')
    nav = " · ".join(f'<a href="#{k}">{v}</a>' for k, v in (("matrix", "Matrix"), ("single", "Fails in one subject"),
                                                         ("xfail", "Expected failures"), ("levels", "Levels"),
                                                         ("coverage", "Clause coverage"), ("subjects", "Runs")))
    return (f'<header><h1>qformats conformance results</h1><p class="meta">{" · ".join(p for p in parts if p)}</p>'
            f"{warn}<nav>{nav}</nav></header>")


# -- the matrix --------------------------------------------------------------------------------------

def _cell(m: Matrix, row: Row, s: int, subject: str) -> str:
    cell = m.cell(row, subject)
    if cell.state == "none":
        return '<td class="cell none" title="not run">—</td>'
    counts = ", ".join(f"{n} {k}" for k, n in cell.counts.items() if n)
    if cell.implemented_nothing:
        text, marks = "not implemented", ""
    else:
        text = f'{cell.counts["pass"]}/{cell.total}'
        marks = "".join(f'<span class="mark {k}" title="{cell.counts[k]} {k}">{sym}</span>'
                        for k, sym in (("warning", "!"), ("expected-failure", "x"), (NOT_IMPLEMENTED, "n"),
                                       ("not-applicable", "–")) if cell.counts[k])
    return (f'<td class="cell {cell.state}"><button type="button" class="open" data-row="{_e(row.key)}" '
            f'data-subject="{s}" title="{_e(subject)}: {_e(counts)}">{text}</button>{marks}</td>')


def _row(m: Matrix, row: Row, feature: bool) -> str:
    failing = any(m.cell(row, s).failing for s in m.subjects)
    cells = "".join(_cell(m, row, i, s) for i, s in enumerate(m.subjects))
    if feature:
        head = f'<th class="feature-name">{_e(row.feature)}</th>'
        attrs = f'class="feature" data-parent="{_e(Row(row.format, row.op).key)}" hidden'
    else:
        head = (f'<th><button type="button" class="expand" aria-expanded="false" data-row="{_e(row.key)}" '
                f'title="feature rows">▸</button> {_e(row.label)}</th>')
        attrs = 'class="group"'
    return (f'<tr {attrs} data-row="{_e(row.key)}" data-text="{_e(row.key)}" data-failing="{int(failing)}">'
            f"{head}{cells}</tr>")


def _matrix(m: Matrix) -> str:
    heads = "".join(f'<th class="subject" scope="col">{_e(s)}</th>' for s in m.subjects)
    rows = []
    for group in m.groups:
        rows.append(_row(m, group, False))
        rows += [_row(m, f, True) for f in m.features.get(group, [])]
    return f"""<section id="matrix"><h2>Matrix</h2>
<p class="help">Each cell: cases passed / cases run, for one subject (column) and one case group (row: format and
op; ▸ opens the group's feature rows). Red: a case failed or errored; grey: the subject raised NotImplementedError
("not implemented": on every case it was given, its passes at most rejections), nothing failed; marks:
<span class="mark warning">!</span> warnings, <span class="mark expected-failure">x</span> declared expected failures,
<span class="mark not-implemented">n</span> not implemented, <span class="mark not-applicable">–</span>
not applicable. Click a cell for its cases.</p>
<div class="controls"><label>Filter rows <input id="filter" type="search" placeholder="gptq_v1, q4_k/quantize, bits:3"></label>
<label><input type="checkbox" id="only-failing"> only rows with a failure</label>
<label><input type="checkbox" id="all-features"> all feature rows</label></div>
<div class="scroll"><table id="grid"><thead><tr><th scope="col">case group</th>{heads}</tr></thead>
<tbody>{"".join(rows)}</tbody></table></div>
<div id="drill" hidden><div class="drill-head"><h3 id="drill-title"></h3><button type="button" id="drill-close">close</button></div>
<p id="drill-summary"></p><table id="drill-table"><thead><tr><th>status</th><th>case</th><th>clause</th><th>also cites</th>
<th>detail</th></tr></thead><tbody></tbody></table></div></section>"""


# -- the other views ---------------------------------------------------------------------------------

def _single_group(subject: str, fmt: str, op: str, rows: list[dict]) -> str:
    statuses = Counter(shown_status(r["case"]) for r in rows)
    clauses = Counter(primary_clause(r["case"]) for r in rows)
    summary = (f"{_e(subject)} — {_e(fmt)} · {_e(op)}: {len(rows)} case{'s' if len(rows) != 1 else ''} "
               f"({_e(', '.join(f'{n} {k}' for k, n in statuses.items()))}); "
               f"{_e(', '.join(f'{c} ×{n}' for c, n in clauses.most_common(4)))}")
    trs = "".join(
        f'<tr><td class="status {_e(shown_status(r["case"]))}">{_e(shown_status(r["case"]))}</td><td><code>{_e(r["case"]["id"])}</code></td>'
        f'<td>{_anchor(primary_clause(r["case"]))}</td><td class="detail">{_e(r["case"].get("detail"))}</td>'
        f'<td>{_e(", ".join(f"{s}: {st}" for s, st in r["others"].items()))}</td></tr>' for r in rows)
    return (f'<details class="single-group" data-subject="{_e(subject)}" data-cases="{len(rows)}"{" open" if len(rows) <= 3 else ""}>'
            f"<summary>{summary}</summary><table><thead><tr><th>status</th><th>case</th><th>clause</th><th>detail</th>"
            f"<th>the others</th></tr></thead><tbody>{trs}</tbody></table></details>")


def _single(m: Matrix) -> str:
    rows = m.single_failures()
    if not rows:
        body = "<p>No case fails in exactly one subject (of the cases two subjects or more ran).</p>"
    else:
        groups: dict[tuple[str, str, str], list[dict]] = {}
        for r in rows:
            groups.setdefault((r["subject"], r["format"], r["op"]), []).append(r)
        options = "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in dict.fromkeys(r["subject"] for r in rows))
        body = (f'<div class="controls"><label>Subject <select id="single-subject"><option value="">all</option>{options}'
                f'</select></label> <span id="single-count">{len(rows)} cases</span></div>'
                + "".join(_single_group(*key, group) for key, group in groups.items()))
    return (f'<section id="single"><h2>Fails in exactly one subject</h2><p class="help">Cases that two subjects or '
            f"more ran, that fail or error in one of them and pass in another: what sets that subject apart. One "
            f"line per subject and group, with the clauses the failures are attributed to; open it for the cases.</p>"
            f"{body}</section>")


def _xfail(m: Matrix) -> str:
    rows = m.expected_failures()
    if not rows:
        return '<section id="xfail"><h2>Declared expected failures</h2><p>None of these runs declares one.</p></section>'
    trs = "".join(
        f'<tr><td>{_e(r["subject"])}</td><td>{_e(r["format"])} · {_e(r["op"])}</td><td><code>{_e(r["pattern"])}</code></td>'
        f'<td>{_e(r["reason"])}</td><td>{len(r["held"])}</td><td>{len(r["passed"])}</td>'
        f'<td class="detail">{"<br>".join(_e(c["id"]) for c in r["held"][:20])}{" …" if len(r["held"]) > 20 else ""}</td></tr>'
        for r in rows)
    return (f'<section id="xfail"><h2>Declared expected failures</h2><p class="help">What each subject file declares '
            f"as a known failure, with its mandatory reason; <em>still failing</em>: the cases it covered in the run; "
            f"<em>passed anyway</em>: the entry can go.</p><table><thead><tr><th>subject</th><th>group</th><th>cases</th>"
            f"<th>reason</th><th>still failing</th><th>passed anyway</th><th>case ids</th></tr></thead><tbody>{trs}</tbody>"
            f"</table></section>")


def _words(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_words(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_words(v) for v in value)
    return "" if value is None else str(value)


def _diagnosis_words(doc: dict) -> str:
    """A run's diagnosis line (KC-5.5), from its document; empty for runs recorded before it or with no failure."""
    from .report import diagnosis_line

    found = doc.get("diagnosis")
    line = diagnosis_line(found) if isinstance(found, dict) else None
    return line.removeprefix("diagnosis (KC-5.5): ") if line else ""


def _levels(m: Matrix) -> str:
    rows = m.levels()
    if not rows:
        return ('<section id="levels"><h2>Conformance levels</h2><p>These runs do not report a level.</p></section>')
    merged: dict[tuple, list[str]] = {}
    for r in rows:
        key = (r["subject"], r["op"], _words(r.get("claimed")), _words(r.get("reached")), _words(r.get("readings")),
               _words(r.get("unenforced")), _diagnosis_words(m.runs[r["run"]]))
        merged.setdefault(key, []).append(r["format"])
    trs = "".join(f'<tr><td>{_e(subject)}</td><td>{_e(", ".join(formats))} · {_e(op)}</td><td>{_e(claimed)}</td>'
                  f'<td class="level">{_e(reached)}</td><td>{_e(readings)}</td><td class="detail">{_e(unenforced)}</td>'
                  f'<td class="diagnosis">{_e(diagnosis)}</td></tr>'
                  for (subject, op, claimed, reached, readings, unenforced, diagnosis), formats in merged.items())
    return (f'<section id="levels"><h2>Conformance levels</h2><p class="help">The level each run claimed and reached, '
            f"the named readings the subject follows on non-conforming input, and the rejection rules it does not "
            f"enforce (runs with the same outcome share a line). A decoder-level pass says nothing about validation. "
            f"Diagnosis: the known misreadings (spec/kernels.md KC-5.5) that reproduce the failing answers, each with the "
            f"failing cases it explains; no misreading is named that no failing answer reproduced."
            f"</p><table><thead><tr><th>subject</th><th>groups</th><th>claimed</th><th>reached</th><th>readings</th>"
            f"<th>not enforced</th><th>diagnosis</th></tr></thead><tbody>{trs}</tbody></table></section>")


def _coverage(m: Matrix, clauses: list[Clause] | None) -> str:
    cov = m.coverage(clauses)
    trs = "".join(
        f'<tr id="clause-{_e(r["clause"])}"><th scope="row"><code>{_e(r["clause"])}</code></th><td>{_e(r["title"])}</td>'
        f'<td>{_e(r["chapter"])}</td><td>{r["cases"]}</td><td>{r["pass"]}</td>'
        f'<td class="{"bad" if r["failing"] else ""}">{r["failing"]}</td><td class="na">{r.get("na", 0)}</td>'
        f'<td class="ni">{r.get("ni", 0)}</td><td>{r["attributed"]}</td>'
        f'<td><button type="button" class="clause-cases" data-clause="{_e(r["clause"])}">cases</button></td></tr>'
        for r in cov["exercised"])
    if not cov["spec_available"]:
        missing = "<p>spec/ is not beside this installation: the clauses no case exercises cannot be listed.</p>"
    else:
        by_chapter: dict[str, list[Clause]] = {}
        for c in cov["unexercised"]:
            by_chapter.setdefault(c.chapter, []).append(c)
        blocks = "".join(
            f'<details class="uncovered"><summary>spec/{_e(ch)}: {len(cs)}</summary><ul>'
            + "".join(f"<li><code>{_e(c.id)}</code> {_e(c.title)}</li>" for c in cs) + "</ul></details>"
            for ch, cs in by_chapter.items())
        section = ", ".join(c.id for c in cov["by_section"])
        chapters = ", ".join(f"spec/{c}" for c in cov["chapters"]) or "none"
        missing = (f'<h3 id="unexercised">Normative clauses no case exercises: {len(cov["unexercised"])} of '
                   f'{cov["normative"]}</h3><p class="help">In the chapters these runs touch (<span id="chapters">'
                   f"{_e(chapters)}</span>): neither cited by a case of these runs nor inside a cited section. Other "
                   f"chapters are not counted (container and checkpoint clauses are exercised by <code>qformats "
                   f"validate</code>'s tests, not by kernel cases).</p>{blocks}"
                   + (f'<p class="help">Exercised only through the section that holds them: {_e(section)}.</p>' if section else ""))
    return (f'<section id="coverage"><h2>Clause coverage</h2><p class="help">Every clause the cases of these runs cite: '
            f"distinct cases, their results in all runs that passed, that failed or errored, that were not applicable "
            f"and that the subject did not implement (NotImplementedError), and the failures attributed to it (their "
            f'primary clause). "cases" lists them.</p><table id="coverage-table"><thead><tr><th>clause</th><th>title</th>'
            f"<th>chapter</th><th>cases</th><th>results passed</th><th>results failing</th><th>not applicable</th>"
            f"<th>not implemented</th><th>failures attributed</th><th></th></tr></thead>"
            f"<tbody>{trs}</tbody></table>{missing}</section>")


def _provenance(m: Matrix) -> str:
    trs = []
    for i, d in enumerate(m.runs):
        suite, info, env = d.get("suite") or {}, d.get("subject_info") or {}, d.get("environment") or {}
        device = env.get("device") or {}
        pkg = info.get("package") or {}
        counts = Counter(c["status"] for c in d["cases"])
        trs.append(
            f'<tr><td>{_e(m.labels[i])}</td><td><code>{_e(d["subject"])}</code></td><td>{_e(d["format"])} · {_e(d["op"])}</td>'
            f'<td>{counts["pass"]}/{len(d["cases"])}</td><td>{_e(" ".join(filter(None, [pkg.get("name"), pkg.get("version")])))}</td>'
            f'<td>{_e(env.get("platform"))}</td><td>{_e(env.get("python"))}</td><td>{_e(env.get("numpy"))}</td>'
            f'<td>{_e(env.get("torch") or "—")}</td><td>{_e(" ".join(filter(None, [device.get("arrays"), device.get("kind"), device.get("name")])))}</td>'
            f'<td>{_e(suite.get("version"))}</td><td><code title="{_e(suite.get("cases_sha256"))}">{_e((suite.get("cases_sha256") or "")[:12])}</code></td>'
            f'<td>{_e(env.get("finished"))}</td></tr>')
    return (f'<section id="subjects"><h2>Runs</h2><p class="help">Each run as recorded: the entry point, the package '
            f"that provides it, the platform, the versions and device it ran with, the suite version and the sha256 "
            f"of its cases' bytes.</p><div class=\"scroll\"><table><thead><tr><th>subject</th><th>entry</th><th>group</th>"
            f"<th>passed</th><th>package</th><th>platform</th><th>Python</th><th>numpy</th><th>torch</th><th>device</th>"
            f"<th>suite</th><th>cases sha256</th><th>finished</th></tr></thead><tbody>{''.join(trs)}</tbody></table></div></section>")


# -- the page ----------------------------------------------------------------------------------------

def _data(m: Matrix) -> dict[str, Any]:
    """What the script needs: every case row once, with its tags; titles of the clauses cited."""
    runs = []
    for i, d in enumerate(m.runs):
        runs.append({"s": m.subjects.index(m.labels[i]), "g": Row(d["format"], d["op"]).key,
                     "c": [[c["id"], shown_status(c), primary_clause(c) or "", [x for x in c.get("clauses") or []],
                            c.get("detail", ""), case_tags(d, c["id"])] for c in d["cases"]]})
    return {"subjects": m.subjects, "runs": runs}


def page(runs: list[dict[str, Any]], *, clauses: list[Clause] | None = None, generated: str | None = None,
         checkout: tuple[str | None, bool | None] | None = None) -> str:
    """The results page of ``runs``; ``clauses`` defaults to the spec's (conformance/clauses.py), ``checkout``
    ((commit, modified) of the tree the page is written in, (None, None) outside git) to this checkout's."""
    m = Matrix(runs)
    generated = generated or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if checkout is None:
        from .provenance import checkout_commit

        checkout = checkout_commit()
    body = "".join([_header(m, generated, checkout), "<main>", _matrix(m), _single(m), _xfail(m), _levels(m),
                    _coverage(m, clauses), _provenance(m), "</main>"])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>qformats conformance: {_e(", ".join(m.subjects))[:200]}</title>'
            f"<style>{CSS}</style></head><body>{body}"
            f'<script type="application/json" id="runs-data">{_script_json(_data(m))}</script>'
            f"<script>{JS}</script></body></html>\n")


# the frame every qformats page shares (qformats/pictures/style.py); then this page's own rules
CSS = BASE_CSS + """
thead th{position:sticky;top:0;background:#eef1f5;z-index:1}#grid th.subject{max-width:12em;font-weight:600;overflow-wrap:anywhere}
#grid tbody th{white-space:nowrap;font-weight:500;background:#fafbfc}#grid tr.feature th{padding-left:2.2em;color:var(--dim)}
td.cell{text-align:center;white-space:nowrap;min-width:6em}td.cell.ok{background:var(--ok)}td.cell.bad{background:var(--bad)}
td.cell.na{background:var(--na)}td.cell.none{background:var(--none);color:#aaa}td.cell.ni{background:var(--ni);color:#4a4f57}
td.cell button.open{font:inherit;border:0;background:none;cursor:pointer;padding:0 2px;text-decoration:underline dotted}
td.cell.bad button.open{font-weight:700;color:#8a0c0c}td.cell.selected{outline:3px solid #2b6cb0;outline-offset:-3px}
.mark{display:inline-block;margin-left:4px;padding:0 4px;border-radius:3px;font-size:11px;font-weight:700}
.mark.warning{background:#ffe08a}.mark.expected-failure{background:#cfc4f2}.mark.not-applicable{background:#cdd5e0}
.mark.not-implemented{background:#c4c4c4}.status.not-implemented{color:#6b6f75}
button.expand{border:0;background:none;cursor:pointer;width:1.4em;font-size:12px}
#drill{margin:12px 0;padding:8px 12px;border:2px solid #2b6cb0;background:#f7fbff}
.drill-head{display:flex;justify-content:space-between;align-items:center}.drill-head h3{margin:4px 0}
td.status{font-weight:600;white-space:nowrap}.status.fail,.status.error{color:#a40d0d}.status.pass{color:#126b2a}
.status.warning{color:#8a5a00}.status.expected-failure{color:#5a3fa8}.status.not-applicable{color:var(--dim)}
td.detail{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;max-width:60em;word-break:break-word}
#drill-table td.detail{min-width:34em}#drill-table td code{font-size:12px;overflow-wrap:anywhere}
td.bad{background:var(--bad)}tr:target,tr.hilite{background:var(--hi)!important}tr:target th,tr:target td{background:var(--hi)}
details.single-group{margin:4px 0}details.single-group summary{cursor:pointer}
details.single-group table{margin:4px 0 10px 1.2em}
a.clause{font-family:ui-monospace,Menlo,Consolas,monospace;white-space:nowrap}details.uncovered{margin:3px 0}details.uncovered ul{margin:4px 0 8px;columns:2}
"""

JS = r"""
(function(){
'use strict';
const DATA = JSON.parse(document.getElementById('runs-data').textContent);
const $ = (s, r) => (r || document).querySelector(s), $$ = (s, r) => Array.from((r || document).querySelectorAll(s));
const ORDER = {'fail':0,'error':1,'warning':2,'expected-failure':3,'not-implemented':4,'not-applicable':5,'pass':6};
function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls; if(text!==undefined) e.textContent=text; return e;}
function clauseLink(c){if(!c) return el('span'); const a=el('a','clause',c); a.href='#clause-'+c; return a;}

/* -- filters ------------------------------------------------------------------------------ */
const openGroups = new Set();
function matches(tr, q){ return !q || tr.dataset.text.toLowerCase().includes(q); }
function featureName(tr){ return tr.dataset.text.toLowerCase().split('/').slice(2).join('/'); }
function applyFilters(){
  const q = $('#filter').value.trim().toLowerCase(), failing = $('#only-failing').checked, all = $('#all-features').checked;
  const rows = $$('#grid tbody tr'), features = rows.filter(tr => tr.classList.contains('feature'));
  // a feature row shows when its group is open (or all are), or when the filter names the feature itself
  features.forEach(f => {
    const base = matches(f, q) && (!failing || f.dataset.failing === '1');
    const named = q !== '' && featureName(f).includes(q);
    f.hidden = !(base && (all || openGroups.has(f.dataset.parent) || named));
  });
  // a group row shows when it matches, or when one of its feature rows does
  rows.filter(tr => tr.classList.contains('group')).forEach(g => {
    const child = features.some(f => f.dataset.parent === g.dataset.row && !f.hidden);
    g.hidden = !((matches(g, q) || child) && (!failing || g.dataset.failing === '1'));
  });
}
['#filter','#only-failing','#all-features'].forEach(s => ['input','change'].forEach(ev => $(s).addEventListener(ev, applyFilters)));
$$('button.expand').forEach(b => b.addEventListener('click', () => {
  const key = b.dataset.row, open = !openGroups.has(key);
  if (open) openGroups.add(key); else openGroups.delete(key);
  b.textContent = open ? '▾' : '▸'; b.setAttribute('aria-expanded', String(open)); applyFilters();
}));

/* -- drill-down: a cell's cases, or a clause's ----------------------------------------------- */
function showCases(title, rows){
  const tbody = $('#drill-table tbody'); tbody.textContent = '';
  rows.sort((a, b) => (ORDER[a.c[1]] - ORDER[b.c[1]]) || a.c[0].localeCompare(b.c[0]));
  const counts = {};
  rows.forEach(r => { counts[r.c[1]] = (counts[r.c[1]] || 0) + 1; });
  rows.forEach(r => {
    const [id, status, clause, clauses, detail] = r.c, tr = el('tr');
    tr.dataset.status = status;
    tr.append(el('td','status '+status,status));
    const idc = el('td'); idc.append(el('code','',id)); if (r.subject) idc.append(el('div','help',r.subject)); tr.append(idc);
    const cc = el('td'); cc.append(clauseLink(clause)); tr.append(cc);
    const oc = el('td'); clauses.filter(x => x !== clause).forEach((x, i) => { if (i) oc.append(' '); oc.append(clauseLink(x)); }); tr.append(oc);
    tr.append(el('td','detail',detail));
    tbody.append(tr);
  });
  $('#drill-title').textContent = title;
  $('#drill-summary').textContent = rows.length + ' cases: ' + Object.keys(counts).sort((a,b)=>ORDER[a]-ORDER[b]).map(k => counts[k]+' '+k).join(', ');
  $('#drill').hidden = false;
  $('#drill').scrollIntoView({block:'nearest'});
}
$$('#grid button.open').forEach(b => b.addEventListener('click', () => {
  const key = b.dataset.row, s = Number(b.dataset.subject), parts = key.split('/'), group = parts.slice(0,2).join('/');
  const feature = parts.slice(2).join('/');
  const rows = [];
  DATA.runs.forEach(run => { if (run.s === s && run.g === group)
    run.c.forEach(c => { if (!feature || c[5].includes(feature)) rows.push({c}); }); });
  $$('td.cell.selected').forEach(td => td.classList.remove('selected'));
  b.parentElement.classList.add('selected');
  showCases(DATA.subjects[s] + ' — ' + key, rows);
}));
$$('button.clause-cases').forEach(b => b.addEventListener('click', () => {
  const clause = b.dataset.clause, rows = [];
  DATA.runs.forEach(run => run.c.forEach(c => { if (c[3].includes(clause)) rows.push({c, subject: DATA.subjects[run.s] + ' · ' + run.g}); }));
  showCases('cases citing ' + clause, rows);
}));
$('#drill-close').addEventListener('click', () => { $('#drill').hidden = true; $$('td.cell.selected').forEach(td => td.classList.remove('selected')); });

/* -- fails in one subject: by subject ------------------------------------------------------ */
const single = $('#single-subject');
if (single) single.addEventListener('input', () => {
  let n = 0;
  $$('#single details.single-group').forEach(d => { d.hidden = !!single.value && d.dataset.subject !== single.value;
                                                    if (!d.hidden) n += Number(d.dataset.cases); });
  $('#single-count').textContent = n + ' cases';
});
/* a clause link marks its coverage row even when the hash does not change */
document.addEventListener('click', e => {
  const a = e.target.closest && e.target.closest('a.clause'); if (!a) return;
  $$('tr.hilite').forEach(t => t.classList.remove('hilite'));
  const row = document.getElementById(a.getAttribute('href').slice(1)); if (row) row.classList.add('hilite');
});
document.body.dataset.ready = '1';
})();
"""
