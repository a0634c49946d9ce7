"""The fuzz's entry points that need more than a directory: ``remote`` and ``audit`` (issue #33: "the remote
readers and audit once they exist").

``remote``: the case is a repository on a hub stand-in (tests/remote/hubstub.py: a real
``ThreadingHTTPServer`` on 127.0.0.1, one per worker, with the listing and ``resolve`` routes huggingface_hub
calls and Range/206), which also misbehaves as servers do (REMOTE-3: Range ignored, 4xx/5xx, 429 storms, short
bodies, sizes that lie in the listing or in Content-Range). ``validate`` / ``inspect`` of ``hf://`` and
``http://`` addresses, and the Python readers on them. QF-5.1 / REMOTE-3.8: a report or a could-not-run error;
the readers arrays or ``QFormatsError``.

``audit``: the case's directory and its files as units of ``qformats audit`` (on the command line, or in a
``--list`` file that also holds junk lines), then ``audit summarize`` and ``audit --resume`` on the table, which
is damaged first in about one case in three (AUDIT-3.1/3.3: part files flipped, cut, emptied, replaced by other
bytes or by another schema; names of part files and temporaries that are not files; the page's name a link).
A unit's internal error becomes a row (AUDIT-1.3), so the fuzz reads the table and holds each row to QF-5.1.

Everything a case does is drawn here into ``case.plan`` (plain JSON, saved with a repro), from the case's extra
stream, so a case stays a pure function of (seed, entry point, index).
"""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPO = "fuzz/c{index}"

# -- remote ------------------------------------------------------------------------------------------------

REMOTE_HOW = {"validate": 0.30, "inspect": 0.15, "readers": 0.20, "decode": 0.10, "convert": 0.10,
              "conformance": 0.15}            # every command that takes a path, and the Python readers
FAULT_KINDS = ("ignore_range", "status", "too_many", "truncate", "content_range_total", "listed_size",
               "api_status", "fail_after", "listing")
# a listing no real hub writes: what a broken mirror behind HF_ENDPOINT could answer (key -> values)
LISTING_NONSENSE = {"size": ["12", -5, 1.5, None, 2**70, True], "lfs.size": ["9", -1, None, 2**64],
                    "lfs": [None, "x", []], "rfilename": [None, 7, "", "../config.json", "a//b"],
                    "*sha": [None, 5, "", "../.."], "*siblings": [None, {}, "x", [1, 2], [{}]], "*id": [None, 3]}
ODD_ADDRESSES = ("hf://fuzz", "hf://fuzz/{repo_name}@no-such-revision", "hf://datasets/fuzz/{repo_name}",
                 "hf://fuzz/{repo_name}/no/such/file.safetensors", "hf://", "hf://fuzz/{repo_name}@",
                 "http://127.0.0.1:9/model.safetensors", "{endpoint}/fuzz/{repo_name}/resolve/main/",
                 "{endpoint}/fuzz/{repo_name}/resolve/main/a b.safetensors", "http://[::1/x.gguf",
                 "{endpoint}/fuzz/{repo_name}/resolve/main/model.safetensors?x=\u00e9")


def _fault(rng: random.Random, files: dict) -> list:
    regular = sorted(n for n, v in files.items() if isinstance(v, bytes))
    kind = rng.choice(FAULT_KINDS)
    name = rng.choice(regular) if regular else "config.json"
    size = len(files[name]) if name in regular else 0
    value = {"ignore_range": True,
             "status": rng.choice([404, 401, 403, 416, 500, 502, 503]),
             "too_many": rng.choice([1, 2, 4, 5, 9]),
             "truncate": rng.randrange(size + 1),
             "content_range_total": rng.choice([0, size - 1, size + 1, 2**63]),
             "listed_size": rng.choice([0, -1, size - 1, size + 1, 2**62]),
             "api_status": rng.choice([401, 403, 404, 429, 500]),
             "fail_after": rng.choice([0, 1, 2, 3]),
             "listing": None}[kind]
    if kind == "listing":
        key = rng.choice(sorted(LISTING_NONSENSE))
        name, value = ("*", [key[1:], rng.choice(LISTING_NONSENSE[key])]) if key.startswith("*") else \
            (name, [key, rng.choice(LISTING_NONSENSE[key])])
    return [kind, name, value]


