"""Fuzz every command (validate, inspect, decode, convert, conformance checkpoint, read_layer), in-process,
with a time and memory limit per case.

    python tests/fuzz/fuzz.py --cases 100000 [--seed S] [--jobs J] [--commands validate,decode,...]
    python tests/fuzz/fuzz.py --replay INDEX [--seed S] [--commands ...]   # rebuild one case, run it

Each case draws its command from ``--commands`` (commands.py holds the contract: outputs new,
existing and symbolic links into the input, ``validate --jobs N`` against one process).

Each worker process runs cases one after another in its own interpreter (the command in-process),
under:

- a time limit per case: an interval timer raises :class:`CaseTimeout` in the case (``re`` and
  NumPy loops are interruptible); a case still running at 3x the limit (at least the limit + 2 s:
  a hang in C) gets its worker killed by the parent and restarted after it;
- a memory limit: ``RLIMIT_AS`` at the worker's footprint plus ``--memory-mib``, so unbounded
  allocation surfaces as ``MemoryError`` instead of taking the machine;
- a pickle tripwire: ``pickle.load``/``loads``/``Unpickler`` raise :class:`Unpickled`;
- an input check: every entry of the case directory is stat-ed (size, mtime, ctime, inode) and
  hashed before and after; any change, or a new entry, is a written input.

Outcomes: ``valid``/``invalid`` (a report), ``refused:<code>`` (a could-not-run ``QFormatsError``)
are the expected ones. ``EXCEPTION:<type>``, ``HANG``, ``TIMEOUT``, ``MEMORY``, ``UNPICKLED``,
``WROTE-INPUT``, ``CONTRACT:<what>`` are bugs: the run exits 1 and copies each such case under
``--findings`` with its index, for ``--replay``.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import multiprocessing as mp
import os
import pickle
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import COMMANDS  # noqa: E402
from fuzz_cases import FuzzCase, make_case, seeds  # noqa: E402

BUGS = ("EXCEPTION:", "HANG", "TIMEOUT", "MEMORY", "UNPICKLED", "WROTE-INPUT", "CONTRACT:")


class CaseTimeout(BaseException):
    """Raised into a case by the interval timer (a BaseException: no ``except Exception`` swallows it)."""


class Unpickled(BaseException):
    """Raised by the pickle tripwire."""


def _tripwire(*_a, **_k):
    raise Unpickled()


def on_alarm(*_):
    raise CaseTimeout()


def install_tripwires() -> None:
    pickle.load = pickle.loads = pickle.Unpickler = _tripwire  # type: ignore[assignment,misc]


# -- materialising a case -------------------------------------------------------------------------

def write_case(case: FuzzCase, directory: Path) -> None:
    directory.mkdir(parents=True)
    for name, data in case.files.items():
        path = directory / name
        try:
            if isinstance(data, bytes):
                path.write_bytes(data)
            elif data.kind == "fifo":
                os.mkfifo(path)
            elif data.kind == "dir":
                path.mkdir()
            elif data.target == "loop":
                os.symlink(name, path)
            else:
                os.symlink(data.target, path)
        except (OSError, ValueError):
            continue            # a name the filesystem refuses (NUL, too long): the case goes without it


def snapshot(directory: Path) -> dict[str, tuple]:
    """Everything a write would change, per entry, symlinks not followed."""
    out = {}
    for entry in os.scandir(directory):
        st = entry.stat(follow_symlinks=False)
        digest = ""
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as fh:
                digest = hashlib.blake2b(fh.read(), digest_size=16).hexdigest()
        out[entry.name] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
    return out


# -- running one case -------------------------------------------------------------------------------

def _validate_in_process(case: FuzzCase, target: str) -> tuple[str, str]:
    """``validate`` itself (jobs=1), the report rendered both ways and held to its contract."""
    from qformats.report import to_json, to_text
    from qformats.validate import validate

    report = validate(target, deep=case.deep, fmt=case.fmt, jobs=1)
    text, doc = to_text(report, verbose=case.index % 2 == 0), json.loads(to_json(report))
    outcome, detail = report.verdict, ""
    if report.verdict not in ("valid", "invalid") or doc["verdict"] != report.verdict or not text:
        outcome, detail = "CONTRACT:report", f"verdict {report.verdict!r}, JSON {doc.get('verdict')!r}"
    elif report.verdict == "valid" and any(f["severity"] == "error" for f in doc["findings"]):
        outcome, detail = "CONTRACT:valid-with-errors", str(doc["findings"])[:500]
    return outcome, detail


def run_case(case: FuzzCase, directory: Path, limit_s: float, out_dir: Path | None = None) -> tuple[str, str]:
    """(outcome, detail) of the case's command on the written case (commands.py states the contract).

    ``out_dir`` receives ``-o`` outputs (default: a sibling of the case directory); it is emptied after.
    """
    import commands
    from qformats.errors import QFormatsError
    from qformats.validate import COULD_NOT_RUN

    before = snapshot(directory)
    target = str(directory / case.entry) if case.entry else str(directory)
    out_dir = out_dir or directory.with_name(directory.name + "-out")
    inv = case.invocation
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        if case.command == "validate" and (inv is None or inv.jobs == 1):
            outcome, detail = _validate_in_process(case, target)
        else:
            outcome, detail = commands.run(inv, target, directory, out_dir)
    except QFormatsError as err:
        outcome, detail = f"refused:{err.code}", str(err)[:300]
        if err.code not in COULD_NOT_RUN:
            outcome = f"CONTRACT:raised-{err.code}"
    except CaseTimeout:
        outcome, detail = "TIMEOUT", f"over {limit_s} s"
    except Unpickled:
        outcome, detail = "UNPICKLED", traceback.format_exc(limit=-4)
    except MemoryError:
        outcome, detail = "MEMORY", traceback.format_exc(limit=-4)
    except Exception as exc:  # noqa: BLE001 -- this is what the fuzzer looks for
        outcome, detail = f"EXCEPTION:{type(exc).__name__}", traceback.format_exc(limit=-6)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        shutil.rmtree(out_dir, ignore_errors=True)
    if snapshot(directory) != before:
        outcome, detail = "WROTE-INPUT", f"{sorted(set(snapshot(directory).items()) ^ set(before.items()))}"[:500]
    return outcome, detail


# -- workers and the parent -------------------------------------------------------------------------

def _worker(seed: int, indices: range, limit_s: float, memory_mib: int, scratch: str, current, conn,
            commands: tuple[str, ...] = ("validate",)) -> None:
    signal.signal(signal.SIGALRM, on_alarm)
    seeds()                                              # load before the memory cap
    import conformance.checkpoint  # noqa: F401
    import qformats.cli  # noqa: F401
    import qformats.inspect  # noqa: F401
    import qformats.tools  # noqa: F401
    import qformats.validate  # noqa: F401
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    footprint = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = footprint + memory_mib * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    install_tripwires()
    os.chdir(scratch)                                     # a stray relative write lands here, not in the repo
    for index in indices:
        current.value = index
        case = make_case(seed, index, commands)
        directory = Path(scratch) / f"case-{index}"
        write_case(case, directory)
        outcome, detail = run_case(case, directory, limit_s)
        outcome = f"{case.command} {outcome}"
        conn.send(("bug", index, outcome, detail) if is_bug(outcome) else ("ok", outcome))
        shutil.rmtree(directory, ignore_errors=True)
    conn.send(("done",))


def is_bug(outcome: str) -> bool:
    """``"<command> <outcome>"`` or a bare outcome: a bug when the outcome is one of :data:`BUGS`."""
    return outcome.split(" ", 1)[-1].startswith(BUGS)


def run(cases: int, seed: int, jobs: int, limit_s: float, memory_mib: int, findings: Path | None,
        quiet: bool = False, commands: tuple[str, ...] = ("validate",),
        max_seconds: float | None = None) -> tuple[collections.Counter, list[tuple]]:
    """Run ``cases`` cases over ``jobs`` workers, the commands in turn; (counts per "command outcome",
    bugs as (index, outcome, detail))."""
    ctx = mp.get_context("fork")
    counts: collections.Counter[str] = collections.Counter()
    bugs: list[tuple] = []
    scratch = tempfile.mkdtemp(prefix="qformats-fuzz-")
    pending = {j: range(j, cases, jobs) for j in range(jobs)}
    live: dict[int, tuple] = {}
    started = time.monotonic()
    last_print = started
    hang_s = max(3 * limit_s, limit_s + 2)
    startup_s = max(120.0, 4 * hang_s)     # a fresh worker imports qformats first: slow on a loaded machine

    def launch(j: int, indices: range) -> None:
        current = ctx.Value("q", -1, lock=False)
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(seed, indices, limit_s, memory_mib, scratch, current, child,
                                                 commands))
        proc.start()
        child.close()
        live[j] = (proc, parent, current, indices, [current.value, time.monotonic()])

    for j, indices in pending.items():
        if len(indices):
            launch(j, indices)
    while live:
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            for proc, *_ in live.values():   # out of time: stop; the cases in flight are not counted
                proc.kill()
                proc.join()
            live.clear()
            break
        for j, (proc, conn, current, indices, seen) in list(live.items()):
            while conn.poll():
                try:
                    msg = conn.recv()
                except EOFError:
                    break
                if msg[0] == "ok":
                    counts[msg[1]] += 1
                elif msg[0] == "bug":
                    counts[msg[2]] += 1
                    bugs.append(msg[1:])
                    if not quiet:      # said at once: a long run that is stopped early still names them
                        print(f"  BUG case {msg[1]}: {msg[2]}", file=sys.stderr, flush=True)
                elif msg[0] == "done":
                    proc.join()
                    del live[j]
                    break
            if j not in live:
                continue
            now = time.monotonic()
            if current.value != seen[0]:
                seen[:] = [current.value, now]
            elif now - seen[1] > (hang_s if current.value >= 0 else startup_s) or not proc.is_alive():
                index, alive = current.value, proc.is_alive()
                proc.kill()
                proc.join()
                outcome = "HANG" if alive else f"EXCEPTION:worker-died-{proc.exitcode}"
                outcome = f"{make_case(seed, index, commands).command} {outcome}" if index >= 0 else outcome
                counts[outcome] += 1
                bugs.append((index, outcome, f"worker stopped answering in case {index}"))
                if not quiet:
                    print(f"  BUG case {index}: {outcome}", file=sys.stderr, flush=True)
                del live[j]
                if index < 0:        # died before its first case: restarting would loop; its cases go unrun
                    continue
                rest = range(index + jobs, indices.stop, jobs)
                if len(rest):
                    launch(j, rest)
        if not quiet and time.monotonic() - last_print > 30:
            last_print = time.monotonic()
            done = sum(counts.values())
            print(f"  {done} cases, {done / (last_print - started):.0f}/s, {len(bugs)} bugs", file=sys.stderr, flush=True)
        time.sleep(0.05)
    shutil.rmtree(scratch, ignore_errors=True)
    if findings and bugs:
        for index, outcome, detail in bugs:
            where = findings / f"seed{seed}-case{index}"
            shutil.rmtree(where, ignore_errors=True)
            write_case(make_case(seed, index, commands), where / "checkpoint")
            (where / "outcome.txt").write_text(f"{outcome}\n{detail}\n")
    return counts, bugs


def summary(counts: collections.Counter, bugs: list[tuple], seconds: float) -> str:
    total = sum(counts.values())
    lines = [f"{total} cases in {seconds:.0f} s ({total / max(seconds, 1e-9):.0f}/s); {len(bugs)} bugs"]
    per_command: collections.Counter[str] = collections.Counter()
    for outcome, n in counts.items():
        per_command[outcome.split(" ", 1)[0] if " " in outcome else "?"] += n
    lines.append("per command: " + ", ".join(f"{c} {n}" for c, n in sorted(per_command.items())))
    for outcome, n in sorted(counts.items(), key=lambda kv: (kv[0].split(" ", 1)[0], -kv[1], kv[0])):
        lines.append(f"  {n:>9}  {outcome}")
    for index, outcome, detail in bugs[:20]:
        lines.append(f"BUG case {index}: {outcome}\n    " + detail.strip().replace("\n", "\n    "))
    return "\n".join(lines)


def replay(seed: int, index: int, limit_s: float, out: Path, commands: tuple[str, ...] = ("validate",)) -> int:
    case = make_case(seed, index, commands)
    shutil.rmtree(out, ignore_errors=True)
    write_case(case, out)
    signal.signal(signal.SIGALRM, on_alarm)
    outcome, detail = run_case(case, out, limit_s)
    print(f"case {index} (seed checkpoint {case.seed_name}, mutations {case.mutations}, entry {case.entry!r}, "
          f"deep={case.deep}, fmt={case.fmt}, command {case.command}: {case.invocation}) written to {out}\n"
          f"{outcome}\n{detail}")
    return 1 if is_bug(outcome) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--limit-s", type=float, default=5.0, help="time limit per case")
    p.add_argument("--memory-mib", type=int, default=1024, help="memory a case may add to its worker")
    p.add_argument("--findings", type=Path, default=Path(".venv/fuzz-findings"))
    p.add_argument("--replay", type=int, metavar="INDEX")
    p.add_argument("--max-seconds", type=float, help="stop after this long and report the cases finished")
    p.add_argument("--commands", default=",".join(COMMANDS),
                   help="comma-separated, taken in turn by case index (default: all of " + ", ".join(COMMANDS) + ")")
    args = p.parse_args(argv)
    commands = tuple(c for c in args.commands.split(",") if c)
    if not commands or set(commands) - set(COMMANDS):
        p.error(f"--commands must name some of {', '.join(COMMANDS)}")
    if args.replay is not None:
        return replay(args.seed, args.replay, args.limit_s, args.findings / f"replay-{args.seed}-{args.replay}",
                      commands)
    start = time.monotonic()
    counts, bugs = run(args.cases, args.seed, max(1, args.jobs), args.limit_s, args.memory_mib, args.findings,
                       commands=commands, max_seconds=args.max_seconds)
    print(summary(counts, bugs, time.monotonic() - start))
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
