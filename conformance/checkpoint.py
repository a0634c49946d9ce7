"""``qformats conformance checkpoint PATH``: validate, then tell which real readers decode it correctly.

"Correct" is relative to a writer. The same v1 bytes mean different weights under different writers
once a zero point was 0 (spec/gptq.md GPTQ-4.1: AutoGPTQ's OR-bleed, GPTQModel's word borrow, a
masked writer), so the table says whose meaning it judges against: the writer the checkpoint's
config names, or the one a writer signature identifies (GPTQ-8.5); otherwise it gives one verdict
per plausible writer ("if written by GPTQModel: ...; if by AutoGPTQ: ..."). Weights a writer itself
overwrote (AutoGPTQ's bleed) are *unknowable*: no reading can be called right or wrong there.

Every registered format contributes through its ``layers`` module: ``reader_rows(ckpt, groups)``
gives rows ``{"layer", "readers": {reader: {"status", ...}}}`` (optionally ``"writers"``: the writer
keys a row's meaning holds for, ``["any"]`` or absent when it holds for every writer), ``READERS``
names and describes the readers, and the optional ``writer_claim(ckpt, groups)`` says who wrote it.
Statuses: ``correct``, ``wrong`` (``wrong_weights``), ``cannot read`` (``detail``), ``unknowable``
(``unknowable_weights`` when known) and ``not judged`` (``detail``: e.g. the reader is not installed).
Formats without emulated readers get the validator's verdict for the spec reader only.
"""

from __future__ import annotations

from typing import Any

from qformats.containers.checkpoint import open_checkpoint
from qformats.formats import registry
from qformats.validate import group_layers, validate
from qformats.report import not_checked, scope

__all__ = ["check_checkpoint", "to_text", "STATUSES"]

STATUSES = ("correct", "wrong", "cannot read", "unknowable", "not judged")
ANY = "any"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _rows(path: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any] | None, str]:
    """Rows of every format that emulates real readers, their readers (name -> reader object, which has a
    ``description`` and optionally ``enable``: the command that makes it judgeable), the writer claim and
    the unit."""
    rows: list[dict[str, Any]] = []
    readers: dict[str, Any] = {}
    claim = None
    unit = "layer"
    with open_checkpoint(path) as ckpt:
        groups = group_layers(ckpt.tensor_names(), ckpt.config)[0] if ckpt.kind != "gguf" else []
        for face in registry.FACES.values():
            hook = getattr(face.layers, "reader_rows", None)
            if hook is None:
                continue
            mine = [g for g in groups if g.format == face.name]
            more = hook(ckpt, mine)
            if not more:
                continue
            rows += more
            readers |= dict(face.layers.READERS)
            if ckpt.kind == "gguf":
                unit = "tensor"
            claimer = getattr(face.layers, "writer_claim", None)
            if claimer is not None and claim is None:
                claim = claimer(ckpt, mine)
    return rows, readers, claim, unit


def _summary(rows: list[dict[str, Any]], name: str, description: str, enable: str | None = None) -> dict[str, Any]:
    """One reader over the rows of one writer's meaning."""
    per = [(r["layer"], r["readers"].get(name, {"status": "not judged", "detail": "no row for this reader"}))
           for r in rows]
    by = {s: [(layer, v) for layer, v in per if v.get("status") == s] for s in STATUSES}
    odd = [(layer, v) for layer, v in per if v.get("status") not in STATUSES]
    by["not judged"] += [(layer, {"status": "not judged", "detail": f"unknown status {v.get('status')!r}"})
                         for layer, v in odd]
    wrong = sorted(((layer, int(v.get("wrong_weights") or 0)) for layer, v in by["wrong"]), key=lambda x: -x[1])
    verdict = next((s for s in ("wrong", "cannot read", "unknowable", "not judged") if by[s]), "correct")
    lost = sum(int(v.get("unknowable_weights") or 0) for _, v in per)
    return {"description": description, "verdict": verdict, "enable": enable,
            "layers_correct": len(by["correct"]), "layers_wrong": len(by["wrong"]),
            "layers_unreadable": len(by["cannot read"]), "layers_unknowable": len(by["unknowable"]),
            "layers_not_judged": len(by["not judged"]),
            "wrong_weights": sum(n for _, n in wrong), "unknowable_weights": lost,
            "worst": [{"layer": layer, "wrong_weights": n} for layer, n in wrong[:3]],
            "unreadable_because": by["cannot read"][0][1].get("detail") if by["cannot read"] else None,
            "not_judged_because": by["not judged"][0][1].get("detail") if by["not judged"] else None,
            "judged_at": sorted({v["judged_at"] for _, v in by["correct"] + by["wrong"]
                                 if v.get("judged_at") not in (None, "float32")})}


