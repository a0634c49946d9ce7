"""The in-process fuzz (inproc.py): make test's fixed-seed slice, and the harness's teeth.

QF-5.1 / CKPT-1: hostile input gets a report or a structured ``QFormatsError``, never another exception,
a hang, unbounded memory, a write to the input or an unpickling. The slice runs a few hundred cases per
entry point; the other tests show the harness catches each class of failure (a fuzzer that cannot fail
finds nothing by construction), dedups it by (entry point, outcome, top frame), minimizes and saves a
repro, and resumes from its state file.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import pytest

import inproc
import qformats.validate
from qformats.errors import fail

SEED = 20261128
SLICE = {"validate": 300, "validate-deep": 100, "inspect": 200, "decode": 200, "convert": 200, "conformance": 150,
         "readers": 200, "remote": 200, "audit": 100}
EXPECTED = {           # what the slice must reach, so that it cannot pass by answering nothing
    "validate": ("exit0", "exit1"), "validate-deep": ("exit0", "exit1"), "inspect": ("exit0", "exit1"),
    "decode": ("exit0",), "convert": ("exit0",), "conformance": ("exit0", "exit1"), "readers": ("read3-refused0",),
    "remote": ("exit0", "exit1", "read2-refused0", "refused:remote.not_found"),
    "audit": ("run1-sum0", "run1-sum0-resume1", "damaged:run1-sum2-resume2"),
}
# Failure classes the slice meets today, open for the lead (issue #33); remove a line when its bug is fixed.
# (entry point, outcome, function of the top project frame)
KNOWN: set[tuple[str, str, str]] = set()


def _known(key: str) -> bool:
    entry, outcome, frame = key.split(" | ")
    return (entry, outcome, frame.rsplit(" in ", 1)[-1]) in KNOWN


@pytest.fixture(scope="module")
def slice_state(tmp_path_factory):
    where = tmp_path_factory.mktemp("fuzz-slice")
    return inproc.run(state_path=where, cases=SLICE, workers=2, seed=SEED, quiet=True, chunk=50)


@pytest.mark.parametrize("entry", inproc.ENTRY_POINTS)
def test_fixed_seed_slice_finds_nothing_new(slice_state, entry):
    """A fixed-seed slice of each entry point ends in reports, refusals or known failure classes only."""
    es = slice_state["entries"][entry]
    assert es["ranges"] == [[0, SLICE[entry]]]
    new = [k for k in slice_state["failures"] if k.startswith(entry + " |") and not _known(k)]
    assert new == [], {k: slice_state["failures"][k]["detail"][-600:] for k in new}
    assert set(EXPECTED[entry]) <= set(es["outcomes"]), es["outcomes"]
    assert any(o.startswith("refused:") or "-refused" in o and not o.endswith("refused0") or "2-" in o + "-"
               for o in es["outcomes"])


# -- the harness's teeth: one injected bug per class, through the real worker and main(argv) --------------

def _run(tmp_path, monkeypatch, behaviour, cases=1, limit_s=5.0, entries=("validate",)):
    """Run ``cases`` validate cases with qformats' validate replaced by ``behaviour`` (inherited by the fork)."""
    monkeypatch.setattr(qformats.validate, "validate", lambda path, **_: behaviour(path))
    return inproc.run(state_path=tmp_path / "state", cases=cases, workers=1, seed=0, entries=entries,
                      limit_s=limit_s, quiet=True)


def _only_class(state) -> tuple[str, dict]:
    assert len(state["failures"]) == 1, list(state["failures"])
    return next(iter(state["failures"].items()))


def _raise_key_error(path):
    return {}["missing"]


def test_foreign_exception_is_one_class_with_its_frame(tmp_path, monkeypatch):
    """Any exception but QFormatsError through main() is a failure keyed by type and top frame; three cases
    of it are one class counted three times, with a saved repro that replays to the same class."""
    monkeypatch.chdir(tmp_path)               # a relative state path (the Makefile's) outlives the workers' chdir
    monkeypatch.setattr(qformats.validate, "validate", lambda path, **_: _raise_key_error(path))
    state = inproc.run(state_path=Path("state"), cases=3, workers=1, seed=0, entries=("validate",), quiet=True)
    key, f = _only_class(state)
    assert key.startswith("validate | EXCEPTION:KeyError | ") and key.endswith(" in _raise_key_error")
    assert f["count"] == 3 and (tmp_path / "state" / "repros").is_dir()
    assert os.path.isfile(os.path.join(f["repro"], "repro.json")) and f["repro"].startswith(str(tmp_path))


