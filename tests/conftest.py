"""The suite's own option: ``--shard I/N`` runs the I-th of N parts of the suite, so that ``make test`` can run
two parts at once on a two-core machine.

A part is a set of whole test files (module-scoped fixtures, such as one real library's run, are set up once),
assigned longest first to the part with the least time so far, from the seconds per file in
``tests/durations.json`` (written by ``tests/durations.py`` from a JUnit report of a whole run). A file the
table does not know counts as the table's median. Every file lands in exactly one part, so the N parts
together run the whole suite.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shard", default=None, metavar="I/N",
                     help="run the I-th of N parts of the suite (whole files, balanced by tests/durations.json)")


def _shard(spec: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard takes I/N with 1 <= I <= N (got {spec!r})") from None
    if not 1 <= i <= n:
        raise pytest.UsageError(f"--shard takes I/N with 1 <= I <= N (got {spec!r})")
    return i - 1, n


def parts(files: set[str], n: int, seconds: dict[str, float]) -> dict[str, int]:
    """Each file's part: longest first, to the part with the least time so far (ties: the lower part)."""
    default = statistics.median(seconds.values()) if seconds else 1.0
    load = [0.0] * n
    part = {}
    for f in sorted(files, key=lambda f: (-seconds.get(f, default), f)):
        i = min(range(n), key=lambda j: (load[j], j))
        part[f] = i
        load[i] += seconds.get(f, default)
    return part


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spec = config.getoption("shard")
    if not spec:
        return
    mine, n = _shard(spec)
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    files = {item.nodeid.split("::")[0] for item in items}
    part = parts(files, n, seconds)
    keep = [item for item in items if part[item.nodeid.split("::")[0]] == mine]
    config.hook.pytest_deselected(items=[item for item in items if part[item.nodeid.split("::")[0]] != mine])
    items[:] = keep
