"""Every qformats entry point under one contract, for the fuzzer and the every-fixture sweep.

QF-5.1 / CKPT-1: whatever the input, a command answers with a report (exit 0 or 1) or a
``QFormatsError`` (exit 2 with that one-line message), never another exception. ``validate``,
``inspect`` and ``conformance checkpoint`` may raise only could-not-run codes (a malformed file is a
finding, not a refusal); ``decode``, ``convert`` and ``read_layer`` refuse bad input with any code.
Outputs (``-o``) go outside the input: a new path, an existing file (left alone without
``--force``), or a symbolic link into the input (refused: never a write to the input).

Commands run in-process through the real argument parser, so the options under test are the
ones users type; ``read_layer`` is the Python API.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

COMMANDS = ("validate", "inspect", "decode", "convert", "conformance", "read_layer")
OUTPUTS = ("new", "existing", "existing-force", "symlink-into-input", "inside-input")
STAMP = b"an existing file the command must not replace\n"
JSON_COMMANDS = ("validate", "conformance")                  # the commands with --json
# convert's --to, chosen by a pseudo-option (default gptq_v2): every choice of the parser
TO_OPTIONS = {"--to-v1": "gptq", "--to-awq": "awq_gemm", "--to-ct": "compressed_tensors"}


@dataclass
class Invocation:
    """One command on one target: what the fuzzer draws and the sweep enumerates."""

    command: str
    names: list[str] = field(default_factory=list)      # decode --tensor / read_layer module
    deep: bool = False
    fmt: str = "auto"
    jobs: int = 1                                        # validate: 1, or N compared against 1
    output: str = "new"
    json: bool = False
    options: list[str] = field(default_factory=list)    # extra flags: --source-version v2, --reader marlin, ...


def _digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def prepare_output(inv: Invocation, target: str, case_dir: Path, out_dir: Path) -> tuple[Path, str | None]:
    """The -o path for ``inv.output`` and, for an existing file, its digest before the run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / ("out" if inv.command == "convert" and Path(target).is_dir() else "out.safetensors")
    if inv.output.startswith("existing"):
        out.write_bytes(STAMP)
        return out, _digest(out)
    if inv.output == "symlink-into-input":
        inside = sorted(p for p in case_dir.iterdir() if p.is_file() and not p.is_symlink())
        os.symlink(inside[0] if inside else case_dir / "config.json", out)
        return out, None
    if inv.output == "inside-input":     # into the input directory, or onto the input file itself
        return (Path(target) if Path(target).is_file() else case_dir / "qformats-output.safetensors"), None
    return out, None


def argv(inv: Invocation, target: str, out: Path) -> list[str]:
    if inv.command == "validate":
        return ["validate", target, "--format", inv.fmt, "--jobs", "1", "-v"] + (["--deep"] if inv.deep else []) \
            + (["--json"] if inv.json else []) + inv.options
    if inv.command == "inspect":
        return ["inspect", target, "--format", inv.fmt, "--width", "80"] + inv.options
    if inv.command == "conformance":
        return ["conformance", "checkpoint", target] + (["--json"] if inv.json else [])
    force = ["--force"] if inv.output == "existing-force" else []
    if inv.command == "decode":
        return ["decode", target, *[a for n in inv.names or ["x"] for a in ("--tensor", n)], "-o", str(out),
                *force, *inv.options]
    if inv.command == "convert":
        to = next((TO_OPTIONS[o] for o in inv.options if o in TO_OPTIONS), "gptq_v2")
        return ["convert", target, "--to", to, "-o", str(out), *[o for o in inv.options if o not in TO_OPTIONS]]
    raise ValueError(inv.command)


def _cli(args: list[str]) -> tuple[int, str, str]:
    """Parse with the real parser and run the command function, exceptions left to the caller."""
    from qformats.cli import build_parser

    parsed = build_parser().parse_args(args)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = parsed.run(parsed)
    return code, out.getvalue(), err.getvalue()