def draw_remote(rng: random.Random, files: dict) -> dict:
    how = rng.choices(list(REMOTE_HOW), list(REMOTE_HOW.values()))[0]
    roll = rng.random()
    form = "hf" if roll < 0.75 else "hf-rev" if roll < 0.85 else "url" if roll < 0.95 else rng.choice(ODD_ADDRESSES)
    faults = [] if rng.random() < 0.5 else [_fault(rng, files) for _ in range(rng.choice([1, 1, 2]))]
    return {"how": how, "form": form, "faults": faults}


class Remote:
    """The worker's hub stand-in, started once (after the fork: its thread belongs to the worker)."""

    def __init__(self, scratch: Path) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        from remote import hubstub  # noqa: PLC0415 -- the stand-in the remote tests use

        from qformats.remote import http

        self.hubstub = hubstub
        # the stand-in's threads (and the handler threads they start) never take the per-case CPU timer's SIGPROF:
        # it goes to the main thread, which runs the case, whatever system call it is blocked in
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPROF})
        try:
            self.hub = hubstub.Hub().start()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF})
        os.environ.update(HF_ENDPOINT=self.hub.endpoint, HF_HOME=str(scratch / "hf-home"), NO_PROXY="127.0.0.1",
                          no_proxy="127.0.0.1", HF_HUB_DISABLE_IMPLICIT_TOKEN="1", HF_HUB_DISABLE_TELEMETRY="1")
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
            os.environ.pop(name, None)
        http.BACKOFF_S = 0.001        # REMOTE-3.4's backoff, short as in the remote tests (429 storms are drawn)

    def serve(self, case) -> None:
        """Serve ``case`` as repository fuzz/c<index> with its drawn faults (``case.plan["faults"]``)."""
        hub, repo = self.hub, REPO.format(index=case.index)
        hub.repos.clear()
        hub.commits.clear()
        hub.snapshots.clear()
        hub.reset()
        hub.faults = self.hubstub.Faults()
        hub.add_files(repo, {n: v for n, v in case.files.items() if isinstance(v, bytes)})
        for kind, name, value in case.plan.get("faults", []):
            where = getattr(hub.faults, kind)
            key = repo if kind == "api_status" else name
            if kind == "listing":
                value = tuple(value)
            if isinstance(where, set):
                where.add(key)
            else:
                where[key] = value


def address(case, endpoint: str) -> str:
    repo = REPO.format(index=case.index)
    form, entry = case.plan["form"], case.entry
    tail = f"/{entry}" if entry else ""
    if form == "hf":
        return f"hf://{repo}{tail}"
    if form == "hf-rev":
        return f"hf://{repo}@main{tail}"
    if form == "url":
        return f"{endpoint}/{repo}/resolve/main/{entry or 'model.safetensors'}"
    return form.format(repo_name=repo.split("/")[1], endpoint=endpoint)


# -- audit -------------------------------------------------------------------------------------------------

JUNK_UNITS = ("/dev/zero", "/dev/null", "/proc/self/mem", "no-such-unit", "   ", "# a comment", "hf://fuzz/none",
              "hf://", "http://127.0.0.1:9/x.safetensors", "\u00e9\u0000", "..", "a" * 5000)
SPECIAL_PREFIXES = ("special-", "page-link")
DAMAGE_KINDS = ("flip", "cut", "empty", "swap", "foreign", "special-part", "special-temporary", "page-link",
                "garbage-line")


def draw_audit(rng: random.Random, case) -> dict:
    units = [rng.choice(["dir", "dir", "entry", "missing", "hf"]) for _ in range(rng.choice([1, 1, 2, 3]))]
    listed = rng.random() < 0.3
    junk = rng.sample(JUNK_UNITS, rng.choice([0, 1, 2])) if listed else []
    damage = [] if rng.random() < 0.65 else [[rng.choice(DAMAGE_KINDS), rng.randrange(1 << 30)]
                                               for _ in range(rng.choice([1, 1, 2]))]
    faults = [_fault(rng, case.files)] if "hf" in units and rng.random() < 0.3 else []
    # the --list file itself: units and junk lines mostly; else a case file's bytes, or no regular file at all
    list_kind = rng.choice(["units"] * 7 + ["bytes", "zero", "fifo"]) if listed else "units"
    return {"units": units, "list": listed, "junk": junk, "damage": damage, "json": rng.random() < 0.3,
            "resume": rng.random() < 0.5 or bool(damage), "faults": faults, "list_kind": list_kind}