def test_minimized_repro_keeps_only_what_the_failure_needs(tmp_path, monkeypatch):
    """The saved repro drops every file and JSON key the failure does not need."""
    def needs_config(path):
        if os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")):
            raise ZeroDivisionError("config seen")
        raise fail("checkpoint.empty", "path", "a checkpoint", "nothing")
    state = _run(tmp_path, monkeypatch, needs_config, cases=8)
    key, f = _only_class(state)
    assert "ZeroDivisionError" in key
    files = sorted(os.listdir(os.path.join(f["repro"], "checkpoint")))
    assert files == ["config.json"]
    try:
        config = json.loads(open(os.path.join(f["repro"], "checkpoint", "config.json"), "rb").read())
    except ValueError:
        config = "not JSON"
    assert config == {} or not isinstance(config, dict)


def test_a_finding_code_raised_by_validate_breaks_the_contract(tmp_path, monkeypatch):
    """validate raises only could-not-run codes (QF-5.1): a finding's code raised instead is a failure."""
    def raise_finding(path):
        raise fail("gptq.scales.nonfinite", "scales", "finite float16", "NaN at [0, 0]")
    key, _ = _only_class(_run(tmp_path, monkeypatch, raise_finding))
    assert key.startswith("validate | CONTRACT:raised-gptq.scales.nonfinite | ") and key.endswith("in raise_finding")


def test_a_slow_case_times_out(tmp_path, monkeypatch):
    """A case past its time limit is stopped by the interval timer, and the worker goes on."""
    def spin(path):
        while True:
            pass
    state = _run(tmp_path, monkeypatch, spin, cases=2, limit_s=0.3)
    key, f = _only_class(state)
    assert key == "validate | TIMEOUT | tests/fuzz/test_inproc.py in spin" and f["count"] == 2


def _spin_deaf(path):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
    while True:
        pass


def _sleep_deaf(path):
    time.sleep(60)


@pytest.mark.parametrize("behaviour, outcome", [(_spin_deaf, "HANG"), (_sleep_deaf, "HANG-BLOCKED")])
def test_a_hang_the_timer_cannot_stop_is_killed_and_the_run_goes_on(tmp_path, monkeypatch, behaviour, outcome):
    """A case that ignores the CPU timer (signals blocked, as in a loop in C) or sleeps in a system call is
    killed, named by its frame from faulthandler's dump, and the next case runs in a fresh worker."""
    start = time.monotonic()
    monkeypatch.setattr(qformats.validate, "validate", lambda path, **_: behaviour(path))
    state = inproc.run(state_path=tmp_path, cases=2, workers=1, seed=0, entries=("validate",), limit_s=0.2,
                       block_s=1.5, quiet=True)
    key, f = _only_class(state)
    assert key == f"validate | {outcome} | tests/fuzz/test_inproc.py in {behaviour.__name__}"
    assert f["count"] == 2 and state["entries"]["validate"]["ranges"] == [[0, 2]]
    assert time.monotonic() - start < 60


def _read_sleeps_beside_a_busy_thread(self, offset, n):
    def busy():
        while True:
            pass
    threading.Thread(target=busy, daemon=True).start()
    time.sleep(60)


def test_a_case_blocked_while_the_hub_stand_in_runs_is_killed(tmp_path, monkeypatch):
    """The remote entry point's worker runs the hub stand-in's threads beside the case (pyarrow has a pool too): a
    case asleep in a system call while another thread of its worker uses CPU is still seen as blocked (its own
    thread's CPU and state, not the process's) and killed as blocked, not as a loop."""
    from qformats.remote import http

    start = time.monotonic()
    monkeypatch.setattr(http.HttpRangeSource, "read", _read_sleeps_beside_a_busy_thread)
    state = inproc.run(state_path=tmp_path, cases=2, workers=1, seed=0, entries=("remote",), limit_s=0.5,
                       block_s=1.5, quiet=True)
    assert {k.split(" | ")[1] for k in state["failures"]} == {"HANG-BLOCKED"}
    assert state["entries"]["remote"]["ranges"] == [[0, 2]]
    assert time.monotonic() - start < 60


