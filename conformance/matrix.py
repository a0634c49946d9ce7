"""Several conformance runs side by side: subjects as columns, case groups as rows (issue #21, the
wpt.fyi / test262.report pattern). The model behind the results page (conformance/html.py) and the
README's real-library table.

    runs = load_runs(["build/matrix/runs.json", "mine.json"])   # `--json` documents or bundles of them
    m = Matrix(runs)
    m.subjects, m.rows, m.cell(row, subject)                    # pass / total per group and subject
    m.single_failures()                                         # cases that fail in exactly one subject

A run is the document ``qformats conformance kernel ... --json`` prints (conformance/provenance.py);
a bundle is ``{"runs": [run, ...]}``. Keys the runner adds later (a run's ``level``, a case's primary
``clause``) are read where present and defaulted where not, so older runs still load.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from qformats.errors import fail

from .clauses import CHAPTER_OF_PREFIX, Clause, covering, sort_key, spec_clauses

__all__ = ["load_runs", "Matrix", "Row", "Cell", "subject_label", "primary_clause", "readme_table",
           "replace_section", "shown_status", "FAILING", "CORE_FORMATS", "NOT_IMPLEMENTED"]

FAILING = ("fail", "error")
STATUSES = ("pass", "fail", "error", "not-applicable", "expected-failure", "warning")
# row order: the layer formats first; the GGUF block types after them, by name
CORE_FORMATS = ("gptq_v1", "gptq_v2", "awq_gemm", "ctensors_pack", "q4_k", "spqr")
OPS = ("dequantize", "matmul", "pack", "quantize")
RUN_KEYS = {"subject", "format", "op", "cases"}
# A subject that raises NotImplementedError on a case has not implemented it: the page shows that case as
# "not implemented" (grey), apart from the failures. The run document keeps the runner's status ("error").
NOT_IMPLEMENTED = "not-implemented"
_NOT_IMPLEMENTED = re.compile(r"^the subject raised: NotImplementedError\b")


# -- loading -----------------------------------------------------------------------------------------

def _check_run(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or not RUN_KEYS <= set(doc) or not isinstance(doc["cases"], list):
        raise fail("argument.invalid", "run", "a conformance run document with subject, format, op and cases "
                   "(qformats conformance kernel ... --json)", type(doc).__name__ if not isinstance(doc, dict)
                   else sorted(doc)[:8], file=where)
    for row in doc["cases"]:
        if not isinstance(row, dict) or not {"id", "status"} <= set(row) or row["status"] not in STATUSES:
            raise fail("argument.invalid", "case", "a case row with id and a known status", str(row)[:120], file=where)
    return doc


def load_runs(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """The runs in ``paths``: each file holds one run document or a bundle ``{"runs": [...]}``."""
    runs: list[dict[str, Any]] = []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise fail("argument.invalid", "run", "a readable JSON run document", str(exc)[:200], file=str(path)) from None
        docs = doc["runs"] if isinstance(doc, dict) and isinstance(doc.get("runs"), list) else [doc]
        runs += [_check_run(d, str(path)) for d in docs]
    if not runs:
        raise fail("argument.invalid", "runs", "at least one run", 0)
    return runs


# -- one run's facts, defaulted for older documents ------------------------------------------------

def shown_status(row: dict[str, Any]) -> str:
    """The status the page shows: the runner's, except ``not-implemented`` for a NotImplementedError raised."""
    if row.get("status") == "error" and _NOT_IMPLEMENTED.match(str(row.get("detail") or "")):
        return NOT_IMPLEMENTED
    return row["status"]


def primary_clause(row: dict[str, Any]) -> str | None:
    """The clause a case's result is attributed to: the runner's ``clause`` where it names one, else the
    first clause the case cites."""
    clauses = row.get("clauses") or []
    return row.get("clause") or (clauses[0] if clauses else None)


def _declared(doc: dict[str, Any]) -> dict[str, Any]:
    return (doc.get("subject_info") or {}).get("declaration") or {}


def _default_declaration() -> dict[str, Any]:
    from .subject import SubjectDeclaration

    return SubjectDeclaration().model_dump(mode="json")