def _validate_jobs(target: str, inv: Invocation) -> tuple[str, str]:
    """validate with one process and with ``inv.jobs``: the same verdict and findings, or the same error
    (an error raised in a worker process must reach the user as the finding one process gives)."""
    from qformats.errors import QFormatsError
    from qformats.validate import validate

    def answer(jobs: int) -> tuple:
        try:
            report = validate(target, deep=inv.deep, fmt=inv.fmt, jobs=jobs)
        except QFormatsError as err:
            return ("refused", err.code, err.tensor or "", str(err))
        return (report.verdict, sorted((f.code, f.tensor or "", f.message) for f in report.findings))

    one, many = answer(1), answer(inv.jobs)
    if one != many:
        return "CONTRACT:jobs-differ", f"jobs=1 {one}\njobs={inv.jobs} {many}"[:800]
    return (f"refused:{one[1]}" if one[0] == "refused" else one[0]), ""


def sweep_one(inv: Invocation, target: Path, out_dir: Path) -> tuple[str, str]:
    """(outcome, detail) of ``inv`` on one fixture, with any exception but QFormatsError as the outcome
    ``EXCEPTION:<type>``: the bug the fixture sweeps look for."""
    try:
        return run(inv, str(target), target if target.is_dir() else target.parent, out_dir)
    except Exception as exc:  # noqa: BLE001 -- any other exception is the bug a sweep looks for
        return f"EXCEPTION:{type(exc).__name__}", str(exc)


def run(inv: Invocation, target: str, case_dir: Path, out_dir: Path) -> tuple[str, str]:
    """(outcome, detail) of one invocation; exceptions other than QFormatsError propagate to the caller."""
    from qformats.errors import QFormatsError
    from qformats.tools import read_layer

    if inv.command == "read_layer":
        try:
            got = read_layer(target, (inv.names or ["x"])[0])
        except QFormatsError as err:
            return _refusal(inv, err)
        return ("read", "") if isinstance(got, dict) and got else ("CONTRACT:read_layer-empty", repr(got)[:200])
    if inv.command == "validate" and inv.jobs > 1:
        outcome, detail = _validate_jobs(target, inv)
        if outcome.startswith("refused:") and outcome[8:] not in _could_not_run():
            return f"CONTRACT:raised-{outcome[8:]}", detail
        return (outcome if outcome.startswith("CONTRACT") else f"jobs{inv.jobs}:{outcome}"), detail
    out, before = prepare_output(inv, target, case_dir, out_dir)
    try:
        code, stdout, stderr = _cli(argv(inv, target, out))
    except QFormatsError as err:
        result = _refusal(inv, err)
    else:
        result = _check_answer(inv, code, stdout, stderr, out)
    if before is not None and inv.output == "existing" and _digest(out) != before:
        return "CONTRACT:replaced-existing-output", str(out)
    return result


def _could_not_run() -> frozenset[str]:
    from qformats.validate import COULD_NOT_RUN

    return COULD_NOT_RUN


def _refusal(inv: Invocation, err) -> tuple[str, str]:
    """Exit 2 with the error's one line: any code for the tools, could-not-run codes for the reports."""
    if inv.command in ("validate", "inspect", "conformance") and err.code not in _could_not_run():
        return f"CONTRACT:raised-{err.code}", str(err)[:300]
    if not str(err).strip():
        return "CONTRACT:empty-message", repr(err)
    return f"refused:{err.code}", str(err)[:300]


def _check_answer(inv: Invocation, code: int, stdout: str, stderr: str, out: Path) -> tuple[str, str]:
    if code not in (0, 1) or not stdout.strip():
        return "CONTRACT:answer", f"exit {code!r}, stdout {stdout[:200]!r}, stderr {stderr[:200]!r}"
    if inv.json and inv.command in JSON_COMMANDS:
        try:
            doc = json.loads(stdout)
        except ValueError as exc:
            return "CONTRACT:json", f"{exc}: {stdout[:200]!r}"
        if doc.get("verdict") != ("valid" if code == 0 else "invalid"):
            return "CONTRACT:exit-vs-verdict", f"exit {code}, verdict {doc.get('verdict')!r}"
    if inv.command in ("decode", "convert") and code == 0 and not out.exists():
        return "CONTRACT:no-output", str(out)
    return f"exit{code}", ""
