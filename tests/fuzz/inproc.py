"""The long fuzz: every entry point in process, resumable, towards 1,000,000 cases per entry point.

    python tests/fuzz/inproc.py --cases 1000000 --state DIR [--workers W] [--seed S] [--entries a,b]
    python tests/fuzz/inproc.py --cases validate=100612,audit=403747 --seed 1 --state DIR2   # a goal each
    python tests/fuzz/inproc.py --replay DIR/repros/<class>        # rerun one saved (minimized) repro

Entry points (:data:`ENTRY_POINTS`): the CLI as users run it, ``qformats.cli.main(argv)`` (``validate``
plain and ``--deep``, ``inspect`` with or without ``--json``, ``decode``, ``convert``, ``conformance
checkpoint``), ``readers``: the Python readers (``read_header``/``open_tensor``,
``read_header_bytes``, ``read_gguf``/``tensor_array``, ``read_gguf_bytes``, ``open_checkpoint``/``tensor``,
``read_layer``), ``remote``: the case served by a hub stand-in that also misbehaves, read as ``hf://`` and
``http://`` addresses by ``validate``, ``inspect`` and the readers, and ``audit``: the case as units of
``qformats audit``, then ``audit summarize`` and ``--resume`` on its table, damaged or not (services.py).
Cases come from fuzz_cases.py (byte flips, truncations, header and config JSON edits,
index files, hostile shard names, special files), one deterministic stream per (seed, entry point).

Fork-based workers run many cases each, under:

- a time limit per case (an interval timer raises :class:`fuzz.CaseTimeout`); a case that ignores it
  (a hang in C) is killed by the parent at ``max(3 x limit, limit + 2 s)``, with the stack faulthandler
  dumped just before, and its worker restarted on the next case;
- ``RLIMIT_AS`` at the worker's footprint plus ``--memory-mib``: unbounded allocation is ``MemoryError``;
- pickle tripwires, and an audit hook that refuses (and reports with its stack) any write, rename,
  removal or creation inside the case directory; a stat+hash snapshot before and after as a backstop.

QF-5.1 / CKPT-1, per case: exit 0/1 with a report, or exit 2 with one ``qformats: ...`` line from a
``QFormatsError`` (could-not-run codes only for validate, inspect and conformance) or a usage error;
``--json`` output parses and agrees with the exit code; ``-o`` never replaces an existing file without
``--force``; the readers return arrays or raise ``QFormatsError``. Anything else is a failure, its class
the key (entry point, outcome or exception type, top project frame); the first case of each class is
minimized (files dropped, JSON keys dropped, names reduced) and saved under ``STATE/repros``.

The state file ``STATE/state.json`` holds the seed, the cases done per entry point, outcomes, seconds
spent, and the failure classes; a later run with the same ``--state`` carries on where this one stopped. At the
end of a run every class's repro is replayed (a fresh process each) against the code as it is now: a class that
replays clean is marked fixed with the date, and the exit status is 1 while any class still fails.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import faulthandler
import hashlib
import io
import json
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import commands  # noqa: E402
import fuzz_cases  # noqa: E402
import services  # noqa: E402
from fuzz import CaseTimeout, Unpickled, on_alarm, snapshot, write_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENTRY_POINTS = ("validate", "validate-deep", "inspect", "decode", "convert", "conformance", "readers", "remote",
                "audit")
COMMAND_OF = {"validate": "validate", "validate-deep": "validate", "inspect": "inspect", "decode": "decode",
              "convert": "convert", "conformance": "conformance", "readers": "read_layer", "remote": "validate",
              "audit": "validate"}
REPORT_COMMANDS = ("validate", "inspect", "conformance")        # could-not-run codes only (QF-5.1)
SAMPLED = ("validate", "validate-deep", "inspect", "remote", "audit")   # the commands with --sample N
SAMPLES = ("0", "1", "2", "3", "7", "-1", "1000000", str(2**63))
READ_LIMIT = 6                                                        # tensors read per file by `readers`
FAILURES = ("EXCEPTION:", "MEMORY", "TIMEOUT", "HANG", "CRASH", "UNPICKLED", "WROTE-INPUT", "CONTRACT:")


class NotALayer(Exception):
    """read_layer answered without raising, but not with a mapping of names to arrays."""


class WroteInput(BaseException):
    """Raised by the audit hook at a write into the case directory (a BaseException: main() lets it out)."""


# -- the case: fuzz_cases' generator, one stream per entry point ----------------------------------------

def entry_seed(seed: int, entry: str) -> int:
    return zlib.crc32(f"{seed}:{entry}".encode())


def build_case(seed: int, entry: str, index: int) -> fuzz_cases.FuzzCase:
    """Case ``index`` of ``entry`` in run ``seed``: a pure function, so a state file names every case."""
    case = fuzz_cases.make_case(entry_seed(seed, entry), index, (COMMAND_OF[entry],))
    inv = case.invocation
    inv.jobs = 1                                         # one process per case: workers are the parallelism
    case.deep = inv.deep = entry == "validate-deep"
    extra = random.Random(f"{seed}:{entry}:{index}:extra")  # draws apart from the case's own stream
    if entry == "inspect":
        inv.json = extra.random() < 0.5
    if extra.random() < 0.75:      # most cases reach the command's body, not only the -o refusals
        inv.output = "new"
    sample = random.Random(f"{seed}:{entry}:{index}:sample")   # a stream of its own: the others stay as they were
    if entry in SAMPLED and sample.random() < 0.1:
        inv.options += ["--sample", sample.choice(SAMPLES)]
    if entry == "remote":
        case.plan = services.draw_remote(extra, case.files)
        how, is_gguf = case.plan["how"], case.seed_name.endswith(".gguf")
        case.command = "read_layer" if how == "readers" else how
        if how in ("decode", "convert", "conformance"):          # their own draws: names, readers, targets
            case.invocation = inv = fuzz_cases._invocation(extra, case, how, is_gguf)
        inv.command, inv.jobs = case.command, 1
        # -o is local: new, or an existing file (kept without --force); the remote input cannot be written
        inv.output, inv.json = extra.choice(["new", "new", "existing", "existing-force"]), \
            how in ("validate", "conformance") and extra.random() < 0.3
        if how == "readers":
            inv.names = fuzz_cases._names(extra, case, is_gguf)
    elif entry == "audit":
        case.plan = services.draw_audit(extra, case)
    return case


def cli_argv(case: fuzz_cases.FuzzCase, target: str, out: Path) -> list[str]:
    args = commands.argv(case.invocation, target, out)
    return args + ["--json"] if case.command == "inspect" and case.invocation.json else args


# -- per-case guards, installed once per worker --------------------------------------------------------

GUARD: dict = {"dir": None, "stack": None}
CAUGHT: list[BaseException] = []
UNIT_CAUGHT: list[BaseException] = []    # what validate raised inside an audit unit (a row, not a traceback)
SERVICES: dict = {}                       # the worker's hub stand-in, started at its first remote or audit case
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# the arguments of each audited event that name a path it changes
_PATH_EVENTS = {"os.remove": (0,), "os.rename": (0, 1), "os.replace": (0, 1), "os.truncate": (0,), "os.mkdir": (0,),
                "os.rmdir": (0,), "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.chown": (0,),
                "os.utime": (0,), "shutil.rmtree": (0,), "shutil.move": (0, 1), "shutil.copyfile": (1,)}
# events that act on the last name itself, a symbolic link included, not on what it points to (rename(2),
# unlink(2), rmdir(2), mkdir(2), symlink(2), link(2)): replacing a link into the input is not a write to the input
_NAME_EVENTS = frozenset({"os.remove", "os.rename", "os.replace", "os.mkdir", "os.rmdir", "os.symlink", "os.link",
                          "shutil.move"})


def _inside(path, follow: bool = True) -> bool:
    if not isinstance(path, (str, bytes, os.PathLike)):
        return False                                       # a file descriptor: its open was seen already
    try:
        name = os.fsdecode(path)
        real = os.path.realpath(name) if follow else \
            os.path.join(os.path.realpath(os.path.dirname(name) or "."), os.path.basename(name))
    except (ValueError, OSError):
        return False
    return real == GUARD["dir"] or real.startswith(GUARD["dir"] + os.sep)


def _audit(event: str, args: tuple) -> None:
    if GUARD["dir"] is None:
        return
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
        if not writing or not _inside(path):
            return
    elif event in _PATH_EVENTS:
        if not any(i < len(args) and _inside(args[i], event not in _NAME_EVENTS) for i in _PATH_EVENTS[event]):
            return
    else:
        return
    if GUARD["stack"] is None:           # the first write is the one reported; every one is refused
        GUARD["stack"] = traceback.extract_stack()[:-1]
    raise WroteInput(f"{event} {args[:2]!r}")


def _tripwire(*_a, **_k):
    raise Unpickled()


def install_guards() -> None:
    """Pickle tripwires, the write audit, and main()'s parser instrumented to keep the exception it prints."""
    import pickle

    import _pickle

    import qformats.cli as cli

    for mod in (pickle, _pickle):
        for name in ("load", "loads", "Unpickler"):
            setattr(mod, name, _tripwire)
    pickle._Unpickler = pickle._load = pickle._loads = _tripwire  # type: ignore[attr-defined]
    sys.addaudithook(_audit)
    build = cli.build_parser
    parser = build()                    # built once per worker (3 ms a case otherwise); parse_args is pure

    def parse_args(argv=None, namespace=None, _parse=parser.parse_args):
        ns = _parse(argv, namespace)
        run = getattr(ns, "run", None)
        if run is not None:
            def recorded(a, _run=run):
                try:
                    return _run(a)
                except BaseException as exc:
                    CAUGHT.append(exc)
                    raise
            ns.run = recorded
        return ns

    parser.parse_args = parse_args
    cli.build_parser = lambda: parser
    _record_unit_exceptions()


