"""Tests with teeth for qformats/audit/run.py, the `qformats audit` orchestrator (spec/audit.md AUDIT-1..3; issue 33):
the whole refusals of its arguments, each column of a row against validate's own report, the options that reach
validate, the lost worker's row and what the reporter and ``on_row`` are given. Each test calls the module itself on
one to three small units (mutmut switches a mutant on only for calls made while a test runs)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats import executor
from qformats.audit import audit, run_unit
from qformats.audit.progress import Reporter
from qformats.audit.table import parts, rows
from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.validate import validate

from whole_error import refusal, whole, whole_in_file

from .conftest import FIXTURES

CKPTS = FIXTURES / "checkpoints"
SPQR, AWQ, GPTQ, GGUF = (str(CKPTS / n) for n in ("spqr_csr", "awq_gemm", "gptq_v1_sym_4bit", "q4_k_m.gguf"))
MISSING = "/nonexistent/qformats-audit-unit"
POISON = "poison-unit"


def _size(path: str) -> int:
    """A unit's bytes by hand: a file's size, or the sizes of a directory's own files (AUDIT-2.1, CKPT-2)."""
    p = Path(path)
    return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def _only_row(out: Path) -> dict:
    [row] = rows(out)
    return row


def _row(unit: str, tmp_path: Path, **options) -> dict:
    """The one row of an audit of ``unit`` with ``options``, read back from its part file."""
    audit([unit], tmp_path / "out", **options)
    return _only_row(tmp_path / "out")


def _poison_or_run(work: dict) -> dict:
    """A unit whose worker dies every time it runs it (a segfaulting reader); other units run."""
    if work["unit"]["source"].endswith(POISON):
        os._exit(3)
    return run_unit(work)


class Recording(Reporter):
    """A reporter that keeps what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def start(self, total: int, total_bytes: int | None, skipped: int) -> None:
        self.calls.append(("start", total, total_bytes, skipped))


@pytest.fixture
def nan_norm(tmp_path) -> str:
    """awq_gemm plus an unquantized F16 ``model.norm.weight`` holding a NaN: a finding only --deep reads (CKPT-5.2)."""
    ckpt = tmp_path / "nan_norm"
    shutil.copytree(AWQ, ckpt)
    tensors = load_file(ckpt / "model.safetensors")
    save_file({**tensors, "model.norm.weight": np.array([np.nan, 1, 2, 3], np.float16)}, ckpt / "model.safetensors")
    return str(ckpt)


# -- QF-2.6: the audit's arguments, refused whole before any work --------------------------------------------

def test_an_unknown_format_is_refused_as_validate_refuses_it(tmp_path):
    """QF-2.6 "MUST reject values outside their documented domain with a coded error": --format takes validate's
    formats, so an audit refuses a format validate does not know with validate's own refusal, before out is made."""
    theirs = whole(lambda: validate(AWQ, fmt="gptq4"))
    assert whole(lambda: audit([AWQ], tmp_path / "out", fmt="gptq4")) == theirs
    assert theirs[:2] == ("argument.invalid", "format") and not (tmp_path / "out").exists()


@pytest.mark.parametrize("jobs", [0, True, 2.5, "2"])
def test_jobs_that_are_not_a_positive_integer_are_refused(tmp_path, jobs):
    """QF-2.6: --jobs is an integer of at least 1: 0 (one under the limit), a bool, a float and a string are refused."""
    assert whole(lambda: audit([AWQ], tmp_path / "out", jobs=jobs)) == refusal(
        "argument.invalid", "jobs", "an integer of at least 1", jobs)
    assert not (tmp_path / "out").exists()


def test_one_job_is_accepted(tmp_path):
    """QF-2.6: --jobs 1, the limit itself, runs the audit."""
    done = audit([AWQ], tmp_path / "out", jobs=1)
    assert (done["units"], done["run"], done["by_verdict"]["valid"]) == (1, 1, 1)


def test_an_unknown_scheduler_is_refused(tmp_path):
    """AUDIT-1.1: "Another value is argument.invalid (QF-2.6)", for audit as for validate."""
    assert whole(lambda: audit([AWQ], tmp_path / "out", scheduler="threads")) == refusal(
        "argument.invalid", "scheduler", "processes, local or tcp://HOST:PORT", "threads")


def test_an_out_dir_below_a_regular_file_is_refused_with_the_os_error(tmp_path):
    """AUDIT-3.1 / QF-2.6: --out must be a directory or a path where one can be made; below a regular file it
    cannot, and the refusal carries the operating system's own error for making it."""
    (tmp_path / "file").write_bytes(b"x")
    out = tmp_path / "file" / "out"
    with pytest.raises(OSError) as theirs:
        os.mkdir(out)
    actual = f"{type(theirs.value).__name__}: {theirs.value}"
    with pytest.raises(QFormatsError) as err:
        audit([AWQ], out)
    assert whole_in_file(err.value) + (err.value.file,) == (
        "argument.invalid", "out", "a directory, or a path where one can be made", actual, "out", str(out))
    assert str(err.value) == (f"{out}: 'out' must be a directory, or a path where one can be made (got {actual}) "
                              "[argument.invalid, QF-2.6]")