def test_a_crash_is_caught(tmp_path, monkeypatch):
    """A worker killed by a signal (a segfault in C) is a failure, and the run goes on."""
    state = _run(tmp_path, monkeypatch, lambda path: os.kill(os.getpid(), signal.SIGSEGV), cases=2)
    key, f = _only_class(state)
    assert key == "validate | CRASH:-11 | tests/fuzz/test_inproc.py in <lambda>" and f["count"] == 2


def test_memory_exhaustion_is_caught(tmp_path, monkeypatch):
    """RLIMIT_AS turns an unbounded allocation into MemoryError, a failure (not a refusal, not a dead machine)."""
    key, _ = _only_class(_run(tmp_path, monkeypatch, lambda path: bytearray(8 << 30)))
    assert key.startswith("validate | MEMORY | ")


def test_unpickling_is_caught(tmp_path, monkeypatch):
    """With the tripwires in place any unpickling is a failure, whatever module reached it."""
    key, _ = _only_class(_run(tmp_path, monkeypatch, lambda path: pickle.loads(b"N.")))
    assert key.startswith("validate | UNPICKLED | ")


def _refuse():
    raise fail("checkpoint.empty", "path", "a checkpoint", "nothing")


def _write_config(path):
    config = os.path.join(path, "config.json")
    with open(config, "ab"):      # a link out of the case (to /dev/null) is no write to the input
        pass
    _refuse()


def test_a_write_to_the_input_is_refused_at_the_open(tmp_path, monkeypatch):
    """The audit hook stops a write into the case directory at its open and names the writer's frame."""
    state = _run(tmp_path, monkeypatch, lambda p: _write_config(p) if os.path.isdir(p) else _refuse(), cases=6)
    key, _ = _only_class(state)
    assert key.startswith("validate | WROTE-INPUT | tests/fuzz/test_inproc.py:") and key.endswith("in _write_config")


def test_a_write_the_audit_cannot_see_is_caught_by_the_snapshot(tmp_path, monkeypatch):
    """A change made below Python's audit hooks (libc truncate) is still a written input: the hashes differ."""
    def truncate(path):
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
            ctypes.CDLL(None).truncate(os.path.join(path, "config.json").encode(), 0)
        raise fail("checkpoint.empty", "path", "a checkpoint", "nothing")
    key, _ = _only_class(_run(tmp_path, monkeypatch, truncate, cases=6))
    assert key == "validate | WROTE-INPUT | snapshot"


def test_an_internal_error_inside_an_audit_unit_is_a_class_with_its_frame(tmp_path, monkeypatch):
    """qformats audit turns a unit's exception into a row (AUDIT-1.3); the fuzz still sees it, keyed by its type
    and frame, not hidden in the table."""
    state = _run(tmp_path, monkeypatch, _raise_key_error, cases=3, entries=("audit",))
    key, f = _only_class(state)
    assert key.startswith("audit | EXCEPTION:KeyError | ") and key.endswith(" in _raise_key_error")
    assert f["count"] == 3


def _read_fails(self, offset, n):
    return {}["range"]


def test_an_exception_in_the_remote_reader_is_a_class(tmp_path, monkeypatch):
    """The remote entry point's cases reach the HTTP range reader: an exception from it is a failure keyed by its
    frame, in validate, inspect and the Python readers alike."""
    from qformats.remote import http

    monkeypatch.setattr(http.HttpRangeSource, "read", _read_fails)
    state = inproc.run(state_path=tmp_path, cases=12, workers=1, seed=0, entries=("remote",), quiet=True)
    assert {k.rsplit(" in ", 1)[1] for k in state["failures"]} == {"_read_fails"}
    assert {k.split(" | ")[1] for k in state["failures"]} == {"EXCEPTION:KeyError"}


def _replace_a_link_into_the_input(path):
    if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
        out = os.path.join(os.path.dirname(path), "out")
        os.makedirs(out, exist_ok=True)
        os.symlink(os.path.join(path, "config.json"), os.path.join(out, "page.html"))
        with open(os.path.join(out, "page.tmp"), "w") as fh:
            fh.write("page")
        os.replace(os.path.join(out, "page.tmp"), os.path.join(out, "page.html"))   # the link goes, not the file
        os.remove(os.path.join(out, "page.html"))
    _refuse()