def _record_unit_exceptions() -> None:
    """``qformats audit`` turns a unit's exception into a row (AUDIT-1.3); keep it, so its frame names the class."""
    import qformats.validate as qv

    inner = qv.validate

    def validate(*args, **kwargs):
        try:
            return inner(*args, **kwargs)
        except BaseException as exc:
            UNIT_CAUGHT.append(exc)
            raise

    qv.validate = validate


# -- running one case ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Result:
    outcome: str
    detail: str = ""
    frame: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome.startswith(FAILURES)


HARNESS = {str(Path(__file__).resolve().parent / n)
           for n in ("inproc.py", "commands.py", "fuzz.py", "fuzz_cases.py", "services.py")}


def is_project(filename: str) -> bool:
    """A file of this repository (qformats/, conformance/, tests/), not the harness's own nor the venv's."""
    return filename.startswith(str(ROOT) + os.sep) and filename not in HARNESS and \
        not filename.startswith(str(ROOT / ".venv"))


def project_frame(frames, *, line: bool = True) -> str:
    """The innermost frame of the project (else the innermost): 'path:line in func' (or 'path in func')."""
    frames = list(frames)
    f = ([f for f in frames if is_project(f.filename)] or frames or [None])[-1]
    if f is None:
        return ""
    name = os.path.relpath(f.filename, ROOT) if f.filename.startswith(str(ROOT)) else os.path.basename(f.filename)
    return f"{name}:{f.lineno} in {f.name}" if line else f"{name} in {f.name}"


def _from_exception(exc: BaseException) -> Result:
    tb = traceback.extract_tb(exc.__traceback__)
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))[-1500:]
    if isinstance(exc, CaseTimeout):
        return Result("TIMEOUT", detail, project_frame(tb, line=False))
    if isinstance(exc, Unpickled):
        return Result("UNPICKLED", detail, project_frame(tb))
    if isinstance(exc, WroteInput):
        return Result("WROTE-INPUT", f"{exc}\n" + "".join(traceback.format_list(GUARD["stack"][-8:])),
                      project_frame(GUARD["stack"]))
    if isinstance(exc, MemoryError):
        return Result("MEMORY", detail, project_frame(tb))
    return Result(f"EXCEPTION:{type(exc).__name__}", detail, project_frame(tb))


