"""Mutation testing of one core module with its area's tests (issue 33 item 3): ``make mutation MODULE=...``.

mutmut (3.x) mutates the module and runs the area's test files (``areas.json``) against each mutant, one worker,
in a scratch folder ``build/mutation/<module>/`` (mutmut writes ``mutants/`` under its working directory, so the
working tree is never touched). Survivors that no test can kill are listed with the reason in
``equivalent/<module stem>.txt``, keyed by a stable description of the mutant (function, original line, mutated
line) rather than mutmut's numbering, which shifts whenever the module changes. Prints one table line:

    module  mutants  killed  equivalent  survivors  score = killed / (mutants - equivalent)

and each survivor's key and diff; exit status 1 when the score is under the 95 % floor or an equivalence entry is
stale (names no mutant, or a mutant the tests kill).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FLOOR = 95.0
KILLED = {"killed", "timeout", "segfault", "caught by type check"}  # the tests (or the run) noticed the mutant


def load_area(module: str) -> dict:
    areas = json.loads((HERE / "areas.json").read_text())
    if module not in areas:
        known = ", ".join(k for k in areas if not k.startswith("_"))
        sys.exit(f"mutation: no area for {module!r} in tests/mutation/areas.json (known: {known})")
    return areas[module]


def prepare(module: str, area: dict, scratch: Path) -> None:
    """The scratch project: qformats/, the area's files, and a pyproject.toml holding only pytest's and mutmut's settings."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "qformats", scratch / "qformats", ignore=ignore)
    for rel in ["tests/conftest.py", "tests/whole_error.py", *area["tests"], *area.get("also_copy", [])]:
        src, dst = ROOT / rel, scratch / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=ignore)
        else:
            shutil.copy2(src, dst)
    # mutmut copies tests/ itself, and copies a file only into an existing folder: hand it the top folders
    also_copy = sorted({Path(p).parts[0] for p in area.get("also_copy", [])} - {"tests"})
    (scratch / "pyproject.toml").write_text(f"""\
[tool.pytest.ini_options]
addopts = "--import-mode=importlib -p no:cacheprovider"
xfail_strict = true
pythonpath = {json.dumps(["tests", *area.get("pythonpath", [])])}

[tool.mutmut]
source_paths = ["qformats"]
only_mutate = [{json.dumps(module)}]
pytest_add_cli_args_test_selection = {json.dumps(area["tests"])}
also_copy = {json.dumps(also_copy)}
use_git_change_detection = false
""")


