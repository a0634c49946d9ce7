"""``qformats audit``: validate many checkpoints, one Parquet part file per unit, resumable (spec/audit.md).

    audit(["ckpt_a", "b.gguf"], "out/", resume=True, scheduler="local", jobs=4, deep=True)

Units are run through the executor seam (:mod:`qformats.executor`): in this process with ``jobs=1`` on
the default scheduler, else on the process pool or a Dask cluster. Each result is written as it
arrives, so an interrupted audit keeps what it finished and ``resume`` runs only the rest (AUDIT-3.2).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import executor
from ..errors import QFormatsError, fail
from . import table, units as units_mod
from .progress import Reporter
from .units import Unit

__all__ = ["audit", "run_unit", "row_from_report"]

Process = Callable[[dict[str, Any]], dict[str, Any]]


def run_unit(work: dict[str, Any]) -> dict[str, Any]:
    """Worker: validate one unit and return its table row (plain data). A unit that cannot run is a row."""
    from ..validate import validate

    unit, options = Unit(**work["unit"]), work["options"]
    began = time.perf_counter()
    row = empty_row(work)
    try:
        report = validate(unit.pinned or unit.source, deep=options["deep"], fmt=options["format"],
                          sample=options["sample"], jobs=1)
    except QFormatsError as err:
        row.update(error_code=err.code, error=str(err))
    except Exception as exc:  # noqa: BLE001 -- the CLI's contract for one unit: a row saying so, not a traceback
        row.update(error=f"internal error: {type(exc).__name__}: {exc}")
    else:
        row.update(row_from_report(report.model_dump()))
    if row["bytes"] is None:                 # the size of a unit that could not run, or was not listed
        row["bytes"] = 0
    row["seconds"] = time.perf_counter() - began
    return row


def empty_row(work: dict[str, Any]) -> dict[str, Any]:
    """A could-not-run row: the key fields and the unit's size, nothing judged."""
    row = dict.fromkeys(name for name, _, _ in table.COLUMNS)
    row.update(work["key"], unit=work["unit"]["source"], bytes=work["unit"]["bytes"], verdict="could-not-run",
               finding_codes=[], seconds=0.0)
    return row


def row_from_report(report: dict[str, Any]) -> dict[str, Any]:
    """The table's columns from a validate report (its JSON document, spec/schemas/report.json)."""
    s = report["summary"]
    remote = s.get("remote") or {}           # a remote checkpoint's traffic (spec/remote.md): what was fetched
    return {"verdict": report["verdict"], "format": report["format"], "container": s.get("container"),
            "errors": s["errors"], "warnings": s["warnings"], "info": s["info"],
            "finding_codes": sorted({f["code"] for f in report["findings"]}), "layers": s["layers"],
            "tensors": s.get("tensors"), "tensors_checked": s.get("tensors_checked"),
            "tensors_unchecked": len(s.get("not_checked", [])), "bytes_read": remote.get("bytes_fetched"),
            **({"bytes": remote["bytes_listed"]} if remote.get("bytes_listed") is not None else {})}


def audit(args: list[str], out: str | Path, *, resume: bool = False, scheduler: str | None = None, jobs: int = 1,
          deep: bool = False, fmt: str = "auto", sample: int | None = None, reporter: Reporter | None = None,
          on_row: Callable[[dict[str, Any]], None] | None = None, process: Process = run_unit) -> dict[str, Any]:
    """Audit the units named by ``args`` into ``out``; returns counts: units, run now, skipped (already in the
    table), and ``by_verdict`` over all the units named, from the table.

    ``on_row`` is called after each part file is written (the CLI's exit code, tests' interruptions);
    ``process`` runs one unit (a module-level function: it travels to the workers by name).
    """
    from ..validate import FORMATS

    if fmt not in FORMATS:
        raise fail("argument.invalid", "format", "one of " + ", ".join(FORMATS), fmt)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise fail("argument.invalid", "jobs", "an integer of at least 1", jobs)
    scheduler = executor.check_scheduler(scheduler)
    table.schema()                                   # qformats[audit] before any work (AUDIT-1.2)
    out = _out_dir(Path(out), resume)
    options = {"deep": bool(deep), "format": fmt, "sample": sample}     # sample: remote units (spec/remote.md)
    works = [_work(unit, options) for unit in units_mod.unique([units_mod.resolve(a) for a in args], options)]
    todo = [w for w in works if not (resume and table.part_path(out, w["key"]["key"]).exists())]
    reporter = reporter or Reporter()
    sizes = [w["unit"]["bytes"] for w in todo]
    verdicts = _skipped_verdicts(out, works, todo)
    reporter.start(len(todo), None if None in sizes else sum(sizes), len(works) - len(todo))
    try:
        for i, row in _results(process, todo, scheduler, jobs):
            if executor.is_lost(row):                # AUDIT-1.3: the unit's row says its worker was lost
                row = {**empty_row(todo[i]), "error_code": row.code, "error": str(row)}
            table.write_part(out, row)
            verdicts[row["verdict"]] += 1
            reporter.unit(row)
            if on_row is not None:
                on_row(row)
    finally:
        reporter.close()
    return {"units": len(works), "run": len(todo), "skipped": len(works) - len(todo), "out": str(out),
            "by_verdict": {v: verdicts.get(v, 0) for v in ("valid", "invalid", "could-not-run")}}


def _skipped_verdicts(out: Path, works: list[dict[str, Any]], todo: list[dict[str, Any]]) -> Counter:
    """The verdicts of the units already in the table (read and checked once, before the run: AUDIT-3.3); the
    units run now add theirs as they are written, so an audit never reads back the table it is writing."""
    run_now = {w["key"]["key"] for w in todo}
    files = [table.part_path(out, w["key"]["key"]) for w in works if w["key"]["key"] not in run_now]
    rows = [part.to_pylist()[0] for part in table.read_parts([f for f in files if f.is_file()])]
    return Counter(row["verdict"] for row in rows)


def _work(unit: Unit, options: dict[str, Any]) -> dict[str, Any]:
    return {"unit": unit.plain(), "options": options, "key": units_mod.key_of(unit, options)}


def _out_dir(out: Path, resume: bool) -> Path:
    """AUDIT-3.1: a new or empty directory, or (``resume``) one holding an audit's part files."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail("argument.invalid", "out", "a directory, or a path where one can be made",
                   f"{type(exc).__name__}: {exc}", file=str(out)) from None
    if table.parts(out) and not resume:
        raise fail("audit.out.exists", "out", "a directory without part files, or --resume to continue its audit",
                   f"{len(table.parts(out))} part files", file=str(out))
    table.clear_temporaries(out)
    return out


def _results(process: Process, todo: list[dict[str, Any]], scheduler: str, jobs: int) -> Iterator[tuple[int, Any]]:
    """(i, row) as units finish: in this process for one job on the default scheduler, else through the seam."""
    if scheduler == "processes" and jobs == 1:
        for i, work in enumerate(todo):
            yield i, process(work)
        return
    if todo:
        yield from executor.completed(process, todo, scheduler=scheduler, workers=jobs, keep_lost=True)