def _check_cli(case, code, stdout: str, stderr: str, out: Path, before: str | None) -> Result:
    """QF-5.1: the answer main() gave, held to the contract (exceptions are judged before this)."""
    from qformats.errors import QFormatsError
    from qformats.validate import COULD_NOT_RUN

    inv, exc = case.invocation, (CAUGHT[-1] if CAUGHT else None)
    if exc is not None and not isinstance(exc, QFormatsError):
        return _from_exception(exc)
    if before is not None and inv.output == "existing" and commands._digest(out) != before:
        return Result("CONTRACT:replaced-existing-output", str(out))
    if code not in (0, 1, 2):
        return Result("CONTRACT:exit-code", f"exit {code!r}")
    if "internal error" in stderr:
        return Result("CONTRACT:internal-error-text", stderr[:500])
    json_out = inv.json and case.command in ("validate", "inspect", "conformance")
    if code == 2:
        if exc is None:
            return Result("usage" if "usage:" in stderr else "CONTRACT:exit2-without-error", stderr[:300])
        raised_at = project_frame(traceback.extract_tb(exc.__traceback__))
        if case.command in REPORT_COMMANDS and exc.code not in COULD_NOT_RUN:
            return Result(f"CONTRACT:raised-{exc.code}", str(exc)[:300], raised_at)
        if not stderr.startswith("qformats: ") or stderr.count("\n") != 1:
            return Result("CONTRACT:exit2-message", stderr[:300], raised_at)
        if json_out and case.command != "conformance":
            doc = _json(stdout)
            if not isinstance(doc, dict) or doc.get("verdict") != "could-not-run" or \
                    (doc.get("error") or {}).get("code") != exc.code:
                return Result("CONTRACT:json-could-not-run", stdout[:300])
        return Result(f"refused:{exc.code}")
    if not stdout.strip():
        return Result("CONTRACT:empty-answer", f"exit {code}, stderr {stderr[:200]!r}")
    if json_out:
        doc = _json(stdout)
        if not isinstance(doc, dict) or doc.get("verdict") != ("valid" if code == 0 else "invalid"):
            return Result("CONTRACT:json-verdict", f"exit {code}: {stdout[:300]!r}")
    if case.command in ("decode", "convert") and code == 0 and not out.exists():
        return Result("CONTRACT:no-output", str(out))
    return Result(f"exit{code}")


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _run_cli(case, target: str, directory: Path, out_dir: Path) -> Result:
    import qformats.cli as cli

    guarded, GUARD["dir"] = GUARD["dir"], None          # the harness's own -o set-up (a link into the input)
    out, before = commands.prepare_output(case.invocation, target, directory, out_dir)
    GUARD["dir"] = guarded
    CAUGHT.clear()
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        code = cli.main(cli_argv(case, target, out))
    return _check_cli(case, code, so.getvalue(), se.getvalue(), out, before)


def _run_readers(case, target: str, directory: Path) -> Result:
    """Every Python reader on the case: arrays or QFormatsError, step by step (one refusal does not end it)."""
    import numpy as np

    from qformats.containers import gguf, safetensors as st

    def header(p):
        h = st.read_header(p)
        return [np.asarray(st.open_tensor(h, n)).sum() for n in sorted(h.tensors)[:READ_LIMIT]]

    def gguf_file(p):
        with gguf.read_gguf(p) as g:
            return [g.tensor_array(t.name).sum() for t in list(g.tensors)[:READ_LIMIT]]

    # (step, whether OSError is its documented answer: the file readers say so for a path that is not a
    # readable regular file; open_checkpoint and read_layer map it to could-not-run codes)
    steps = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.name.endswith(".safetensors"):
            steps.append((lambda p=entry.path: header(p), True))
            if entry.is_file(follow_symlinks=False):
                steps.append((lambda p=entry.path: st.read_header_bytes(Path(p).read_bytes()), False))
        elif entry.name.endswith(".gguf"):
            steps.append((lambda p=entry.path: gguf_file(p), True))
            if entry.is_file(follow_symlinks=False):
                steps.append((lambda p=entry.path: gguf.read_gguf_bytes(Path(p).read_bytes()).tensors, False))
    return _judge_steps(steps + _checkpoint_steps(case, target))


def _checkpoint_steps(case, target: str) -> list:
    """``open_checkpoint``/``tensor`` and ``read_layer`` on ``target`` (a path or a remote address)."""
    import numpy as np

    from qformats.containers.checkpoint import open_checkpoint
    from qformats.tools import read_layer

    def checkpoint():
        with open_checkpoint(target) as ck:
            return [np.asarray(ck.tensor(n)).sum() for n in ck.tensor_names()[:READ_LIMIT]]

    def layer():
        got = read_layer(target, (case.invocation.names or ["x"])[0])
        if not (isinstance(got, dict) and got and all(isinstance(v, np.ndarray) for v in got.values())):
            raise NotALayer(f"read_layer gave {type(got).__name__} {list(got)[:4] if isinstance(got, dict) else ''}")

    return [(checkpoint, False), (layer, False)]


def _judge_steps(steps) -> Result:
    """Each reader step: it returns, or refuses with QFormatsError (OSError only where that is documented)."""
    import numpy as np

    from qformats.errors import QFormatsError

    read = refused = 0
    with np.errstate(all="ignore"):
        for step, oserror_documented in steps:
            try:
                step()
                read += 1
            except QFormatsError:
                refused += 1
            except OSError:
                if not oserror_documented:
                    raise
                refused += 1
            except NotALayer as exc:
                return Result("CONTRACT:read_layer", str(exc))
    return Result(f"read{min(read, 3)}-refused{min(refused, 3)}")


