"""GPTQModel ``dynamic`` rules, matched as the real readers match them, in bounded time (GPTQ-6.6).

A ``dynamic`` key is a Python regular expression that vLLM (``get_dynamic_override``) and
GPTQModel run with ``re.match`` against every module name. Both the pattern and the names come
from the checkpoint, so both are hostile input: a pattern such as ``(a+)+$`` against a name the
file chooses backtracks exponentially, and ``re`` cannot be interrupted from another thread.

We keep the real readers' semantics exactly by matching with ``re`` itself, but in a child
interpreter that is killed after a limit on its CPU time (and capped in memory): the verdict then predicts
what vLLM does, a hang included, instead of what a different engine would do. Compiling happens
here, after the limits on rule count and pattern length, so that ``re.compile``'s own failures
(``OverflowError`` for ``a{4294967296}``, ``RecursionError`` for thousands of nested groups) are
refusals with a code rather than crashes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence

from ...errors import fail

__all__ = ["MAX_RULES", "MAX_PATTERN_CHARS", "MAX_TOTAL_CHARS", "check_rules", "pattern_problem", "first_matches",
           "match_limit_s", "rule"]

MAX_RULES = 4096            # GPTQModel writes one rule per module at most; 80 layers x 7 modules = 560
MAX_PATTERN_CHARS = 4096    # real keys are under 200 characters
# re.compile is about linear in pattern length, ~1 us a character: 4096 x 4096 characters took 20 s
# (measured, 2 cores). The total caps compiling at about a quarter second; 560 real keys use ~60 KiB.
MAX_TOTAL_CHARS = 1 << 18
CHILD_MEMORY = 1 << 30      # address-space cap of the matching child, bytes


def rule(key: str) -> tuple[str, str]:
    """("+" | "-", pattern) of a ``dynamic`` key; a bare pattern is a "+" rule."""
    return (key[0], key[2:]) if key[:2] in ("+:", "-:") else ("+", key)


def pattern_problem(key: str) -> str | None:
    """Why Python's ``re`` cannot compile ``key``'s pattern (vLLM would crash on it), or None (GPTQ-6.6)."""
    if not isinstance(key, str):
        return f"key {key!r} of type {type(key).__name__}, not a string"
    pattern = rule(key)[1]
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"rule {key[:40]!r}... of {len(pattern)} characters (at most {MAX_PATTERN_CHARS})"
    try:
        with warnings.catch_warnings():   # FutureWarning "possible nested set" would print a source line
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error as exc:
        return f"rule {key[:200]!r}: {exc}"
    except (OverflowError, RecursionError, MemoryError) as exc:
        return f"rule {key[:80]!r}: {type(exc).__name__}: {str(exc)[:80]}"
    return None


def check_rules(keys: Sequence[str]) -> None:
    """GPTQ-6.6: at most :data:`MAX_RULES` keys, each compiled by ``re`` (``gptq.config.invalid``)."""
    if len(keys) > MAX_RULES:
        raise fail("gptq.config.invalid", "dynamic", f"at most {MAX_RULES} rules", len(keys), clause="GPTQ-6.6")
    total = sum(len(k) for k in keys if isinstance(k, str))
    if total > MAX_TOTAL_CHARS:
        raise fail("gptq.config.invalid", "dynamic", f"rules of at most {MAX_TOTAL_CHARS} characters in all",
                   f"{total} characters in {len(keys)} rules", clause="GPTQ-6.6")
    for key in keys:
        problem = pattern_problem(key)
        if problem:
            raise fail("gptq.config.invalid", "dynamic", "keys whose patterns Python's re compiles", problem,
                       clause="GPTQ-6.6")


def match_limit_s(rules: int, modules: int) -> float:
    """Time allowed for ``rules x modules`` anchored matches: ``re.match`` of a real key on a real name
    takes about a microsecond, so 5 us a pair plus the child's start is generous; 10 s at most."""
    return min(10.0, 0.6 + 5e-6 * rules * modules)


