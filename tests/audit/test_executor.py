"""The executor seam on the process pool (spec/audit.md AUDIT-1): schedulers, optional extras, lost workers."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from pathlib import Path

import pytest

from qformats.audit import audit, run_unit
from qformats.audit.table import rows
from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.executor import ATTEMPTS, check_scheduler, map_ordered
from qformats.validate import validate

from .conftest import fixture_units

POISON = "poison-unit"


def _square(x: int) -> int:
    return x * x


def _poison_or_run(work: dict) -> dict:
    """A unit whose worker dies every time it runs it (a segfaulting reader), counted in a file; others run."""
    if work["unit"]["source"].endswith(POISON):
        with open(os.environ["QFORMATS_TEST_POISON_COUNT"], "a") as fh:
            fh.write("run\n")
        os._exit(3)
    return run_unit(work)


@pytest.mark.parametrize("scheduler", ["processes", "local", "tcp://10.0.0.1:8786", "tls://sched.example:8786"])
def test_scheduler_names_are_accepted(scheduler):
    """AUDIT-1.1: processes, local and a Dask scheduler address are schedulers."""
    assert check_scheduler(scheduler) == scheduler


@pytest.mark.parametrize("scheduler", ["threads", "tcp://host", "http://host:8786", ""])
def test_other_scheduler_names_are_argument_invalid(scheduler):
    """AUDIT-1.1: any other --scheduler value is argument.invalid (QF-2.6), the whole error asserted."""
    with pytest.raises(QFormatsError) as err:
        check_scheduler(scheduler)
    assert (err.value.code, err.value.tensor, err.value.constraint) == (
        "argument.invalid", "scheduler", "processes, local or tcp://HOST:PORT")
    assert str(err.value) == (f"'scheduler' must be processes, local or tcp://HOST:PORT (got {scheduler}) "
                              "[argument.invalid, QF-2.6]")


def test_cli_bad_scheduler_is_a_usage_error(capsys):
    """AUDIT-1.1: `validate --scheduler threads` exits 2 with argparse's usage error naming the value."""
    assert main(["validate", fixture_units()[0], "--scheduler", "threads"]) == 2
    assert "argument --scheduler: 'scheduler' must be processes, local or tcp://HOST:PORT (got threads)" in \
        capsys.readouterr().err


def test_results_come_back_in_item_order():
    """The seam's results are taken by item, whatever order the workers finish in (AUDIT-1.3)."""
    assert map_ordered(_square, range(12), scheduler="processes", workers=2) == [x * x for x in range(12)]


def test_missing_cluster_extra_names_it(monkeypatch, sharded):
    """AUDIT-1.2: without dask.distributed, --scheduler local is could-not-run naming qformats[cluster]."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(QFormatsError) as err:
        validate(sharded, deep=True, jobs=2, scheduler="local")
    assert str(err.value) == ("'distributed' must be installed for --scheduler local (pip install "
                              "'qformats[cluster]') (got not installed) [audit.extra.missing, AUDIT-1.2]")


def test_cli_missing_cluster_extra_exits_2(monkeypatch, capsys, sharded):
    """AUDIT-1.2: the CLI says which extra to install, one line on stderr, exit 2, no traceback."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(["validate", sharded, "--deep", "--jobs", "2", "--scheduler", "local"]) == 2
    err = capsys.readouterr().err
    assert err == ("qformats: 'distributed' must be installed for --scheduler local (pip install 'qformats[cluster]') "
                   "(got not installed) [audit.extra.missing, AUDIT-1.2]\n")


def test_missing_audit_extra_names_it(monkeypatch, tmp_path):
    """AUDIT-1.2: without pyarrow, audit is could-not-run naming qformats[audit], before any unit runs."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(QFormatsError) as err:
        audit(fixture_units()[:1], tmp_path / "out")
    assert str(err.value) == ("'pyarrow' must be installed for the audit table (pip install 'qformats[audit]') "
                              "(got not installed) [audit.extra.missing, AUDIT-1.2]")
    assert not (tmp_path / "out").exists()


def test_process_pool_worker_killed_mid_run_gives_the_same_report(sharded, serial_report):
    """AUDIT-1.3: a pool worker SIGKILLed after the first run finishes; the others are run again and the
    report equals --jobs 1's."""
    before = {p.pid for p in multiprocessing.active_children()}
    killed: list[int] = []

    def kill_one_worker(i: int, total: int, name: str) -> None:
        if not killed:
            worker = next(p for p in multiprocessing.active_children() if p.pid not in before)
            os.kill(worker.pid, signal.SIGKILL)
            killed.append(i + 1)

    report = validate(sharded, deep=True, jobs=2, scheduler="processes", progress=kill_one_worker)
    assert killed and killed[0] < 56            # killed with layers left to run
    assert report.model_dump() == serial_report


def test_a_unit_that_always_kills_its_worker_is_lost_after_bounded_runs(monkeypatch, tmp_path):
    """AUDIT-1.3: a unit whose worker dies every time is run alone ATTEMPTS times, then its row says
    audit.worker.lost; the units beside it get their own verdicts, as a serial audit gives them."""
    count = tmp_path / "poison-runs"
    monkeypatch.setenv("QFORMATS_TEST_POISON_COUNT", str(count))
    others = fixture_units()[:4]
    audit([str(tmp_path / POISON), *others], tmp_path / "pool", jobs=2, process=_poison_or_run)
    audit(others, tmp_path / "serial")
    got = {Path(r["unit"]).name: r for r in rows(tmp_path / "pool")}
    poison = got.pop(POISON)
    assert (poison["verdict"], poison["error_code"]) == ("could-not-run", "audit.worker.lost")
    assert count.read_text().count("run") == 1 + ATTEMPTS      # the pool's run, then ATTEMPTS alone
    serial = {Path(r["unit"]).name: r for r in rows(tmp_path / "serial")}
    assert {k: {**r, "seconds": 0} for k, r in got.items()} == {k: {**r, "seconds": 0} for k, r in serial.items()}


def test_inspect_takes_its_scheduler_to_validate(monkeypatch, capsys, sharded):
    """AUDIT-1.1: `inspect --scheduler local` reaches the layer runs validate makes for the table: without the
    extra it is the could-not-run error naming qformats[cluster]."""
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(["inspect", sharded, "--scheduler", "local"]) == 2
    assert capsys.readouterr().err.endswith("[audit.extra.missing, AUDIT-1.2]\n")