def audit_units(case, directory: Path) -> list[str]:
    """The drawn units: the case directory, its entry, a missing path, and the case served as hf://fuzz/c<index>
    (the caller serves it first)."""
    picks = {"dir": str(directory), "entry": str(directory / (case.entry or "model.safetensors")),
             "missing": str(directory / "no-such-checkpoint"), "hf": f"hf://{REPO.format(index=case.index)}"}
    return [picks[u] for u in case.plan["units"]]


def write_list(path: Path, case, units: list[str]) -> None:
    kind = case.plan.get("list_kind", "units")
    regular = sorted(n for n, v in case.files.items() if isinstance(v, bytes))
    if kind == "zero":
        os.symlink("/dev/zero", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "bytes" and regular:
        path.write_bytes(case.files[regular[case.index % len(regular)]])
    else:
        path.write_text("\n".join(["# units", *units, *case.plan["junk"]]) + "\n", encoding="utf-8",
                        errors="surrogateescape")


_FOREIGN: list[bytes] = []


def _foreign_parquet() -> bytes:
    """A Parquet file of another table (one int column): read fine, not the audit's schema."""
    if not _FOREIGN:
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = io.BytesIO()
        pq.write_table(pa.table({"key": [1, 2, 3]}), sink)
        _FOREIGN.append(sink.getvalue())
    return _FOREIGN[0]


def damage_table(out: Path, case, directory: Path) -> list[str]:
    """Apply the case's drawn damage to the table in ``out`` (the harness writes here, never into the input)."""
    done = []
    for kind, draw in case.plan.get("damage", []):
        rng = random.Random(draw)
        parts = sorted(p for p in out.glob("part-*.parquet") if p.is_file() and not p.is_symlink())
        target = rng.choice(parts) if parts else out / "part-fuzz.parquet"
        if not kind.startswith(SPECIAL_PREFIXES) and os.path.lexists(target) and \
                not (target.is_file() and not target.is_symlink()):
            continue                          # no part file to damage: an earlier damage put a special there
        data = target.read_bytes() if target.is_file() and not target.is_symlink() else b""   # never a FIFO
        regular = sorted(n for n, v in case.files.items() if isinstance(v, bytes))
        if kind == "flip" and data:
            blob = bytearray(data)
            for _ in range(rng.choice([1, 2, 8, 64])):
                blob[rng.randrange(len(blob))] = rng.randrange(256)
            target.write_bytes(bytes(blob))
        elif kind == "cut":
            target.write_bytes(data[:rng.randrange(len(data) + 1)])
        elif kind == "empty":
            target.write_bytes(b"")
        elif kind == "swap":
            target.write_bytes(case.files[rng.choice(regular)] if regular else b"PAR1")
        elif kind == "foreign":
            target.write_bytes(_foreign_parquet())
        elif kind == "garbage-line":
            target.write_bytes(data + b"PAR1" * rng.choice([1, 3]))
        elif kind in ("special-part", "special-temporary", "page-link"):
            name = {"special-part": "part-fuzz.parquet", "page-link": "summary.html",
                    "special-temporary": f".{target.name}.{rng.randrange(1 << 16)}.tmp"}[kind]
            _special(out / name, rng.choice(["dir", "fifo", "zero", "loop", "input"] if kind != "special-temporary"
                                            else ["dir", "fifo", "loop"]), directory, regular, rng)
        else:
            continue
        done.append(kind)
    return done


def _special(path: Path, what: str, directory: Path, regular: list[str], rng: random.Random) -> None:
    if path.exists() or path.is_symlink():
        return
    if what == "dir":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "zero":
        os.symlink("/dev/zero", path)
    elif what == "loop":
        os.symlink(path.name, path)
    elif regular:                       # a link to a file of the input: reading it is fine, writing it is not
        os.symlink(directory / rng.choice(regular), path)


def preload() -> None:
    """The audit's and the hub client's libraries, imported once per worker before its memory cap is set, with
    their threads kept few: pyarrow's pools at one thread, 512 KiB thread stacks (the stand-in starts one per
    connection) and two malloc arenas, so that address space (``RLIMIT_AS``) measures the case, not the threads."""
    import ctypes
    import threading

    import huggingface_hub  # noqa: F401
    import pyarrow as pa
    import pyarrow.parquet  # noqa: F401

    import qformats.audit.run  # noqa: F401
    import qformats.audit.summary  # noqa: F401
    import qformats.remote.hub  # noqa: F401

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    threading.stack_size(512 * 1024)
    try:
        ctypes.CDLL(None).mallopt(-8, 2)          # M_ARENA_MAX (glibc malloc.h)
    except (OSError, AttributeError):
        pass