def _declaration_note(doc: dict[str, Any]) -> str:
    """What a run's subject file changed from the defaults, so two runs of one library stay apart."""
    decl, default = _declared(doc), _default_declaration()
    notes = [f"{k}={v}" for k, v in sorted(decl.items())
             if k not in ("supports", "expected_failures") and k in default and v != default[k]]
    if decl.get("supports"):
        notes.append("supports " + ", ".join(f"{k}={'/'.join(v)}" for k, v in sorted(decl["supports"].items())))
    if decl.get("expected_failures"):
        notes.append(f"{len(decl['expected_failures'])} expected failures")
    return "; ".join(notes)


def library_label(doc: dict[str, Any]) -> str | None:
    """``ggml 0.10.1``, ``gguf 0.19.0``: the judged library and its version, when the run recorded one."""
    lib = (doc.get("subject_info") or {}).get("library")
    if not lib or not lib.get("name"):
        return None
    if lib["name"] == "qformats":
        module = lib.get("role") or ""
        what = "reference" if module == "conformance.reference" else module
        return f"qformats {lib.get('version') or ''} {what}".replace("  ", " ").strip()
    return f"{lib['name']} {lib.get('version') or '(version unknown)'}"


def subject_label(doc: dict[str, Any]) -> str:
    """The column a run belongs to: its library (one column for all of a library's adapters) or, for an
    unrecorded one, its entry point; a subject file's non-default declarations keep its runs apart."""
    base = library_label(doc) or str(doc["subject"])
    note = _declaration_note(doc)
    return f"{base} [{note}]" if note else base


def _level(doc: dict[str, Any]) -> dict[str, Any] | None:
    level = doc.get("level")
    return level if isinstance(level, dict) else None


# -- the model ---------------------------------------------------------------------------------------

@dataclass
class Cell:
    counts: Counter = field(default_factory=Counter)   # by shown status (shown_status)
    runs: list[int] = field(default_factory=list)      # indexes into Matrix.runs
    rejections: int = 0                                # passes that are rejections of non-conforming input

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def failing(self) -> int:
        return sum(self.counts[s] for s in FAILING)

    @property
    def state(self) -> str:
        """``none`` (not run), ``bad`` (a case failed or errored), ``ni`` (NotImplementedError raised, nothing
        failed), ``na`` (nothing applicable), ``ok``."""
        if not self.total:
            return "none"
        if self.failing:
            return "bad"
        if self.counts[NOT_IMPLEMENTED]:
            return "ni"
        if self.counts["not-applicable"] == self.total:
            return "na"
        return "ok"

    @property
    def implemented_nothing(self) -> bool:
        """Not implemented on every case it was given (its passes, if any, only rejections: KC-3.1 counts
        any exception as one)."""
        return bool(self.counts[NOT_IMPLEMENTED]) and self.counts["pass"] == self.rejections and not self.failing


@dataclass(frozen=True)
class Row:
    format: str
    op: str
    feature: str | None = None          # None: the whole format / op group

    @property
    def key(self) -> str:
        return f"{self.format}/{self.op}" + (f"/{self.feature}" if self.feature else "")

    @property
    def label(self) -> str:
        return self.feature or f"{self.format} · {self.op}"


def _format_order(fmt: str) -> tuple:
    return (CORE_FORMATS.index(fmt), "") if fmt in CORE_FORMATS else (len(CORE_FORMATS), fmt)


def case_tags(doc: dict[str, Any], case_id: str) -> list[str]:
    """A case's feature tags, its expectation and its provenance, as row names."""
    info = (doc.get("case_info") or {}).get(case_id) or {}
    tags = list(info.get("features") or [])
    if info.get("expect"):
        tags.append(f"expect:{info['expect']}")
    if info.get("source"):
        tags.append("vectors:" + ("reference-made" if info["source"] == "qformats-reference" else "real tools"))
    return tags