def _hub() -> services.Remote:
    """The worker's hub stand-in, HF_ENDPOINT pointing at it: remote cases, and audit units that are hf:// addresses
    (a fuzz never reaches the real hub)."""
    if "remote" not in SERVICES:
        SERVICES["remote"] = services.Remote(Path.cwd())
    return SERVICES["remote"]


def _run_remote(case, directory: Path, out_dir: Path) -> Result:
    """REMOTE-3 / QF-5.1: the case served as a repository (with its drawn faults), opened by its address."""
    _hub().serve(case)
    target = services.address(case, _hub().hub.endpoint)
    if case.plan["how"] == "readers":
        return _judge_steps(_checkpoint_steps(case, target))
    return _run_cli(case, target, directory, out_dir)


def _audit_step(argv: list[str]) -> tuple[int, str, str, Result | None]:
    """One ``qformats audit`` command: (exit code, stdout, stderr, a failure or None) under QF-5.1."""
    import qformats.cli as cli
    from qformats.errors import QFormatsError

    CAUGHT.clear()
    UNIT_CAUGHT.clear()
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        code = cli.main(argv)
    stdout, stderr = so.getvalue(), se.getvalue()
    foreign = [e for e in CAUGHT + UNIT_CAUGHT if not isinstance(e, QFormatsError)]
    if foreign:
        return code, stdout, stderr, _from_exception(foreign[-1])
    if code not in (0, 1, 2):
        return code, stdout, stderr, Result("CONTRACT:exit-code", f"exit {code!r}")
    if "internal error" in stderr + stdout:
        return code, stdout, stderr, Result("CONTRACT:internal-error-text", (stderr + stdout)[-500:])
    if code == 2:
        last = stderr.rstrip("\n").rpartition("\n")[2]
        if not CAUGHT and "usage:" in stderr:
            return code, stdout, stderr, None
        if not CAUGHT or not last.startswith("qformats: "):
            return code, stdout, stderr, Result("CONTRACT:exit2-message", stderr[-300:])
    elif not stdout.strip():
        return code, stdout, stderr, Result("CONTRACT:empty-answer", f"exit {code}, stderr {stderr[-200:]!r}")
    return code, stdout, stderr, None


def _run_audit(case, directory: Path, out_dir: Path) -> Result:
    """AUDIT-1..3 / QF-5.1: audit the case's units, then summarize and resume its table, damaged or not."""
    from qformats.audit import table

    plan = case.plan
    _hub().serve(case)                         # hf:// units read the case from the stand-in (the real hub never)
    out_dir.mkdir(parents=True, exist_ok=True)
    where = out_dir / "table"
    units = services.audit_units(case, directory)
    argv = ["audit", "--out", str(where), "--format", case.fmt] + (["--deep"] if case.deep else []) + \
        case.invocation.options
    if plan["list"]:
        services.write_list(out_dir / "units.txt", case, units)
        argv += ["--list", str(out_dir / "units.txt")]
    else:
        argv += units
    codes = []
    code, stdout, _, bad = _audit_step(argv)
    codes.append(code)
    if bad:
        return bad
    rows = table.rows(where) if code != 2 else []
    if code != 2 and (code == 0) != all(r["verdict"] == "valid" for r in rows):
        return Result("CONTRACT:audit-exit", f"exit {code} for verdicts {[r['verdict'] for r in rows]}")
    where.mkdir(exist_ok=True)
    damaged = services.damage_table(where, case, directory)
    summarize = ["audit", "summarize", str(where)] + (["--json"] if plan["json"] else [])
    sum_code, sum_out, _, bad = _audit_step(summarize)
    codes.append(sum_code)
    if bad:
        return bad
    if sum_code == 1:
        return Result("CONTRACT:summarize-exit", "summarize answers 0 or 2, not 1")
    if sum_code == 0 and plan["json"] and not isinstance(_json(sum_out), dict):
        return Result("CONTRACT:summarize-json", sum_out[:300])
    if sum_code == 0 and plan["json"] and not damaged and _json(sum_out).get("units") != len(rows):
        return Result("CONTRACT:summarize-units", f"{_json(sum_out).get('units')} units for {len(rows)} rows")
    if plan["resume"]:
        again, again_out, _, bad = _audit_step(argv + ["--resume"])
        codes.append(again)
        if bad:
            return bad
        if not damaged and code != 2 and (again != code or "(0 run now" not in again_out):   # AUDIT-3.2
            return Result("CONTRACT:resume", f"first exit {code}, resumed exit {again}: {again_out[-300:]!r}")
    return Result(("damaged:" if damaged else "") + "-".join(f"{n}{c}" for n, c in zip(("run", "sum", "resume"), codes)))


def run_case(case, directory: Path, out_dir: Path, limit_s: float) -> Result:
    before = snapshot(directory)
    target = str(directory / case.entry) if case.entry else str(directory)
    GUARD["dir"], GUARD["stack"] = os.path.realpath(directory), None
    UNIT_CAUGHT.clear()
    signal.setitimer(signal.ITIMER_PROF, limit_s)        # CPU time: a niced worker on a busy machine is slow,
    try:
        try:
            if case.entry_point == "readers":
                result = _run_readers(case, target, directory)
            elif case.entry_point == "remote":
                result = _run_remote(case, directory, out_dir)
            elif case.entry_point == "audit":
                result = _run_audit(case, directory, out_dir)
            else:
                result = _run_cli(case, target, directory, out_dir)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            GUARD["dir"] = None
    except BaseException as exc:  # noqa: BLE001 -- the timer, the tripwires and any foreign exception
        if isinstance(exc, KeyboardInterrupt):
            raise
        result = _from_exception(exc)
    shutil.rmtree(out_dir, ignore_errors=True)
    after = snapshot(directory)
    if after != before and result.outcome != "WROTE-INPUT":
        changed = sorted(set(after.items()) ^ set(before.items()))
        result = Result("WROTE-INPUT", f"{changed}"[:800], "snapshot")
    return result