def test_replacing_a_link_into_the_input_is_not_a_write_to_it(tmp_path, monkeypatch):
    """rename(2) and unlink(2) act on the link itself: a page renamed over a link into the input leaves the input
    as it was, and is no failure (writing through the link is: the test above)."""
    state = _run(tmp_path, monkeypatch, _replace_a_link_into_the_input, cases=6)
    assert state["failures"] == {}
    assert state["entries"]["validate"]["outcomes"] == {"refused:checkpoint.empty": 6}


def test_recheck_marks_a_class_fixed_when_its_repro_replays_clean(tmp_path, monkeypatch):
    """make fuzz exits 1 only for classes the code as it is now still fails: a class found with an injected bug
    (the replay, in a fresh process, runs the real validate) is marked fixed and dated; no class stays open."""
    state = _run(tmp_path, monkeypatch, _raise_key_error)
    assert inproc.recheck(state, limit_s=5.0) == []
    (f,) = state["failures"].values()
    assert f["fixed"] == time.strftime("%Y-%m-%d")


def test_recheck_keeps_a_class_open_when_its_repro_still_fails(tmp_path, monkeypatch):
    """A repro that fails again on replay (here: a time limit no case can meet) stays open and loses its mark."""
    state = _run(tmp_path, monkeypatch, _raise_key_error)
    (key, f), = state["failures"].items()
    f["fixed"] = "2026-01-01"
    assert inproc.recheck(state, limit_s=1e-6) == [key] and "fixed" not in f


def test_recheck_keeps_a_class_without_a_repro_open():
    state = {"failures": {"validate | HANG | x": {"repro": None, "count": 1}}}
    assert inproc.recheck(state, limit_s=5.0) == ["validate | HANG | x"]


def test_the_state_resumes_where_it_stopped(tmp_path):
    """A second run with a larger goal runs only the cases the first did not, and counts them once."""
    inproc.run(state_path=tmp_path, cases=5, workers=1, seed=3, entries=("readers",), quiet=True)
    state = inproc.run(state_path=tmp_path, cases=12, workers=1, seed=3, entries=("readers",), quiet=True)
    es = state["entries"]["readers"]
    assert es["ranges"] == [[0, 12]] and sum(es["outcomes"].values()) == 12
    assert [r["cases"] for r in state["runs"]] == [5, 7]


def test_a_state_keeps_its_seed(tmp_path):
    """Resuming a state with another seed is refused: the state names the cases of its own seed."""
    inproc.run(state_path=tmp_path, cases=1, workers=1, seed=3, entries=("readers",), quiet=True)
    with pytest.raises(SystemExit, match="seed 3"):
        inproc.run(state_path=tmp_path, cases=2, workers=1, seed=4, entries=("readers",), quiet=True)


def test_done_ranges_merge():
    """Finished cases are kept as disjoint sorted ranges whatever order they finish in (the resume point)."""
    ranges: list[list[int]] = []
    for i in [5, 0, 2, 1, 4, 3, 3, 9]:
        inproc.mark_done(ranges, i)
    assert ranges == [[0, 6], [9, 10]]


def test_pending_work_skips_what_is_done_and_alternates_entry_points():
    """The chunks left are exactly the gaps below the goal, taken round-robin over the entry points."""
    state = {"entries": {"decode": {"ranges": [[0, 3], [5, 6]], "seconds": 0, "outcomes": {}}}}
    tasks = inproc.pending_tasks(state, ("decode", "readers"), 8, chunk=4)
    assert [(t["entry"], t["start"], t["stop"]) for t in tasks] == [
        ("decode", 3, 5), ("readers", 0, 4), ("decode", 6, 8), ("readers", 4, 8)]


def test_a_goal_per_entry_point_runs_that_many_of_each(tmp_path):
    """``--cases ENTRY=N,...`` gives each named entry point its own goal and the others none."""
    goals = inproc.parse_goals("readers=3,inspect=1")
    assert goals == {"readers": 3, "inspect": 1} and inproc.parse_goals("7") == 7
    state = inproc.run(state_path=tmp_path, cases=goals, workers=1, seed=3, entries=("readers", "inspect", "decode"),
                       quiet=True)
    assert {e: es["ranges"] for e, es in state["entries"].items()} == {
        "readers": [[0, 3]], "inspect": [[0, 1]], "decode": []}


def test_a_goal_for_no_entry_point_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        inproc.main(["--cases", "validate=2,nosuch=3"])
    assert stop.value.code == 2
    assert "argument --cases: 'nosuch' is not an entry point (validate, validate-deep," in capsys.readouterr().err