class Matrix:
    def __init__(self, runs: list[dict[str, Any]]):
        self.runs = runs
        self.labels = [subject_label(d) for d in runs]
        self.subjects = list(dict.fromkeys(self.labels))
        groups = sorted({(d["format"], d["op"]) for d in runs},
                        key=lambda g: (_format_order(g[0]), OPS.index(g[1]) if g[1] in OPS else 9, g[1]))
        self.groups = [Row(f, o) for f, o in groups]
        self.features: dict[Row, list[Row]] = {}
        self._cells: dict[tuple[str, str], Cell] = defaultdict(Cell)
        for i, doc in enumerate(runs):
            group = Row(doc["format"], doc["op"])
            tags: set[str] = set()
            for case in doc["cases"]:
                these = case_tags(doc, case["id"])
                tags.update(these)
                status = shown_status(case)
                rejection = status == "pass" and "expect:reject" in these
                for key in [group.key] + [Row(group.format, group.op, t).key for t in these]:
                    cell = self._cells[(key, self.labels[i])]
                    cell.counts[status] += 1
                    cell.rejections += rejection
                    if i not in cell.runs:
                        cell.runs.append(i)
            known = {r.feature for r in self.features.get(group, [])}
            self.features[group] = sorted([*self.features.get(group, []),
                                           *(Row(group.format, group.op, t) for t in tags - known)],
                                          key=lambda r: r.feature or "")

    def cell(self, row: Row, subject: str) -> Cell:
        return self._cells.get((row.key, subject), Cell())

    def run_cases(self, row: Row, subject: str) -> list[tuple[int, dict[str, Any]]]:
        """(run index, case row) of the cases behind one cell, failing ones first."""
        out = []
        for i in self.cell(row, subject).runs:
            for case in self.runs[i]["cases"]:
                if row.feature is None or row.feature in case_tags(self.runs[i], case["id"]):
                    out.append((i, case))
        order = {s: n for n, s in enumerate(("fail", "error", "warning", "expected-failure", NOT_IMPLEMENTED,
                                             "not-applicable", "pass"))}
        return sorted(out, key=lambda ic: order.get(shown_status(ic[1]), 9))

    # -- views ------------------------------------------------------------------------------------
    def single_failures(self) -> list[dict[str, Any]]:
        """Cases run by two subjects or more that fail (or error) in exactly one of them and pass in another:
        what sets that subject apart."""
        seen: dict[tuple[str, str, str], dict[str, tuple[int, dict]]] = defaultdict(dict)
        for i, doc in enumerate(self.runs):
            for case in doc["cases"]:
                seen[(doc["format"], doc["op"], case["id"])][self.labels[i]] = (i, case)
        out = []
        for (fmt, op, case_id), by_subject in seen.items():
            failing = [s for s, (_, c) in by_subject.items() if shown_status(c) in FAILING]
            passing = [s for s, (_, c) in by_subject.items() if c["status"] == "pass"]
            if len(by_subject) >= 2 and len(failing) == 1 and passing:
                run, case = by_subject[failing[0]]
                out.append({"subject": failing[0], "format": fmt, "op": op, "case": case, "run": run,
                            "others": {s: shown_status(c) for s, (_, c) in by_subject.items() if s != failing[0]}})
        return sorted(out, key=lambda r: (self.subjects.index(r["subject"]), _format_order(r["format"]), r["op"],
                                          r["case"]["id"]))

    def expected_failures(self) -> list[dict[str, Any]]:
        """Every declared expected failure: its pattern and reason, and the cases it covered in the run
        (``expected-failure``) or that passed anyway (``warning``: remove the entry)."""
        out = []
        for i, doc in enumerate(self.runs):
            for entry in _declared(doc).get("expected_failures") or []:
                pattern = entry.get("case", "")
                try:
                    matched = [c for c in doc["cases"] if re.fullmatch(pattern, c["id"])]
                except re.error:
                    matched = []
                out.append({"subject": self.labels[i], "run": i, "format": doc["format"], "op": doc["op"],
                            "pattern": pattern, "reason": entry.get("reason", ""),
                            "held": [c for c in matched if c["status"] == "expected-failure"],
                            "passed": [c for c in matched if c["status"] == "warning"]})
            if not _declared(doc).get("expected_failures"):       # older runs: only the case rows say so
                for c in doc["cases"]:
                    if c["status"] == "expected-failure":
                        out.append({"subject": self.labels[i], "run": i, "format": doc["format"], "op": doc["op"],
                                    "pattern": c["id"], "reason": c.get("detail", ""), "held": [c], "passed": []})
        return out

    def levels(self) -> list[dict[str, Any]]:
        """Per run that reports one: the conformance level claimed and reached, the named readings the subject
        follows and the rules it does not enforce."""
        return [{"subject": self.labels[i], "run": i, "format": d["format"], "op": d["op"], **_level(d)}
                for i, d in enumerate(self.runs) if _level(d)]

    def coverage(self, clauses: list[Clause] | None = None) -> dict[str, Any]:
        """Which spec clauses the cases of these runs cite (directly, or as the primary clause of a failure),
        with their results (passed, failing, not applicable, not implemented), and the normative clauses none
        of them exercises in the chapters the runs touch (``chapters``: the spec files of the clauses cited)."""
        clauses = spec_clauses() if clauses is None else clauses
        table: dict[str, dict[str, Any]] = {}
        for doc in self.runs:
            for case in doc["cases"]:
                primary, status = primary_clause(case), shown_status(case)
                for clause in case.get("clauses") or []:
                    row = table.setdefault(clause, {"cases": set(), "runs": set(), "pass": 0, "failing": 0,
                                                    "attributed": 0, "na": 0, "ni": 0})
                    row["cases"].add((doc["format"], case["id"]))
                    row["runs"].add(id(doc))
                    row["pass"] += status == "pass"
                    row["failing"] += status in FAILING
                    row["na"] += status == "not-applicable"
                    row["ni"] += status == NOT_IMPLEMENTED
                    row["attributed"] += status in FAILING and clause == primary
        cited = set(table)
        known = {c.id: c for c in clauses}
        chapters = sorted({known[k].chapter if k in known else CHAPTER_OF_PREFIX.get(k.partition("-")[0], "")
                           for k in cited} - {""})
        exercised = [{"clause": k, "title": known[k].title if k in known else "(not defined in spec/)",
                      "chapter": known[k].chapter if k in known else "", "cases": len(v["cases"]),
                      "runs": len(v["runs"]), "pass": v["pass"], "failing": v["failing"], "na": v["na"],
                      "ni": v["ni"], "attributed": v["attributed"]}
                     for k, v in sorted(table.items(), key=lambda kv: sort_key(kv[0]))]
        scoped = [c for c in clauses if c.chapter in chapters]
        how = {c.id: covering(c.id, cited) for c in scoped}
        return {"exercised": exercised, "spec_available": bool(clauses), "chapters": chapters,
                "unexercised": [c for c in scoped if c.normative and how[c.id] == "none"],
                "by_section": [c for c in scoped if c.normative and how[c.id] == "section"],
                "normative": sum(c.normative for c in scoped),
                "informative_unexercised": [c for c in scoped if not c.normative and how[c.id] == "none"]}