def class_key(entry: str, result: Result) -> str:
    return f"{entry} | {result.outcome} | {result.frame}"


# -- minimizing a failing case -------------------------------------------------------------------------

def _json_variants(raw: bytes):
    """The JSON file with one key dropped, top level first, then inside quantization_config."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return
    if not isinstance(doc, dict):
        return
    for key in list(doc):
        yield json.dumps({k: v for k, v in doc.items() if k != key}, allow_nan=True).encode()
    qc = doc.get("quantization_config")
    if isinstance(qc, dict):
        for key in list(qc):
            yield json.dumps({**doc, "quantization_config": {k: v for k, v in qc.items() if k != key}},
                             allow_nan=True).encode()


def _with(case, **changes):
    new = dataclasses.replace(case, **changes)
    new.entry_point = case.entry_point                   # not a field of FuzzCase
    return new


def minimize(case, key: str, scratch: Path, limit_s: float, budget_s: float = 20.0, tick=None):
    """Greedy reduction keeping the failure class: drop files, drop JSON keys, keep one tensor name."""
    deadline = time.monotonic() + budget_s
    tries = [0]

    def same(candidate) -> bool:
        if time.monotonic() > deadline:
            return False
        tries[0] += 1
        if tick:
            tick()
        d = scratch / f"min-{tries[0]}"
        write_case(candidate, d)
        try:
            return class_key(candidate.entry_point, run_case(candidate, d, scratch / "min-out", limit_s)) == key
        finally:
            shutil.rmtree(d, ignore_errors=True)

    best = case
    for name in sorted(best.files):
        if name != best.entry:
            trial = _with(best, files={k: v for k, v in best.files.items() if k != name})
            best = trial if same(trial) else best
    for name in sorted(n for n in best.files if n.endswith(".json")):
        changed = True
        while changed and isinstance(best.files.get(name), bytes):
            changed = False
            for variant in _json_variants(best.files[name]):
                trial = _with(best, files={**best.files, name: variant})
                if same(trial):
                    best, changed = trial, True
                    break
    names = best.invocation.names
    if len(names) > 1:
        for n in names:
            trial = _with(best, invocation=dataclasses.replace(best.invocation, names=[n]))
            if same(trial):
                best = trial
                break
    return best, tries[0]


def save_repro(case, where: Path, key: str, result: Result, meta: dict) -> None:
    shutil.rmtree(where, ignore_errors=True)
    write_case(case, where / "checkpoint")
    inv = dataclasses.asdict(case.invocation)
    doc = {"key": key, "entry_point": case.entry_point, "entry": case.entry, "invocation": inv, "plan": case.plan,
           "outcome": result.outcome, "frame": result.frame, "detail": result.detail,
           "specials": {n: dataclasses.asdict(v) for n, v in case.files.items() if not isinstance(v, bytes)},
           "argv": cli_argv(case, "CHECKPOINT" + (f"/{case.entry}" if case.entry else ""), Path("OUT"))
           if case.entry_point not in ("readers", "remote", "audit") else None, **meta}
    (where / "repro.json").write_text(json.dumps(doc, indent=1, default=str))


def slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:90] + "-" + hashlib.blake2b(key.encode(), digest_size=4).hexdigest()


# -- the worker ----------------------------------------------------------------------------------------

def _send(conn, **msg) -> None:
    conn.send_bytes(json.dumps(msg).encode())


def _worker(conn, ticks, current, phase, cfg: dict) -> None:
    signal.signal(signal.SIGPROF, on_alarm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)         # the parent stops the run
    # One core per worker: validate's default jobs (inspect, --deep) is one process per CPU of the
    # affinity set, so a pinned worker runs every layer in process instead of forking a pool per case.
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cfg["slot"] % len(cpus)]})
    fuzz_cases.seeds()
    import conformance.checkpoint  # noqa: F401
    import qformats.cli  # noqa: F401
    import qformats.inspect  # noqa: F401
    import qformats.tools  # noqa: F401
    import qformats.validate  # noqa: F401
    services.preload()                                   # pyarrow, huggingface_hub: imported before the cap
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    footprint = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = footprint + cfg["memory_mib"] * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    scratch = Path(tempfile.mkdtemp(prefix=f"w{os.getpid()}-", dir=cfg["scratch"]))
    os.chdir(scratch)                                    # a stray relative write lands here
    hang_file = open(cfg["hang_file"], "w")
    faulthandler.enable(file=hang_file)                  # a crash in C leaves its Python stack for the parent,
    faulthandler.register(signal.SIGUSR1, file=hang_file)  # and so does a hang: dumped from C before the kill
    install_guards()
    limit_s, known = cfg["limit_s"], set()

    def tick():
        ticks.value += 1

    while True:
        try:
            task = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        known |= set(task["known"])
        entry = task["entry"]
        for index in range(task["start"], task["stop"]):
            current.value, phase.value = index, 0           # generating: the harness's own time
            tick()
            t0, c0 = time.perf_counter(), time.process_time()
            case = build_case(cfg["seed"], entry, index)
            case.entry_point = entry
            directory = scratch / "case"
            write_case(case, directory)
            phase.value = 1
            tick()
            try:
                result = run_case(case, directory, scratch / "out", limit_s)
            except CaseTimeout:            # the timer fired between the case and its cancel
                result = Result("TIMEOUT", "after the case", "harness")
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            msg = {"t": "case", "entry": entry, "index": index, "outcome": result.outcome, "dt": dt, "cpu": cpu}
            if result.failed:
                key = class_key(entry, result)
                msg.update(key=key, detail=result.detail[-1500:], frame=result.frame)
                if key not in known:
                    known.add(key)
                    small, tries = minimize(case, key, scratch, limit_s, tick=tick)
                    where = Path(cfg["repros"]) / slug(key)
                    save_repro(small, where, key, result, {"seed": cfg["seed"], "index": index, "tries": tries,
                                                            "mutations": case.mutations, "seed_name": case.seed_name})
                    msg["repro"] = str(where)
            shutil.rmtree(directory, ignore_errors=True)
            _send(conn, **msg)
        current.value, phase.value = -1, 0
        _send(conn, t="chunk", entry=entry, start=task["start"], stop=task["stop"])


# -- the parent: state, dispatch, the watchdog ---------------------------------------------------------

def load_state(path: Path, seed: int | None) -> dict:
    if path.exists():
        state = json.loads(path.read_text())
        if seed is not None and seed != state["seed"]:
            raise SystemExit(f"{path} is a run with seed {state['seed']}; use another --state for seed {seed}")
        return state
    return {"version": 1, "seed": 0 if seed is None else seed, "entries": {}, "failures": {}, "runs": []}


def save_state(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _entry_state(state: dict, entry: str) -> dict:
    return state["entries"].setdefault(entry, {"ranges": [], "seconds": 0.0, "outcomes": {}})


def done_count(es: dict) -> int:
    return sum(b - a for a, b in es["ranges"])


def mark_done(ranges: list[list[int]], i: int) -> None:
    """Add case ``i`` to the sorted, disjoint half-open ``ranges`` of finished cases."""
    at = bisect.bisect_right([a for a, _ in ranges], i)
    if at and ranges[at - 1][1] > i:
        return                                              # already counted
    if at and ranges[at - 1][1] == i:
        ranges[at - 1][1] = i + 1
    elif at < len(ranges) and ranges[at][0] == i + 1:
        ranges[at][0] = i
        return
    else:
        ranges.insert(at, [i, i + 1])
        at += 1
    if at < len(ranges) and ranges[at][0] == ranges[at - 1][1]:
        ranges[at - 1][1] = ranges.pop(at)[1]


def goal_of(cases: int | dict, entry: str) -> int:
    """``cases`` is one goal for every entry point, or a goal per entry point."""
    return cases.get(entry, 0) if isinstance(cases, dict) else cases


def pending_tasks(state: dict, entries, cases: int, chunk: int) -> list[dict]:
    """The cases not yet run below ``cases``, in chunks, round-robin over the entry points so that all
    advance together (a run stopped early leaves every entry point about as far)."""
    per_entry = []
    for e in entries:
        todo, pos, goal = [], 0, goal_of(cases, e)
        for a, b in _entry_state(state, e)["ranges"] + [[goal, goal]]:
            for start in range(pos, min(a, goal), chunk):
                todo.append({"entry": e, "start": start, "stop": min(start + chunk, a, goal)})
            pos = max(pos, b)
        per_entry.append(todo)
    return [t[i] for i in range(max(map(len, per_entry), default=0)) for t in per_entry if i < len(t)]


def _record_failure(state: dict, key: str, entry: str, index: int, outcome: str, frame: str, detail: str,
                    repro: str | None, say) -> None:
    f = state["failures"].get(key)
    if f is None:
        f = state["failures"][key] = {"entry": entry, "outcome": outcome, "frame": frame, "count": 0,
                                      "first_index": index, "detail": detail, "repro": repro}
        say(f"  NEW FAILURE CLASS {key}\n    case {entry} #{index}; repro {repro}")
    f["count"] += 1
    if repro and not f.get("repro"):
        f["repro"] = repro


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> tuple[str, float]:
    """(state letter, user+system CPU seconds) of a worker's main thread, the one running the case, from /proc
    (Linux). Not the whole process: the hub stand-in's thread polls, so a case blocked in open() on a FIFO would
    still show a process using CPU and never look blocked."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return "X", 0.0
    return fields[0], (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _hang_frame(text: str) -> str:
    """The innermost project frame of a faulthandler dump (most recent call first), without its line: where a
    loop is caught varies from one dump to the next, and one hang must stay one failure class."""
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', text)
    for name, _line, func in frames:
        if is_project(name):
            return f"{os.path.relpath(name, ROOT)} in {func}"
    return "no project frame" if frames else "no dump"


def run(*, state_path: Path, cases: int | dict, workers: int = 1, seed: int | None = None, entries=ENTRY_POINTS,
        limit_s: float = 5.0, memory_mib: int = 1024, chunk: int = 200, max_seconds: float | None = None,
        quiet: bool = False, block_s: float = 30.0) -> dict:
    """Run (or resume) until every entry point has ``cases`` cases or ``max_seconds`` pass; the state.

    The watchdog counts CPU time, not wall time, so that a niced worker on a busy machine is not taken
    for a hung one: a case past ``max(3 x limit, limit + 2 s)`` of CPU (the timer ignored: a loop in C),
    or asleep with no CPU for ``block_s`` (blocked in a system call), is killed after a stack dump."""
    state_path = state_path.resolve()                   # workers chdir to their scratch directory
    state_path.mkdir(parents=True, exist_ok=True)
    file = state_path / "state.json"
    state = load_state(file, seed)
    repros = state_path / "repros"
    repros.mkdir(exist_ok=True)
    say = (lambda s: None) if quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    tasks = pending_tasks(state, entries, cases, chunk)
    fuzz_cases.seeds()                                        # loaded once; every fork inherits it
    ctx = mp.get_context("fork")
    scratch = tempfile.mkdtemp(prefix="qformats-inproc-")
    hang_s = max(3 * limit_s, limit_s + 2)
    startup_s = max(120.0, 4 * hang_s)     # CPU for a worker's imports, or for generating one case
    cfg = {"seed": state["seed"], "limit_s": limit_s, "memory_mib": memory_mib, "scratch": scratch,
           "repros": str(repros)}
    live: dict[int, dict] = {}
    started = time.monotonic()
    last_save = last_print = started
    run_rec = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "workers": workers, "cases": 0, "seconds": 0.0}
    state["runs"].append(run_rec)

    def launch(slot: int) -> None:
        ticks, current, phase = (ctx.Value("q", v, lock=False) for v in (0, -1, 0))
        parent, child = ctx.Pipe()
        hang_file = f"{scratch}/hang-{slot}-{time.monotonic_ns()}.txt"
        proc = ctx.Process(target=_worker, args=(child, ticks, current, phase,
                                                 {**cfg, "hang_file": hang_file, "slot": slot}))
        proc.start()
        child.close()
        live[slot] = {"proc": proc, "conn": parent, "ticks": ticks, "current": current, "phase": phase,
                      "seen": (0, 0.0), "progress": (time.monotonic(), 0.0), "task": None, "hang_file": hang_file}

    def dispatch(slot: int) -> None:
        w = live[slot]
        if not tasks:
            w["task"] = None
            return
        w["task"] = tasks.pop(0)
        w["conn"].send_bytes(json.dumps({**w["task"], "known": list(state["failures"])}).encode())

    def on_case(msg: dict) -> None:
        es = _entry_state(state, msg["entry"])
        mark_done(es["ranges"], msg["index"])
        es["seconds"] += msg["dt"]
        es["cpu_seconds"] = es.get("cpu_seconds", 0.0) + msg["cpu"]
        es["outcomes"][msg["outcome"]] = es["outcomes"].get(msg["outcome"], 0) + 1
        run_rec["cases"] += 1
        if "key" in msg:
            _record_failure(state, msg["key"], msg["entry"], msg["index"], msg["outcome"], msg["frame"],
                            msg["detail"], msg.get("repro"), say)

    def on_stuck(slot: int, w: dict, why: str) -> None:
        index, alive = w["current"].value, w["proc"].is_alive()
        if alive:                      # faulthandler's C handler writes the stack, even from a loop in C
            os.kill(w["proc"].pid, signal.SIGUSR1)
            for _ in range(20):
                time.sleep(0.05)
                if os.path.getsize(w["hang_file"]):
                    break
        w["proc"].kill()
        w["proc"].join()
        task = w["task"]
        del live[slot]
        if task is None or index < 0:
            say(f"  worker {slot} died outside a case (exit {w['proc'].exitcode}); restarted")
            if task:
                tasks.insert(0, task)
            return
        entry = task["entry"]
        outcome = why if alive else f"CRASH:{w['proc'].exitcode}"
        dump = Path(w["hang_file"]).read_text(errors="replace") if os.path.exists(w["hang_file"]) else ""
        frame = _hang_frame(dump)
        key = f"{entry} | {outcome} | {frame}"
        repro = None
        if key not in state["failures"]:
            case = build_case(state["seed"], entry, index)
            case.entry_point = entry
            where = repros / slug(key)
            save_repro(case, where, key, Result(outcome, dump[-3000:], frame),
                       {"seed": state["seed"], "index": index, "tries": 0, "seed_name": case.seed_name,
                        "mutations": case.mutations})
            repro = str(where)
        es = _entry_state(state, entry)
        mark_done(es["ranges"], index)
        es["outcomes"][outcome] = es["outcomes"].get(outcome, 0) + 1
        es["seconds"] += time.monotonic() - w["progress"][0] if why == "HANG-BLOCKED" else hang_s
        _record_failure(state, key, entry, index, outcome, frame, dump[-1500:], repro, say)
        if index + 1 < task["stop"]:
            tasks.insert(0, {**task, "start": index + 1})

    try:
        for slot in range(max(1, workers)):
            launch(slot)
            dispatch(slot)
        while any(w["task"] for w in live.values()):
            if max_seconds is not None and time.monotonic() - started > max_seconds:
                break
            ready = mpc.wait([w["conn"] for w in live.values() if w["task"]], timeout=0.2)
            for slot, w in list(live.items()):
                if w["conn"] not in ready:
                    continue
                try:
                    while w["conn"].poll():
                        msg = json.loads(w["conn"].recv_bytes())
                        if msg["t"] == "case":
                            on_case(msg)
                        else:
                            dispatch(slot)
                            break
                except (EOFError, OSError):
                    pass
            now = time.monotonic()
            for slot, w in list(live.items()):
                if w["task"] is None:
                    continue
                ticks, (run_state, cpu) = w["ticks"].value, proc_cpu(w["proc"].pid)
                if ticks != w["seen"][0]:
                    w["seen"], w["progress"] = (ticks, cpu), (now, cpu)
                    continue
                if cpu > w["progress"][1]:
                    w["progress"] = (now, cpu)
                running = w["phase"].value == 1            # else importing, or generating a case
                why = None
                if not w["proc"].is_alive():
                    why = "CRASH"
                elif cpu - w["seen"][1] > (hang_s if running else startup_s):
                    why = "HANG"
                elif running and run_state in "SD" and now - w["progress"][0] > block_s:
                    why = "HANG-BLOCKED"
                if why:
                    on_stuck(slot, w, why)
                    launch(slot)
                    dispatch(slot)
            if now - last_save > 10:
                last_save = now
                run_rec["seconds"] = now - started
                save_state(file, state)
            if not quiet and now - last_print > 60:
                last_print = now
                say("  " + progress(state, entries, cases, now - started))
    finally:
        for w in live.values():
            w["proc"].kill()
            w["proc"].join()
        run_rec["seconds"] = time.monotonic() - started
        save_state(file, state)
        shutil.rmtree(scratch, ignore_errors=True)
    return state


