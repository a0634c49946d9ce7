"""The executor seam on dask.distributed (spec/audit.md AUDIT-1): one module-scoped 2-worker LocalCluster
(processes=True, threads_per_worker=1); a worker killed mid-run changes nothing in the report."""

from __future__ import annotations

import json
import logging
import os
import signal

import pytest

from qformats import executor
from qformats.audit import audit
from qformats.audit.table import rows
from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.validate import validate

from .conftest import fixture_units

distributed = pytest.importorskip("distributed", reason="the extra qformats[cluster] (make test installs it)")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        yield cluster, client


def _suspicious(client) -> int:
    """Tasks of validate's layer runs the scheduler had to reschedule because their worker died."""
    prefixes = client.run_on_scheduler(lambda dask_scheduler: {k: v.suspicious for k, v in
                                                               dask_scheduler.task_prefixes.items()})
    return prefixes.get("run_subset", 0)


def test_worker_killed_mid_run_gives_the_report_of_jobs_1_and_the_pool(cluster, sharded, serial_report):
    """AUDIT-1.3: validate --deep on the cluster, one worker SIGKILLed while it holds layer runs after the first
    run finished: the runs are rescheduled and the report equals --jobs 1's and the process pool's."""
    local, client = cluster
    client.wait_for_workers(2, timeout=60)
    before = _suspicious(client)
    killed: list[str] = []

    def kill_a_busy_worker(i: int, total: int, name: str) -> None:
        if not killed:
            busy = next(w for w, keys in client.processing().items() if keys)
            os.kill(client.run(os.getpid, workers=[busy])[busy], signal.SIGKILL)
            killed.append(busy)

    report = validate(sharded, deep=True, jobs=2, scheduler=local.scheduler_address, progress=kill_a_busy_worker)
    assert killed and _suspicious(client) > before          # runs were lost with the worker, and run again
    assert report.model_dump() == serial_report
    assert validate(sharded, deep=True, jobs=2, scheduler="processes").model_dump() == serial_report


def test_audit_on_the_cluster_gives_the_table_of_a_serial_audit(cluster, tmp_path):
    """AUDIT-3.1: the same units audited on Dask workers and in this process give the same rows (but seconds)."""
    local, client = cluster
    client.wait_for_workers(2, timeout=60)
    units = fixture_units()[:6]
    audit(units, tmp_path / "dask", scheduler=local.scheduler_address, deep=True)
    audit(units, tmp_path / "serial", deep=True)
    assert [{**r, "seconds": 0} for r in rows(tmp_path / "dask")] == \
        [{**r, "seconds": 0} for r in rows(tmp_path / "serial")]


def test_unreachable_scheduler_is_could_not_run(monkeypatch, sharded):
    """AUDIT-1.1: a tcp:// scheduler that does not answer is audit.scheduler.unreachable, not a hang."""
    monkeypatch.setattr(executor, "CONNECT_TIMEOUT_S", 1)
    with pytest.raises(QFormatsError) as err:
        validate(sharded, deep=True, jobs=2, scheduler="tcp://127.0.0.1:9")
    e = err.value
    assert (e.code, e.clause, e.tensor, e.constraint) == ("audit.scheduler.unreachable", "AUDIT-1.1", "scheduler",
                                                          "a Dask scheduler answering within 1 s")
    assert e.actual.startswith("tcp://127.0.0.1:9: ")


def test_cli_scheduler_local_starts_a_cluster_and_gives_the_serial_report(capsys, sharded, serial_report):
    """AUDIT-1.1: `validate --deep --jobs 2 --scheduler local --json` runs on a LocalCluster of its own and prints
    the --jobs 1 report."""
    assert main(["validate", sharded, "--deep", "--jobs", "2", "--scheduler", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(serial_report))


def test_scheduler_local_workers_keep_large_temporaries_off_fresh_mmaps():
    """AUDIT-1.1: the LocalCluster qformats starts gives each worker MALLOC_MMAP_THRESHOLD_ = 32 MiB (glibc's dynamic
    ceiling), since Dask's nanny sets MALLOC_TRIM_THRESHOLD_, which freezes the threshold at 128 KiB and made one
    worker 1.6x slower than the serial run (benchmarks/cluster.py)."""
    from qformats.executor import map_ordered

    got = map_ordered(os.getenv, ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"], scheduler="local", workers=1)
    assert got == [str(32 << 20), "65536"]
