"""The one executor seam (DESIGN.md §7, spec/audit.md AUDIT-1): parallel work goes through here.

    for i, value in completed(fn, items, scheduler="processes", workers=4):
        ...                      # as each finishes; a lost worker's items are run again

``scheduler`` selects where ``fn(item)`` runs:

* ``processes``: a ``concurrent.futures.ProcessPoolExecutor`` on this machine (``--jobs``);
* ``local``: a dask.distributed ``LocalCluster`` of ``workers`` single-threaded worker processes;
* ``tcp://HOST:PORT`` (or ``tls://``): an existing Dask scheduler, whose workers must see the same paths.

The Dask schedulers are reached through ``Client.get_executor()``, so both are ``concurrent.futures``
executors and the callers never branch on which. Items and results are plain picklable data. A worker
that dies (the pool breaks, Dask's ``KilledWorker``) costs only the items it had not finished: they are
submitted again, at most :data:`ATTEMPTS` times each (AUDIT-1.3), and the callers order results by item, so
a report is the same whichever scheduler made it. dask.distributed is the optional extra ``qformats[cluster]``;
without it ``local`` and ``tcp://`` are a could-not-run error naming the extra (AUDIT-1.2).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, as_completed, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .errors import QFormatsError, fail

__all__ = ["ATTEMPTS", "SCHEDULER_HELP", "Seam", "check_scheduler", "completed", "current_scheduler", "is_dask",
           "is_lost", "map_ordered", "pool", "require", "scheduling"]

ATTEMPTS = 3                  # runs of one item before its worker loss is final (AUDIT-1.3)
CONNECT_TIMEOUT_S = 10
DASK_ADDRESS = re.compile(r"^(tcp|tls)://[^\s/]+:\d{1,5}$")
SCHEDULER_HELP = ("where parallel work runs: processes (a process pool on this machine, the default), local (a "
                  "Dask LocalCluster of --jobs worker processes) or tcp://HOST:PORT (an existing Dask scheduler; "
                  "its workers must see the same paths); local and tcp:// need the extra qformats[cluster]")
# each optional module a command imports -> the extra that installs it (a pyarrow built without Parquet, such as
# conda-forge's pyarrow-core, imports while pyarrow.parquet does not)
EXTRAS = {"distributed": "cluster", "pyarrow": "audit", "pyarrow.parquet": "audit", "rich": "audit"}
# The LocalCluster's workers get glibc's mmap threshold fixed at 32 MiB (its dynamic ceiling). Dask's nanny sets
# MALLOC_TRIM_THRESHOLD_, and glibc then stops raising the mmap threshold from 128 KiB, so every large NumPy
# temporary of a deep check is a fresh mmap whose pages fault in: measured 2026-11-28 (benchmarks/cluster.py, 978 MB
# GPTQ checkpoint), one worker took 2.18 s against 1.40 s in this process, and 1.41 s with the threshold fixed.
# An existing cluster (tcp://) is the user's: set distributed.nanny.pre-spawn-environ there (README).
WORKER_ENVIRON = {"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": str(32 << 20)}

_SCHEDULER: contextvars.ContextVar[str] = contextvars.ContextVar("qformats_scheduler", default="processes")


def check_scheduler(scheduler: str | None) -> str:
    """``scheduler`` if it names one (AUDIT-1.1), else ``argument.invalid``; None is the current default."""
    if scheduler is None:
        return _SCHEDULER.get()
    if scheduler in ("processes", "local") or DASK_ADDRESS.match(str(scheduler)):
        return scheduler
    raise fail("argument.invalid", "scheduler", "processes, local or tcp://HOST:PORT", scheduler)


def is_dask(scheduler: str) -> bool:
    return scheduler != "processes"


def current_scheduler() -> str:
    return _SCHEDULER.get()


@contextlib.contextmanager
def scheduling(scheduler: str | None) -> Iterator[str]:
    """Make ``scheduler`` the default of the calls inside (the CLI's ``--scheduler`` for ``inspect``, whose
    table comes from ``validate``)."""
    token = _SCHEDULER.set(check_scheduler(scheduler))
    try:
        yield _SCHEDULER.get()
    finally:
        _SCHEDULER.reset(token)


def require(module: str, why: str) -> Any:
    """Import an optional extra's module, or the could-not-run error naming the extra (AUDIT-1.2)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS[module]
        raise fail("audit.extra.missing", module, f"installed for {why} (pip install 'qformats[{extra}]')",
                   "not installed") from None


class Seam:
    """An open scheduler: ``workers`` (a Dask cluster's threads, else as asked) and :meth:`completed`."""

    def __init__(self, make: Callable[[], Executor], workers: int, pool: bool) -> None:
        self.make = make
        self.workers = workers
        self.breaks_together = pool       # a process pool: a lost worker fails every unfinished item

    def completed(self, fn: Callable[[Any], Any], items: list[Any], *,
                  keep_lost: bool = False) -> Iterator[tuple[int, Any]]:
        """See :func:`completed`."""
        return _rounds(self, fn, items, keep_lost)


@contextlib.contextmanager
def pool(scheduler: str | None, workers: int) -> Iterator[Seam]:
    """The seam open on ``scheduler``. Its executor factory is called again after a process pool breaks; a Dask
    client outlives its lost workers (the nanny starts new ones, the scheduler reassigns their tasks)."""
    scheduler = check_scheduler(scheduler)
    if not is_dask(scheduler):
        yield Seam(lambda: ProcessPoolExecutor(max_workers=workers), workers, pool=True)
        return
    distributed = require("distributed", f"--scheduler {scheduler}")
    with _dask_client(distributed, scheduler, workers) as client:
        yield Seam(lambda: client.get_executor(pure=False), max(1, sum(client.nthreads().values())), pool=False)