def run_mutmut(scratch: Path) -> None:
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", "1"]
    print(f"mutation: {' '.join(cmd[1:])} in {scratch.relative_to(ROOT)}", flush=True)
    # To a file, in a session of its own: a mutant can leave worker processes behind (a pool whose shutdown it broke)
    # that hold mutmut's output open, so a pipe never ended; the session's leftovers are killed when mutmut ends.
    log = scratch / "mutmut-run.log"
    with open(log, "w") as out:
        done = subprocess.Popen(cmd, cwd=scratch, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        done.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(done.pid, signal.SIGKILL)              # its session's group: the leader's pid
    if done.returncode:
        print(log.read_text()[-4000:])
        sys.exit(f"mutation: mutmut run failed ({done.returncode}); log {scratch / 'mutmut-run.log'}")


def describe(diff: str, function: str) -> str:
    """A mutant's stable key: its function, the lines it removes and the lines it adds, whitespace-trimmed."""
    body = [ln for ln in diff.splitlines() if not ln.startswith(("---", "+++", "@@"))]
    minus = " / ".join(ln[1:].strip() for ln in body if ln.startswith("-"))
    plus = " / ".join(ln[1:].strip() for ln in body if ln.startswith("+"))
    return f"{function}: {minus} => {plus}"


def collect(module: str, scratch: Path) -> list[dict]:
    """Every mutant of ``module``: mutmut's name, status, stable key and diff (read through mutmut's own API)."""
    os.chdir(scratch)
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    meta = json.loads((Path("mutants") / f"{module}.meta").read_text())
    mutants, seen = [], Counter()
    for name, code in sorted(meta["exit_code_by_key"].items(), key=lambda kv: _natural(kv[0])):
        function, cls = orig_function_and_class_names_from_key(name)
        diff = get_diff_for_mutant(name, path=module)
        key = describe(diff, f"{cls}.{function}" if cls else function)
        seen[key] += 1
        if seen[key] > 1:  # two mutants whose diffs read the same: told apart by their order
            key = f"{key} [{seen[key]}]"
        mutants.append({"name": name, "status": status_by_exit_code[code], "key": key, "diff": diff})
    return mutants


def _natural(name: str) -> tuple[str, int]:
    stem, _, n = name.rpartition("__mutmut_")
    return stem, int(n)


def read_equivalent(path: Path) -> dict[str, str]:
    """``equivalent/<stem>.txt``: a key line, then an indented ``why:`` line; ``#`` lines are comments."""
    entries, key = {}, None
    for line in path.read_text().splitlines() if path.is_file() else []:
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith((" ", "\t")):
            why = line.strip()
            if key is None or not why.startswith("why: ") or len(why) <= len("why: "):
                sys.exit(f"mutation: {path}: an indented 'why: <reason>' line must follow each key (at {line!r})")
            entries[key] = why[len("why: "):]
            key = None
        else:
            if key is not None:
                sys.exit(f"mutation: {path}: the key {key!r} has no 'why:' line")
            key = line.rstrip()
    if key is not None:
        sys.exit(f"mutation: {path}: the key {key!r} has no 'why:' line")
    return entries


def report(module: str, mutants: list[dict], equivalent: dict[str, str], eq_path: Path) -> int:
    by_key = {m["key"]: m for m in mutants}
    killed = [m for m in mutants if m["status"] in KILLED]
    equiv = [m for m in mutants if m["key"] in equivalent and m["status"] not in KILLED]
    survivors = [m for m in mutants if m["status"] not in KILLED and m["key"] not in equivalent]
    stale = [k for k in equivalent if k not in by_key or by_key[k]["status"] in KILLED]
    for m in survivors:
        print(f"\nSURVIVOR ({m['status']}) {m['name']}\n  key: {m['key']}\n{m['diff']}")
    for k in stale:
        why = "killed by the tests" if k in by_key else "no such mutant"
        print(f"\nSTALE equivalence entry ({why}): {k}")
    denominator = len(mutants) - len(equiv)
    score = 100.0 * len(killed) / denominator if denominator else 100.0
    print(f"\n{'module':<36} {'mutants':>7} {'killed':>6} {'equivalent':>10} {'survivors':>9} {'score':>7}")
    print(f"{module:<36} {len(mutants):>7} {len(killed):>6} {len(equiv):>10} {len(survivors):>9} {score:>6.1f}%")
    print(f"equivalent mutants and why: {eq_path.relative_to(ROOT)}")
    ok = score >= FLOOR and not stale
    if not ok:
        print(f"mutation: below the {FLOOR:.0f} % floor or stale equivalence entries")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a module path as in areas.json, e.g. qformats/bits.py")
    parser.add_argument("--report-only", action="store_true", help="re-read the last run's results, run nothing")
    args = parser.parse_args()
    module = args.module
    area = load_area(module)
    scratch = ROOT / "build" / "mutation" / module.removesuffix(".py").replace("/", ".")
    if not args.report_only:
        prepare(module, area, scratch)
        run_mutmut(scratch)
    eq_path = HERE / "equivalent" / area.get("equivalent", f"{Path(module).stem}.txt")   # formats share stems
    return report(module, collect(module, scratch), read_equivalent(eq_path), eq_path)


if __name__ == "__main__":
    sys.exit(main())
