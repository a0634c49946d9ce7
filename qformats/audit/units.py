"""Units of an audit (spec/audit.md AUDIT-2): one checkpoint each, keyed by (repo, revision, file, qformats
version, options).

A unit comes from an argument through the first resolver in :data:`RESOLVERS` that claims it: local files
and directories here; remote repositories (``hf://ORG/REPO[@REV][/FILE]``) by ``qformats.remote`` when it
is installed, through :func:`register`. A resolver returns a :class:`Unit` or None (not mine).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import fail

__all__ = ["Unit", "RESOLVERS", "register", "resolve", "read_list", "key_of", "options_json", "unique"]


@dataclass(frozen=True)
class Unit:
    """One checkpoint to audit: ``source`` as given (a path or a URL), ``validate`` given ``pinned`` where set."""

    source: str
    repo: str
    revision: str = ""
    file: str = ""
    bytes: int | None = None      # the unit's size where known without reading it (the progress bar's measure)
    pinned: str = ""              # what validate is given instead of source: an hf:// unit at its key's commit

    def plain(self) -> dict[str, Any]:
        return asdict(self)


Resolver = Callable[[str], "Unit | None"]


def local(arg: str) -> Unit:
    """A local file or directory (any path: one that does not exist is a could-not-run row, CKPT-1.1). A path the
    file system cannot even look at (a name too long, a NUL, ``~user`` of no user) is a unit as written, and its
    run says why (AUDIT-2.1)."""
    try:
        path = Path(arg).expanduser().absolute()
        is_file, is_dir = path.is_file(), path.is_dir()
    except (OSError, ValueError, RuntimeError):
        return Unit(source=arg, repo=arg)
    if is_file:
        return Unit(source=str(path), repo=str(path.parent), file=path.name, bytes=_size(path))
    return Unit(source=str(path), repo=str(path), bytes=_size(path) if is_dir else None)


def _size(path: Path) -> int:
    """Bytes of a file, or of a checkpoint directory's files (not its subdirectories: CKPT-2)."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
    except OSError:
        return 0


def register(resolver: Resolver) -> None:
    """Put ``resolver`` ahead of the local one (a remote source claims ``hf://`` before a path is tried)."""
    if resolver not in RESOLVERS:
        RESOLVERS.insert(0, resolver)


def resolve(arg: str) -> Unit:
    _remote_hook()
    for resolver in RESOLVERS:
        unit = resolver(arg)
        if unit is not None:
            return unit
    return local(arg)


def remote(arg: str) -> Unit | None:
    """``hf://ORG/REPO[@REV][/FILE]`` and ``http(s)://`` URLs (spec/remote.md), keyed without a request: the
    revision as written (empty: the default branch), the size unknown until the unit runs (its row then holds the
    bytes the listing gives). ``validate`` opens them through ``qformats.remote``."""
    if arg.startswith("hf://"):
        org, _, rest = arg[len("hf://"):].partition("/")
        name, _, file = rest.partition("/")
        if org in ("datasets", "spaces"):          # hf://datasets/ORG/REPO...
            owner, _, rest = file.partition("/")
            org, name, file = f"{org}/{name}", owner, rest
        name, _, revision = name.partition("@")
        return Unit(source=arg, repo=f"{org}/{name}", revision=revision, file=file)
    if arg.startswith(("http://", "https://")):
        head, _, name = arg.partition("?")[0].rpartition("/")
        return Unit(source=arg, repo=head, file=name)
    return None


RESOLVERS: list[Resolver] = [remote]


def _remote_hook() -> None:
    """``qformats.remote`` may offer a resolver of its own (``audit_unit(arg) -> Unit | None``, one that pins
    the revision to a commit); it then goes first."""
    try:
        from .. import remote as package
    except ImportError:
        return
    resolver = getattr(package, "audit_unit", None)
    if resolver is not None:
        register(resolver)


MAX_LIST_BYTES = 64 << 20      # AUDIT-2.2: about 600,000 hf:// addresses


def read_list(path: str) -> list[str]:
    """AUDIT-2.2: units one per line; blank lines and ``#`` comments skipped. A regular file of at most
    :data:`MAX_LIST_BYTES`, its size checked before it is read: /dev/zero as the list grew without bound and a FIFO
    blocked (both found by the fuzz)."""
    from ..containers.source import FileSource

    try:
        source = FileSource(path)                 # stat, and a regular file only: nothing is opened before
    except (OSError, ValueError) as exc:          # ValueError: a NUL in the path
        raise fail("audit.list.unreadable", "list", "a readable UTF-8 file of units, one per line",
                   f"{type(exc).__name__}: {exc}", file=path) from None
    if source.size > MAX_LIST_BYTES:
        raise fail("audit.list.unreadable", "list", f"a list of at most {MAX_LIST_BYTES} bytes", source.size,
                   file=path)
    try:
        text = source.read(0, source.size).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail("audit.list.unreadable", "list", "a readable UTF-8 file of units, one per line",
                   f"{type(exc).__name__}: {exc}", file=path) from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def options_json(options: dict[str, Any]) -> str:
    return json.dumps(options, sort_keys=True, separators=(",", ":"))


def key_of(unit: Unit, options: dict[str, Any]) -> dict[str, str]:
    """AUDIT-2.1: the key fields, and ``key``: a hash of them that names the unit's part file."""
    fields = {"repo": unit.repo, "revision": unit.revision, "file": unit.file, "qformats_version": __version__,
              "options": options_json(options)}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:24]
    return {"key": digest, **fields}


def unique(units: list[Unit], options: dict[str, Any]) -> list[Unit]:
    """Units in order, each key once (two spellings of one path are one unit)."""
    seen: dict[str, Unit] = {}
    for unit in units:
        seen.setdefault(key_of(unit, options)["key"], unit)
    return list(seen.values())