@contextlib.contextmanager
def _dask_client(distributed: Any, scheduler: str, workers: int) -> Iterator[Any]:
    if scheduler == "local":
        import dask

        with dask.config.set(WORKER_ENVIRON), \
                distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
                distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise fail("audit.scheduler.unreachable", "scheduler", f"a Dask scheduler answering within "
                   f"{CONNECT_TIMEOUT_S} s", f"{scheduler}: {type(exc).__name__}: {exc}") from None
    with client:
        yield client


def completed(fn: Callable[[Any], Any], items: list[Any], *, scheduler: str | None = None, workers: int = 1,
              keep_lost: bool = False) -> Iterator[tuple[int, Any]]:
    """``(i, fn(items[i]))`` for every item, in the order they finish. ``fn`` raising is the caller's error
    (re-raised here); a lost worker is not: its unfinished items run again, up to :data:`ATTEMPTS` runs each.
    Past that, ``audit.worker.lost`` is raised, or with ``keep_lost`` yielded as that item's value."""
    with pool(scheduler, workers) as seam:
        yield from seam.completed(fn, items, keep_lost=keep_lost)


def _rounds(seam: Seam, fn: Callable[[Any], Any], items: list[Any], keep_lost: bool) -> Iterator[tuple[int, Any]]:
    """Rounds until every item has a result or is lost for good (AUDIT-1.3).

    A broken process pool fails every unfinished item, but the items its workers were running come first among
    them in submission order (the pool hands items out in that order): the first ``workers + 1`` (one more for a
    result still on its way back) are the suspects. Each runs again alone in a process of its own, where a loss
    is its own and counts against its :data:`ATTEMPTS`; the rest go back to the pool uncounted. Every round that
    loses items settles its suspects, so the rounds end. Dask
    tracks the task a lost worker was running itself (its scheduler reschedules it, and gives up with
    ``KilledWorker`` after ``distributed.scheduler.allowed-failures``): that is final here.
    """
    attempts = dict.fromkeys(range(len(items)), 0)
    suspects: list[int] = []
    while attempts:
        if suspects:
            outcomes = _alone(fn, items, suspects, seam.workers)
        else:
            outcomes = _together(seam, fn, items, list(attempts))
        lost: list[int] = []
        for i, future in outcomes:
            if not _lost_worker(future):
                del attempts[i]
                yield i, future.result()           # the item's own error propagates, never retried
            elif suspects or not seam.breaks_together:
                attempts[i] = ATTEMPTS if type(future.exception()).__name__ == "KilledWorker" else attempts[i] + 1
                if attempts[i] >= ATTEMPTS:
                    del attempts[i]
                    yield from _give_up(i, keep_lost)
            else:
                lost.append(i)
        running = set(sorted(lost)[:seam.workers + EXTRA_QUEUED])   # submission order is index order
        suspects = [i for i in attempts if i in running] if lost else [i for i in suspects if i in attempts]


EXTRA_QUEUED = 1      # concurrent.futures.process.EXTRA_QUEUED_CALLS: items queued beyond the busy workers


def _together(seam: Seam, fn: Callable[[Any], Any], items: list[Any], todo: list[int]) -> Iterator[tuple[int, Future]]:
    """One executor for all of ``todo``: (i, future) as each finishes."""
    executor = seam.make()
    try:
        futures = {executor.submit(fn, items[i]): i for i in todo}
        for future in as_completed(futures):
            yield futures[future], future
    finally:
        _close(executor)


def _alone(fn: Callable[[Any], Any], items: list[Any], todo: list[int], workers: int) -> Iterator[tuple[int, Future]]:
    """Each of ``todo`` in a process of its own, ``workers`` at a time: a loss is that item's alone."""
    queue, running = list(todo), {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                i = queue.pop(0)
                executor = ProcessPoolExecutor(max_workers=1)
                running[executor.submit(fn, items[i])] = (i, executor)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                i, executor = running.pop(future)
                executor.shutdown(wait=True)
                yield i, future
    finally:
        for _, executor in running.values():
            _close(executor)


def _give_up(i: int, keep_lost: bool) -> Iterator[tuple[int, Any]]:
    error = fail("audit.worker.lost", None, f"finished within {ATTEMPTS} runs",
                 f"the worker running item {i} was lost each time")
    if not keep_lost:
        raise error
    yield i, error


def _close(executor: Executor) -> None:
    """Cancel what has not started (an interrupted caller); a process pool waits for its running items, a
    Dask executor cancels them (the scheduler keeps no task nobody wants)."""
    if isinstance(executor, ProcessPoolExecutor):
        executor.shutdown(wait=True, cancel_futures=True)
    else:
        executor.shutdown(wait=False)


def _lost_worker(future: Future) -> bool:
    """Whether the future failed because its worker went away (not because ``fn`` raised)."""
    exc = future.exception()
    if exc is None:
        return False
    if isinstance(exc, BrokenProcessPool):
        return True
    name = type(exc).__name__
    # distributed's KilledWorker (the scheduler gave up on the task after its workers died), a closed comm
    return name in ("KilledWorker", "CommClosedError") and type(exc).__module__.startswith("distributed")


def map_ordered(fn: Callable[[Any], Any], items: Iterable[Any], **kw: Any) -> list[Any]:
    """``[fn(item) for item in items]`` through :func:`completed`: results in the items' order."""
    items = list(items)
    out: list[Any] = [None] * len(items)
    for i, value in completed(fn, items, **kw):
        out[i] = value
    return out


def is_lost(value: Any) -> bool:
    return isinstance(value, QFormatsError) and value.code == "audit.worker.lost"