# -- the README's real-library table ----------------------------------------------------------------

def _block_types() -> set[str]:
    """The GGUF block types other than q4_K (which has a format of its own): they share README rows."""
    from qformats.formats.ggml.cases import subject_types

    return {bt.name for bt in subject_types()}


def _outcome_kind(doc: dict[str, Any]) -> str:
    """A run's outcome in words that rows of several types can share: "conforms", "error: NotImplementedError"..."""
    counts = Counter(c["status"] for c in doc["cases"])
    total = len(doc["cases"])
    if counts["error"] == total:
        return "error on every case" + _one_error_kind(doc["cases"])
    info = doc.get("case_info", {})
    conforming = [c for c in doc["cases"] if info.get(c["id"], {}).get("expect", "values") == "values"]
    if conforming and len(conforming) < total and all(c["status"] == "error" for c in conforming):
        # KC-3.1 counts any exception as a rejection, so a subject that raises on every call passes the
        # must-reject cases: it decodes nothing, and its row must not read as a partial pass.
        return "cannot decode this type: error on every conforming case" + _one_error_kind(conforming)
    return "conforms" if not counts["fail"] and not counts["error"] else "does not conform"


def _one_error_kind(cases: list[dict[str, Any]]) -> str:
    kinds = {re.sub(r"^the subject raised: ([A-Za-z_.]+).*$", r"\1", c.get("detail", ""), flags=re.S)[:60]
             for c in cases}
    return f" (`{kinds.pop()}`)" if len(kinds) == 1 else ""


def _identical(doc: dict[str, Any]) -> str:
    passed = [c for c in doc["cases"] if c["status"] == "pass"]
    if passed and len(passed) == len(doc["cases"]) and all("byte-identical" in c.get("detail", "") for c in passed):
        return ", every case byte-identical"
    return ""


def _level_words(doc: dict[str, Any]) -> str:
    level = _level(doc)
    if not level:
        return ""
    words = f"; level reached: {level.get('reached')}" if level.get("reached") else ""
    readings = level.get("readings")
    if readings:
        if isinstance(readings, dict):
            readings = ", ".join(f"{k}: {v}" for k, v in readings.items())
        elif isinstance(readings, list):
            readings = ", ".join(str(r) for r in readings)
        words += f"; reading: {readings}"
    return words