def _writers_of(rows: list[dict[str, Any]], claim: dict[str, Any] | None) -> list[str]:
    """The writer meanings the table needs: those the rows distinguish, in the claim's order."""
    named = [w for r in rows for w in r.get("writers") or [ANY] if w != ANY]
    if not named:
        return [ANY]
    order = list((claim or {}).get("plausible") or []) + named
    distinct = list(dict.fromkeys(w for w in order if w in named))
    if len(distinct) == 1:
        return distinct
    # writers whose rows are all shared with every other writer add nothing: one verdict for all
    split = any(len(set(r.get("writers") or [ANY]) & set(distinct)) not in (0, len(distinct))
                for r in rows if (r.get("writers") or [ANY]) != [ANY])
    return distinct if split else [ANY]


def _verdicts(rows: list[dict[str, Any]], readers: dict[str, Any], claim: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    names = (claim or {}).get("names") or {}
    for writer in _writers_of(rows, claim):
        mine = [r for r in rows if writer == ANY or writer in (r.get("writers") or [ANY])
                or ANY in (r.get("writers") or [ANY])]
        out.append({"writer": writer, "writer_description": names.get(writer),
                    "readers": {name: _summary(mine, name, *_described(r)) for name, r in readers.items()}})
    return out


def _described(reader: Any) -> tuple[str, str | None]:
    """(description, enable command) of a format's reader object, or of a bare description string."""
    if isinstance(reader, str):
        return reader, None
    return reader.description, getattr(reader, "enable", None)


def check_checkpoint(path: str) -> dict[str, Any]:
    """The validator's verdict and the per-reader compatibility table, relative to the writer (JSON-ready).

    ``writer``: who wrote it as far as the files say (``known``, ``writer``, ``basis``, ``detail``,
    ``plausible``). ``verdicts``: one entry per writer meaning the table depends on, each with the
    per-reader summaries; ``readers`` is the only entry's summaries when there is one, else ``{}``.
    ``judged``: the readers judged on at least one row; ``no_reader_judged``: why none was (None when
    one was); ``enable``: reader -> the command that makes it judgeable, for each reader not judged.
    """
    report = validate(path)
    rows, readers, claim, unit = _rows(path) if report.layers else ([], {}, None, "layer")
    verdicts = _verdicts(rows, readers, claim) if rows else []
    table = {"path": str(path), "verdict": report.verdict, "format": report.format,
             "errors": report.summary["errors"], "warnings": report.summary["warnings"],
             "modules_not_checked": report.summary.get("modules_not_checked", 0),
             "tensors": report.summary["tensors"], "tensors_checked": report.summary["tensors_checked"],
             "scope": scope(report.summary, names="validate -v names them"),
             "finding_codes": sorted({f.code for f in report.findings}),
             "unit": unit, "writer": claim, "verdicts": verdicts,
             "readers": verdicts[0]["readers"] if len(verdicts) == 1 else {}, "layers": rows}
    return table | _judged(table, bool(report.layers))


def _judged(table: dict[str, Any], layers: bool) -> dict[str, Any]:
    """Which readers were judged, why none was (a verdict with no reader judged must say so: GGML-5.5), and
    the command that enables each reader not judged."""
    judged = sorted({name for row in table["layers"] for name, v in row["readers"].items()
                     if v.get("status") != "not judged"})
    summaries = {name: s for v in table["verdicts"] for name, s in v["readers"].items()}
    enable = {name: s["enable"] for name, s in summaries.items() if name not in judged and s.get("enable")}
    why = None
    if not layers:
        why = "the validator found no layer it could read"
    elif not table["verdicts"]:
        why = f"qformats emulates no real reader of {table['format']} checkpoints"
    elif not judged:
        reasons = {s["not_judged_because"] for s in summaries.values()}
        why = reasons.pop() if len(reasons) == 1 else ("no reader is installed or configured here" if enable
                                                       else "each reader's reason is below")
    return {"judged": judged, "no_reader_judged": why, "enable": enable}


def _reader_line(row: dict[str, Any], unit: str, enable: bool = True) -> str:
    verdict, total = row["verdict"], sum(row[k] for k in ("layers_correct", "layers_wrong", "layers_unreadable",
                                                          "layers_unknowable", "layers_not_judged"))
    # a path whose weights are 16-bit floats is held to the reference rounded once to them (judge_readers)
    at = f" (judged at {' and '.join(row['judged_at'])}, its weight precision)" if row.get("judged_at") else ""
    if verdict == "correct":
        return (f"correct in all {_plural(row['layers_correct'], unit)}" if total > 1 else "correct") + at
    if verdict == "wrong":
        worst = row["worst"][0]
        what = (f"wrong in {_plural(row['wrong_weights'], 'weight')} of {_plural(row['layers_wrong'], unit)} "
                f"(worst {worst['wrong_weights']:,} in {worst['layer']})")
    elif verdict == "cannot read":
        what = f"cannot read it ({row['unreadable_because']})"
    elif verdict == "unknowable":
        what = f"unknowable in {_plural(row['layers_unknowable'], unit)}"
    else:
        what = f"not judged ({row['not_judged_because']})"
        if enable and row.get("enable"):     # unless the headline already said it
            what += f"; to judge it: {row['enable']}"
    extras = []
    if verdict != "correct" and row["layers_correct"]:
        extras.append(f"correct in {_plural(row['layers_correct'], unit)}")
    if verdict != "unknowable" and row["layers_unknowable"]:
        extras.append(f"unknowable in {_plural(row['layers_unknowable'], unit)}")
    if verdict != "not judged" and row["layers_not_judged"]:
        extras.append(f"not judged in {_plural(row['layers_not_judged'], unit)}")
    if row["unknowable_weights"]:
        extras.append(f"{_plural(row['unknowable_weights'], 'weight')} overwritten by the writer")
    return what + "".join(f"; {e}" for e in extras) + (at if row["layers_correct"] or row["layers_wrong"] else "")


def _writer_lines(table: dict[str, Any]) -> list[str]:
    claim = table.get("writer")
    if not claim:       # a format whose bytes have one meaning whoever wrote them may say against what
        against = {r.get("judged_against") for r in table["layers"]}
        return [f"judged against {against.pop()}"] if len(against) == 1 and None not in against else []
    names = claim.get("names") or {}
    if claim["known"]:
        return [f"judged against the writer {names.get(claim['writer'], claim['writer'])}, "
                f"named by {claim['basis']}: {claim['detail']}"]
    plausible = ", ".join(claim.get("plausible") or []) or "none"
    if [v["writer"] for v in table["verdicts"]] == [ANY] and all(
            (r.get("writers") or [ANY]) == [ANY] for r in table["layers"]):
        return [f"writer unknown ({claim['detail']}); not needed: the zeros carry no v1 zero point 0, so "
                "every writer means the same weights"]
    if len(table["verdicts"]) == 1:
        return [f"writer unknown ({claim['detail']}); every plausible writer ({plausible}) meant the same "
                "weights, so one verdict holds for all"]
    return [f"writer unknown ({claim['detail']}); the plausible writers ({plausible}) meant different weights, "
            "so each reader is judged against each"]


def _headline(table: dict[str, Any]) -> list[str]:
    """The verdict line; where no reader was judged it says so ("VALID; no reader judged"), why, and the
    command that enables each reader (the exit status stays the validity verdict's: GGML-5.5)."""
    none = "; no reader judged" if table.get("no_reader_judged") else ""
    scope = f"{table['scope']}, " if table.get("scope") else ""       # CKPT-5.1: what validate checked
    lines = [f"{table['path']}: {table['verdict'].upper()}{none} ({table['format']}, {scope}"
             f"{_plural(table['errors'], 'error')}, {_plural(table['warnings'], 'warning')}{not_checked(table)}; "
             "qformats validate for the findings)"]
    if none:
        lines.append(f"no reader could be judged ({table['no_reader_judged']}): the verdict is the validator's alone")
        width = max((len(name) for name in table["enable"]), default=0)
        lines += [f"  to judge {name:{width}s}  {command}" for name, command in table["enable"].items()]
    return lines


def to_text(table: dict[str, Any]) -> str:
    unit = table.get("unit", "layer")
    lines = _headline(table)
    if not table["verdicts"]:
        return "\n".join(lines) + "\n"
    lines += _writer_lines(table)
    count = len({r["layer"] for r in table["layers"]})
    for verdict in table["verdicts"]:
        names = (table.get("writer") or {}).get("names") or {}
        head = (f"if written by {names.get(verdict['writer'], verdict['writer'])}: " if len(table["verdicts"]) > 1
                else "")
        told = ", told what the config says," if unit == "layer" else ""
        lines.append(f"{head}real readers{told} on {_plural(count, unit)}:")
        enable = not table.get("no_reader_judged")      # else the headline gave each command
        said = {name: _reader_line(row, unit, enable) for name, row in verdict["readers"].items()}
        if len(said) > 1 and len(set(said.values())) == 1 and verdict["readers"][next(iter(said))]["verdict"] \
                in ("not judged", "cannot read"):
            lines.append(f"  every reader: {next(iter(said.values()))}")    # one reason, said once
            continue
        width = max(len(name) for name in said)
        lines += [f"  {name:{width}s}  {line}" for name, line in said.items()]
    return "\n".join(lines) + "\n"
