"""The case generator, and the process-per-worker fuzzer (fuzz.py, validate --jobs N): its harness sees every bug class.

QF-5.1 / CKPT-1: bad input gets a report or a could-not-run ``QFormatsError``, never another
exception, a hang, unbounded memory, a write to the input or an unpickling.
"""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest

import fuzz
import fuzz_cases
import qformats.validate
from qformats.errors import fail

# make test's fixed-seed slice of every entry point is test_inproc.py's (the in-process, resumable harness
# `make fuzz` runs); this file keeps the case generator's properties and fuzz.py's own harness.


def test_cases_are_reproducible():
    """A case is a pure function of (seed, index): --replay rebuilds exactly what the run saw."""
    a, b = fuzz_cases.make_case(3, 77), fuzz_cases.make_case(3, 77)
    assert (a.files, a.entry, a.deep, a.fmt, a.mutations) == (b.files, b.entry, b.deep, b.fmt, b.mutations)


def test_every_mutator_is_drawn():
    """The generator reaches every attack surface the module docstring lists within 400 cases."""
    drawn = {m.split("(")[0] for i in range(400) for m in fuzz_cases.make_case(1, i).mutations}
    assert drawn == set(fuzz_cases.MUTATORS)


# -- the harness must see each class of bug: a fuzzer that cannot fail finds nothing by construction --

@pytest.fixture
def one_case(tmp_path):
    case = fuzz_cases.make_case(0, 0)
    case.files = dict(fuzz_cases.seeds()["gptq_v1_sym_4bit"])
    case.entry, case.fmt, case.deep, case.command, case.invocation = "", "auto", False, "validate", None
    fuzz.write_case(case, tmp_path / "ckpt")
    old = signal.signal(signal.SIGALRM, fuzz.on_alarm)
    yield case, tmp_path / "ckpt"
    signal.signal(signal.SIGALRM, old)


def _patched(monkeypatch, behaviour):
    monkeypatch.setattr(qformats.validate, "validate", lambda path, **_: behaviour(path))


def test_harness_passes_the_real_validate(one_case):
    """The untouched sample is valid: the checks below differ from it only by the injected bug."""
    case, directory = one_case
    assert fuzz.run_case(case, directory, 5.0)[0] == "valid"


def test_harness_reports_a_foreign_exception(monkeypatch, one_case):
    """Any exception but QFormatsError is a bug, named by its type."""
    _patched(monkeypatch, lambda path: {}["missing"])
    assert fuzz.run_case(*one_case, 5.0)[0] == "EXCEPTION:KeyError"


def test_harness_reports_a_time_out(monkeypatch, one_case):
    """A case past its time limit is stopped by the interval timer and reported."""
    def spin(path):
        while True:
            pass
    _patched(monkeypatch, spin)
    assert fuzz.run_case(*one_case, 0.2)[0] == "TIMEOUT"


def test_harness_reports_a_written_input(monkeypatch, one_case):
    """Any change to the case directory (here a rewritten config with the same bytes) is a bug."""
    real = qformats.validate.validate

    def touch(path):
        config = os.path.join(path, "config.json")
        data = open(config, "rb").read()
        open(config, "wb").write(data)
        return real(path)
    _patched(monkeypatch, touch)
    assert fuzz.run_case(*one_case, 5.0)[0] == "WROTE-INPUT"


def test_harness_reports_unpickling(monkeypatch, one_case):
    """With the tripwires in place, any unpickling is a bug."""
    monkeypatch.setattr(pickle, "loads", fuzz._tripwire)
    _patched(monkeypatch, lambda path: pickle.loads(b"N."))
    assert fuzz.run_case(*one_case, 5.0)[0] == "UNPICKLED"


def test_harness_reports_memory_exhaustion(monkeypatch, one_case):
    """MemoryError (RLIMIT_AS reached) is a bug, not a refusal."""
    def grab(path):
        raise MemoryError()
    _patched(monkeypatch, grab)
    assert fuzz.run_case(*one_case, 5.0)[0] == "MEMORY"


def test_harness_reports_a_refusal_outside_the_contract(monkeypatch, one_case):
    """validate raises only could-not-run codes (QF-5.1); a finding's code raised instead is a bug."""
    def raise_finding(path):
        raise fail("gptq.scales.nonfinite", "scales", "finite float16", "NaN at [0, 0]")
    _patched(monkeypatch, raise_finding)
    assert fuzz.run_case(*one_case, 5.0)[0] == "CONTRACT:raised-gptq.scales.nonfinite"


def test_harness_kills_a_worker_stuck_in_c(monkeypatch, tmp_path):
    """A case that ignores the timer (signals blocked, as in a C loop) is killed by the parent and the
    run goes on with the next case."""
    def stuck(path):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
    _patched(monkeypatch, stuck)
    start = time.monotonic()
    counts, bugs = fuzz.run(2, seed=0, jobs=1, limit_s=0.2, memory_mib=1024, findings=None, quiet=True)
    assert [b[:2] for b in bugs] == [(0, "validate HANG"), (1, "validate HANG")]
    assert counts == {"validate HANG": 2} and time.monotonic() - start < 30