def _result_words(doc: dict[str, Any], *, each: bool = False) -> str:
    """A run's result in a table cell; ``each``: the words stand for several runs with these very counts."""
    counts = Counter(c["status"] for c in doc["cases"])
    total, kind = len(doc["cases"]), _outcome_kind(doc)
    if kind == "conforms":
        extra = "".join(f", {counts[s]} {s}" for s in ("warning", "expected-failure", "not-applicable") if counts[s])
        verdict = "**conforms** on every type" if each else "**conforms**"
        return f"{verdict}: {counts['pass']}/{total}{' each' if each else ''}{extra}{_identical(doc)}{_level_words(doc)}"
    if kind.startswith(("error on every case", "cannot decode this type")):
        rejected = counts["pass"]
        return kind + (f"; its {rejected} passes are rejections of must-reject cases (KC-3.1)" if rejected else "")
    by_clause = Counter(primary_clause(c) for c in doc["cases"] if c["status"] in FAILING)
    where = ", ".join(f"{clause} ×{n}" for clause, n in sorted(by_clause.items(), key=lambda kv: -kv[1]))
    bad = ", ".join(f"{counts[s]} {s}" for s in FAILING if counts[s])
    return f"{counts['pass']}/{total} pass{' each' if each else ''}, {bad} (failing clauses: {where}){_level_words(doc)}"


def _entry_pattern(docs: list[dict[str, Any]]) -> str:
    if len(docs) == 1:
        return docs[0]["subject"]
    entries = {re.sub(re.escape(d["format"]) + r"(?=_)", "<type>", d["subject"]) for d in docs}
    return entries.pop() if len(entries) == 1 else ", ".join(sorted(d["subject"] for d in docs))


def readme_table(runs: list[dict[str, Any]]) -> str:
    """The README's real-library table: one row per library, op and format (GPTQ, AWQ, compressed-tensors,
    q4_K, SpQR); the other GGUF block types share a row per library, op and identical counts. Runs of qformats
    itself are left out."""
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for doc in runs:
        label = library_label(doc)
        if label is None or label.startswith("qformats "):
            continue
        note = _declaration_note(doc)
        core = doc["format"] not in _block_types()
        group = doc["format"] if core else "gguf"
        outcome = "" if core else (_outcome_kind(doc), tuple(sorted(Counter(c["status"] for c in doc["cases"]).items())),
                                   _identical(doc), _level_words(doc))
        by_key[(label, doc["op"], group, note, outcome)].append(doc)

    def order(key: tuple) -> tuple:
        label, op, group, note, outcome = key
        return (label, _format_order(group) if group != "gguf" else (len(CORE_FORMATS), "~"),
                OPS.index(op) if op in OPS else 9, outcome, note)

    lines = ["| library | subject | format | op | result |", "|---|---|---|---|---|"]
    for key in sorted(by_key, key=order):
        label, op, group, note, _ = key
        docs = sorted(by_key[key], key=lambda d: d["format"])
        subject = f"`{_entry_pattern(docs)}`" + (f" ({note})" if note else "")
        if group != "gguf":
            lines.append(f"| {label} | {subject} | `{group}` | {op} | {_result_words(docs[0])} |")
            continue
        names = ", ".join(d["format"] for d in docs)
        types = f"{names} ({len(docs)} types)" if len(docs) > 1 else names
        words = _result_words(docs[0], each=len(docs) > 1)
        lines.append(f"| {label} | {subject} | {types} | {op} | {words} |")
    return "\n".join(lines) + "\n"


BEGIN = "<!-- BEGIN real-library-table: generated by `make matrix` from {source}; do not edit by hand -->"
END = "<!-- END real-library-table -->"


def replace_section(text: str, table: str, source: str) -> str:
    """``text`` with the lines between the real-library-table markers replaced by ``table``."""
    pattern = re.compile(r"<!-- BEGIN real-library-table[^\n]*-->\n.*?<!-- END real-library-table -->", re.S)
    if not pattern.search(text):
        raise fail("argument.invalid", "README", "a file with the real-library-table markers", "no markers")
    return pattern.sub(lambda _: f"{BEGIN.format(source=source)}\n{table}{END}", text, count=1)