# The child: stdlib only, no site packages, memory capped; prints one index per module (-1: no rule).
_CHILD = """
import json, re, resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
job = json.load(sys.stdin)
compiled = [re.compile(p) for p in job["patterns"]]
json.dump([next((i for i, p in enumerate(compiled) if p.match(m)), -1) for m in job["modules"]], sys.stdout)
"""


def first_matches(keys: Sequence[str], modules: Sequence[str]) -> list[int | None]:
    """For each module, the index of the first key whose pattern ``re.match``-es it, else None.

    Runs ``re`` in a child interpreter stopped after :func:`match_limit_s` of its own CPU time; a pattern that
    does not finish (catastrophic backtracking on these names) raises ``gptq.config.dynamic_unsafe``, since
    vLLM and GPTQModel, which match the same way, would not finish either. The answer for the same keys and
    names is computed once per process (:data:`_ANSWERS`): every command asks several times (validate, then
    conformance's reader rows, convert's plan), and each must see the same verdict.
    """
    if not keys or not modules:
        return [None] * len(modules)
    check_rules(keys)
    question = (tuple(keys), tuple(modules))
    if question not in _ANSWERS:
        if len(_ANSWERS) >= _ANSWERS_KEPT:
            del _ANSWERS[next(iter(_ANSWERS))]               # the oldest
        _ANSWERS[question] = _match_in_child(keys, modules)
    answer = _ANSWERS[question]
    if isinstance(answer, str):
        raise _unsafe(keys, modules, answer)
    return list(answer)


_ANSWERS: dict[tuple, tuple[int | None, ...] | str] = {}   # (keys, modules) -> first matches, or why unsafe
_ANSWERS_KEPT = 8


def _match_in_child(keys: Sequence[str], modules: Sequence[str]) -> tuple[int | None, ...] | str:
    """The child's answer, or why there is none. The limit is the child's CPU time, read from /proc when the wall
    clock runs out: a child a busy machine starves is waited for (up to :data:`WALL_FACTOR` times the limit), so
    the verdict does not depend on the load (the fuzz saw a benign pattern called unsafe beside 4 busy processes)."""
    limit = match_limit_s(len(keys), len(modules))
    job = json.dumps({"patterns": [rule(k)[1] for k in keys], "modules": list(modules)}).encode()
    try:
        child = subprocess.Popen([sys.executable, "-I", "-S", "-c", _CHILD, str(CHILD_MEMORY)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise fail("gptq.config.dynamic_unsafe", "dynamic", "matched by Python's re in a child process",
                   f"could not start one: {exc}") from None
    started, wait, send = time.monotonic(), limit, job
    while True:
        try:
            out, err = child.communicate(send, timeout=wait)
            break
        except subprocess.TimeoutExpired:
            send, cpu = None, _cpu_seconds(child.pid)
            waited = time.monotonic() - started
            if cpu is None or cpu >= limit or waited >= WALL_FACTOR * limit:
                child.kill()
                child.communicate()
                return f"no result after {limit:.1f} s" if cpu is None else \
                    f"no result after {cpu:.1f} s of CPU ({waited:.1f} s)"
            wait = max(0.05, limit - cpu)
    if child.returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        return f"matching failed: {last[0][:120]}"
    return tuple(None if i < 0 else i for i in json.loads(out))


WALL_FACTOR = 20            # a child starved this long past its CPU limit is given up on


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a running child (fields 14 and 15 of /proc/PID/stat), or None off Linux."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _unsafe(keys: Sequence[str], modules: Sequence[str], what: str) -> Exception:
    return fail("gptq.config.dynamic_unsafe", "dynamic", "patterns that Python's re.match (as vLLM and GPTQModel "
                "run it) finishes on every module name", f"{len(keys)} rules x {len(modules)} modules: {what}")