def test_an_out_dir_whose_parents_do_not_exist_is_made(tmp_path):
    """AUDIT-3.1: --out "a new or empty directory": one whose parent directories do not exist yet is made with them."""
    out = tmp_path / "a" / "b" / "out"
    audit([AWQ], out)
    assert len(parts(out)) == 1


# -- AUDIT-3.1: a row's columns ------------------------------------------------------------------------------

def test_a_row_is_the_validate_report_of_its_unit(tmp_path, capsys):
    """AUDIT-3.1: the row holds "the verdict (...), the format, the count of findings of each severity, the codes
    found, tensors checked and not checked, the unit's bytes"; each column against `qformats validate --json`."""
    assert main(["validate", SPQR, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    s = report["summary"]
    row = _row(SPQR, tmp_path)
    assert {k: v for k, v in row.items() if k not in ("key", "repo", "revision", "file", "qformats_version",
                                                          "options", "seconds")} == {
        "unit": SPQR, "verdict": report["verdict"], "format": report["format"], "container": s["container"],
        "errors": s["errors"], "warnings": s["warnings"], "info": s["info"],
        "finding_codes": sorted({f["code"] for f in report["findings"]}), "layers": s["layers"],
        "tensors": s["tensors"], "tensors_checked": s["tensors_checked"], "tensors_unchecked": len(s["not_checked"]),
        "bytes": _size(SPQR), "bytes_read": None, "error_code": None, "error": None}
    assert (s["container"], s["info"], s["layers"]) == ("safetensors", 2, 2)     # the columns are not empty


def test_a_row_s_seconds_are_the_unit_s_wall_time(tmp_path):
    """AUDIT-3.1: the row holds "the seconds taken": more than 0, no more than the wall time around the run."""
    work = _work_of(AWQ, tmp_path)
    began = time.perf_counter()
    row = run_unit(work)
    wall = time.perf_counter() - began
    assert 0 < row["seconds"] <= wall


def _work_of(unit: str, tmp_path: Path, **options) -> dict:
    """The work item the audit hands its process function for ``unit`` (caught from an audit of it)."""
    seen: list[dict] = []

    def keep(work: dict) -> dict:
        seen.append(work)
        return run_unit(work)

    audit([unit], tmp_path / "caught", process=keep, **options)
    return seen[0]


def test_a_unit_whose_validate_breaks_is_an_internal_error_row(tmp_path, monkeypatch):
    """AUDIT-3.1: "A unit that could not run is a row, not the end of the audit": an exception that is not a
    QFormatsError (a bug in a check) is a could-not-run row saying internal error, its type and its text."""
    work = _work_of(AWQ, tmp_path)

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a check divided by zero")

    monkeypatch.setattr("qformats.validate.validate", broken)
    row = run_unit(work)
    assert (row["verdict"], row["error_code"], row["error"], row["bytes"]) == (
        "could-not-run", None, "internal error: ZeroDivisionError: a check divided by zero", _size(AWQ))


def test_a_lost_unit_is_a_row_saying_so(tmp_path):
    """AUDIT-1.3: "An item whose worker is lost a third time is could-not-run (...; audit: that unit's row)": the
    row holds the error's code and text, the unit's bytes, and no time (it never finished)."""
    poison = tmp_path / POISON
    poison.write_bytes(b"seven b")
    audit([str(poison)], tmp_path / "out", jobs=2, process=_poison_or_run)
    row = _only_row(tmp_path / "out")
    assert (row["verdict"], row["error_code"], row["error"], row["bytes"], row["seconds"], row["finding_codes"]) == (
        "could-not-run", "audit.worker.lost", "value must be finished within 3 runs (got the worker running item 0 "
        "was lost each time) [audit.worker.lost, AUDIT-1.3]", 7, 0.0, [])


# -- AUDIT-2.1: the options reach validate and the key -------------------------------------------------------

def test_deep_reaches_validate(tmp_path, nan_norm):
    """CKPT-5.2 through an audit: "With --deep, every element of an unquantized tensor (...) MUST be finite"; the
    NaN in the norm is found with deep (and named unchecked without it: see the next test)."""
    row = _row(nan_norm, tmp_path, deep=True)
    assert (row["verdict"], row["finding_codes"], row["tensors_unchecked"]) == ("invalid", ["ckpt.float.nonfinite"], 0)


def test_without_deep_the_float_tensor_is_unchecked(tmp_path, nan_norm):
    """CKPT-5.1 through an audit: without --deep the F16 tensor's values are not read: valid, one tensor unchecked."""
    row = _row(nan_norm, tmp_path)
    assert (row["verdict"], row["finding_codes"], row["tensors_unchecked"]) == ("valid", [], 1)


def test_format_reaches_validate(tmp_path):
    """AUDIT-2.1: the options are validate's; --format q4_k checks only the q4_k tensors of a Q4_K_M file."""
    expect = validate(GGUF, fmt="q4_k").summary
    row = _row(GGUF, tmp_path, fmt="q4_k")
    assert (row["format"], row["tensors_checked"]) == ("q4_k", expect["tensors_checked"])
    assert expect["tensors_checked"] < expect["tensors"]


def test_sample_reaches_validate(tmp_path):
    """AUDIT-2.1 / REMOTE-4.1: --sample 1 checks one quantized layer of the two, the other named unchecked."""
    expect = validate(GPTQ, sample=1).summary
    row = _row(GPTQ, tmp_path, sample=1)
    assert (row["layers"], row["tensors_checked"], row["tensors_unchecked"]) == (
        expect["layers"], expect["tensors_checked"], len(expect["not_checked"]))
    assert expect["layers"] == 1 and len(expect["not_checked"]) > 0


def test_a_unit_validates_in_the_process_that_runs_it(tmp_path, monkeypatch):
    """AUDIT-1: the audit's --jobs are units on the seam; each unit's --deep layer runs stay in the process running
    the unit (validate with one job), so no seam is opened inside a unit, whatever the CPU count."""
    work = _work_of(GPTQ, tmp_path, deep=True)
    opened: list = []

    def pool(*args, **kwargs):
        opened.append(args)
        raise RuntimeError("a seam was opened inside a unit")

    monkeypatch.setattr("qformats.validate._cpus", lambda: 4)        # as on a machine of 4 CPUs
    monkeypatch.setattr(executor, "pool", pool)
    row = run_unit(work)
    assert (row["verdict"], row["layers"], opened) == ("valid", 2, [])


def test_the_options_are_the_row_s_canonical_json(tmp_path):
    """AUDIT-2.1: options "are the validation options as canonical JSON"; a true deep is true, written by hand."""
    row = _row(GPTQ, tmp_path, deep=1, fmt="gptq", sample=2)
    assert row["options"] == '{"deep":true,"format":"gptq","sample":2}'


def test_other_options_are_another_unit(tmp_path):
    """AUDIT-2.1: each unit is keyed by (..., options): the same checkpoint with --deep is not skipped by --resume
    after an audit without it."""
    audit([AWQ], tmp_path / "out")
    done = audit([AWQ], tmp_path / "out", resume=True, deep=True)
    assert (done["run"], done["skipped"], len(parts(tmp_path / "out"))) == (1, 0, 2)


# -- the seam, the reporter and on_row -----------------------------------------------------------------------

def test_local_scheduler_reaches_the_seam(tmp_path, monkeypatch):
    """AUDIT-1.1 / AUDIT-1.2: `audit --scheduler local` runs its units on the Dask seam: without dask.distributed
    that is the could-not-run error naming qformats[cluster]."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(QFormatsError) as err:
        audit([AWQ], tmp_path / "out", scheduler="local")
    assert str(err.value) == ("'distributed' must be installed for --scheduler local (pip install 'qformats[cluster]') "
                              "(got not installed) [audit.extra.missing, AUDIT-1.2]")


def test_jobs_are_the_seam_s_workers(tmp_path, monkeypatch):
    """AUDIT-1: the units of an audit go through the seam with --jobs workers on the asked scheduler."""
    calls: list[dict] = []
    real = executor.completed

    def recorder(fn, items, **kw):
        calls.append(kw)
        return real(fn, items, **kw)

    monkeypatch.setattr(executor, "completed", recorder)
    done = audit([AWQ, GPTQ], tmp_path / "out", jobs=2, scheduler="processes")
    assert calls == [{"scheduler": "processes", "workers": 2, "keep_lost": True}] and done["run"] == 2


def test_the_reporter_starts_with_units_bytes_and_skipped(tmp_path):
    """AUDIT-3.2: a resumed audit's progress counts the units to run, their bytes, and the units skipped."""
    audit([AWQ], tmp_path / "out")
    reporter = Recording()
    audit([AWQ, GPTQ, SPQR], tmp_path / "out", resume=True, reporter=reporter)
    assert reporter.calls == [("start", 2, _size(GPTQ) + _size(SPQR), 1)]


def test_on_row_gets_each_row_as_written(tmp_path):
    """AUDIT-3.1: on_row is called after each part file is written, with that file's row."""
    seen: list[dict] = []
    audit([AWQ, MISSING], tmp_path / "out", on_row=seen.append)
    assert sorted(seen, key=lambda r: r["unit"]) == sorted(rows(tmp_path / "out"), key=lambda r: r["unit"])