def progress(state: dict, entries, cases: int, seconds: float) -> str:
    parts = []
    for e in entries:
        es = _entry_state(state, e)
        n = done_count(es)
        parts.append(f"{e} {n}/{goal_of(cases, e)} ({n / max(es['seconds'], 1e-9):.0f}/s)")
    return f"{seconds:.0f} s: " + ", ".join(parts) + f"; {len(state['failures'])} failure classes"


def summary(state: dict, entries, cases: int) -> str:
    lines = [f"seed {state['seed']}; {len(state['runs'])} run(s), "
             f"{sum(r['seconds'] for r in state['runs']):.0f} s wall in all"]
    for e in entries:
        es = _entry_state(state, e)
        n = done_count(es)
        rate, cpu_rate = n / max(es["seconds"], 1e-9), n / max(es.get("cpu_seconds", 0.0), 1e-9)
        eta = (goal_of(cases, e) - n) / rate / 3600 if rate else float("inf")
        top = ", ".join(f"{k} {v}" for k, v in sorted(es["outcomes"].items(), key=lambda kv: -kv[1])[:6])
        lines.append(f"  {e:14} {n:>9}/{goal_of(cases, e)}  {rate:6.1f} cases/s per worker ({cpu_rate:6.1f} per CPU "
                     f"second)  {eta:7.1f} h to go   {top}")
    for key, f in sorted(state["failures"].items()):
        fixed = f" (fixed: its repro replays clean, {f['fixed']})" if f.get("fixed") else ""
        lines.append(f"FAILURE {key}  x{f['count']}  first #{f['first_index']}  repro {f['repro']}{fixed}")
    return "\n".join(lines)


def recheck(state: dict, limit_s: float) -> list[str]:
    """Replay every failure class's saved repro, each in a fresh process (replay installs audit hooks for good),
    with the code as it is now; mark the classes that no longer fail as fixed (dated) and return those still open.
    A class without a repro stays open: nothing shows it fixed."""
    still = []
    for key, f in sorted(state["failures"].items()):
        repro = f.get("repro") and Path(f["repro"])
        if repro and not repro.is_absolute():
            repro = ROOT / repro
        if not repro or not (repro / "repro.json").exists():
            still.append(key)
            continue
        try:
            done = subprocess.run([sys.executable, __file__, "--replay", str(repro), "--limit-s", str(limit_s)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=max(60, 10 * limit_s))
            clean = done.returncode == 0
        except subprocess.TimeoutExpired:          # a hang replayed without the watchdog: still open
            clean = False
        if clean:
            f.setdefault("fixed", time.strftime("%Y-%m-%d"))
        else:
            f.pop("fixed", None)
            still.append(key)
    return still


def replay(where: Path, limit_s: float) -> int:
    """Rerun a saved repro directory in this process, guards installed; print the outcome."""
    doc = json.loads((where / "repro.json").read_text())
    files: dict = {}
    for p in sorted((where / "checkpoint").iterdir()):
        if p.name in doc["specials"]:
            files[p.name] = fuzz_cases.Special(**doc["specials"][p.name])
        elif p.is_file() and not p.is_symlink():
            files[p.name] = p.read_bytes()
    for name, spec in doc["specials"].items():
        files.setdefault(name, fuzz_cases.Special(**spec))
    case = fuzz_cases.FuzzCase(index=doc["index"], seed_name=doc["seed_name"], files=files, entry=doc["entry"],
                               command=doc["invocation"]["command"],
                               invocation=commands.Invocation(**doc["invocation"]), plan=doc.get("plan", {}))
    case.deep = case.invocation.deep
    case.entry_point = doc["entry_point"]
    scratch = Path(tempfile.mkdtemp(prefix="qformats-replay-"))
    write_case(case, scratch / "case")
    signal.signal(signal.SIGPROF, on_alarm)
    install_guards()
    result = run_case(case, scratch / "case", scratch / "out", limit_s)
    print(f"{doc['key']}\nnow: {class_key(case.entry_point, result)}\n{result.detail}")
    shutil.rmtree(scratch, ignore_errors=True)
    return 1 if result.failed else 0


def parse_goals(text: str) -> int | dict:
    """``--cases``: ``N``, or ``ENTRY=N,...`` (a goal per entry point, e.g. what a new seed adds to another's)."""
    if "=" not in text:
        return int(text)
    goals = {}
    for item in text.split(","):
        entry, _, n = item.partition("=")
        if entry not in ENTRY_POINTS:
            raise argparse.ArgumentTypeError(f"{entry!r} is not an entry point ({', '.join(ENTRY_POINTS)})")
        goals[entry] = int(n)
    return goals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=parse_goals, default=1_000_000,
                   help="cases per entry point (the goal): N for every one, or ENTRY=N,... (the others get none)")
    p.add_argument("--state", type=Path, default=Path(".venv/fuzz-state"), help="state directory (resumable)")
    p.add_argument("--seed", type=int, help="a new state's seed (default 0); a resumed state keeps its own")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--entries", default=",".join(ENTRY_POINTS))
    p.add_argument("--limit-s", type=float, default=5.0, help="time limit per case")
    p.add_argument("--memory-mib", type=int, default=1024, help="memory a case may add to its worker")
    p.add_argument("--chunk", type=int, default=200, help="cases per task sent to a worker")
    p.add_argument("--max-seconds", type=float, help="stop after this long (the state keeps the progress)")
    p.add_argument("--replay", type=Path, metavar="REPRO_DIR")
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.limit_s)
    entries = tuple(e for e in args.entries.split(",") if e)
    if not entries or set(entries) - set(ENTRY_POINTS):
        p.error(f"--entries must name some of {', '.join(ENTRY_POINTS)}")
    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)      # a stop saves the state (SIGINT too: a background job ignores it)
    signal.signal(signal.SIGINT, stop)
    try:
        state = run(state_path=args.state, cases=args.cases, workers=args.workers, seed=args.seed, entries=entries,
                    limit_s=args.limit_s, memory_mib=args.memory_mib, chunk=args.chunk, max_seconds=args.max_seconds)
    except KeyboardInterrupt:
        state = load_state(args.state / "state.json", None)
    still = recheck(state, args.limit_s)          # exit 1 only for a class the code as it is now still fails
    save_state(args.state.resolve() / "state.json", state)
    print(summary(state, entries, args.cases))
    print(f"{len(state['failures']) - len(still)} of {len(state['failures'])} failure classes fixed (their repros "
          f"replay clean); open: {', '.join(still) or 'none'}")
    return 1 if still else 0


if __name__ == "__main__":
    sys.exit(main())
