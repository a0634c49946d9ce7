"""Remote checkpoints: ``hf://ORG/REPO[@REV][/FILE]`` and ``http(s)://`` URLs of single files (spec/remote.md).

The container readers read through a byte source (:mod:`qformats.containers.source`); this package supplies
the remote ones and the listing a checkpoint directory needs, beside the containers and never inside a
format::

    with open_remote("hf://TheBloke/Llama-2-7B-GPTQ") as ckpt:   # headers, index, configs fetched
        ckpt.io.traffic.bytes                                    # body bytes received so far
        ckpt.tensor("model.layers.0.self_attn.q_proj.qweight")    # fetched now, by ranged requests

``open_checkpoint`` dispatches here for these schemes, so ``validate`` and ``inspect`` take the same paths.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..containers import checkpoint as ck
from ..containers import safetensors as st
from ..errors import QFormatsError, fail
from .http import HttpRangeSource, Traffic

__all__ = ["open_remote", "is_remote", "discover", "RemoteFiles", "HttpRangeSource", "Traffic"]


def is_remote(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(ck.REMOTE_SCHEMES)


class RemoteFiles(ck.Files):
    """REMOTE-1.4: a checkpoint's files over HTTP. ``entries``: path -> (url, size or None); a path's size comes
    from the listing (hf://) or ``HEAD`` (a plain URL). Reads are counted in :attr:`traffic`."""

    remote = True

    def __init__(self, base: str, entries: dict[str, tuple[str, int | None]], *, headers: dict[str, str] | None = None,
                 auth: dict[str, str] | None = None, revision: str | None = None, listed: bool = True) -> None:
        self.base = base
        self.revision = revision
        self.traffic = Traffic()
        self._entries = dict(entries)
        self._headers, self._auth = headers or {}, auth or {}
        self._listed = listed          # hf://: the listing is the repository's; a plain URL knows its file only
        self._sources: dict[str, HttpRangeSource] = {}

    def source(self, path: str) -> HttpRangeSource:
        if path not in self._sources:
            if path not in self._entries:
                raise self.traffic.keep(fail("remote.not_found", None, "a file of the repository listing",
                                             "not listed", file=path))
            url, size = self._entries[path]
            self._sources[path] = HttpRangeSource(url, name=path, size=size, traffic=self.traffic,
                                                  headers=self._headers, auth=self._auth)
            self._entries[path] = (url, self._sources[path].size)    # HEAD's, where the listing had none
        return self._sources[path]

    # -- ck.Files ---------------------------------------------------------------------------------------------
    def listing(self, directory: str) -> dict[str, str]:
        prefix = directory.rstrip("/") + "/"
        return {p[len(prefix):]: p for p in sorted(self._entries)
                if p.startswith(prefix) and "/" not in p[len(prefix):]}

    def join(self, directory: str, name: str) -> str:
        return f"{directory.rstrip('/')}/{name}"

    def read_small(self, path: str, code: str) -> bytes:
        src = self.source(path)
        if src.size > ck.MAX_JSON_SIZE:          # CKPT-3.1/4.2's cap, before any byte is fetched
            raise fail(code, path.rpartition("/")[2], f"at most {ck.MAX_JSON_SIZE} bytes", src.size, file=path)
        return src.read(0, src.size)

    def header(self, path: str) -> st.SafetensorsHeader:
        return st.read_header_source(self.source(path))

    def gguf(self, path: str) -> Any:
        from ..containers import gguf

        return gguf.read_gguf_source(self.source(path))

    def sniff(self, path: str) -> bytes:
        src = self.source(path)
        return src.read(0, min(16, src.size))

    def check_exists(self, path: str, absent: tuple[str, ...] = ("remote.not_found",)) -> bool:
        """Listed (hf://), or for a plain URL's sibling (a shard its index names, a config) a HEAD that is not
        an error in ``absent`` (404: absent; any other failure stays could-not-run)."""
        if path in self._entries or self._listed:
            return path in self._entries
        try:
            self._sources[path] = HttpRangeSource(path, name=path, traffic=self.traffic, headers=self._headers)
        except QFormatsError as err:
            if err.code in absent:
                self.traffic.failure = None if self.traffic.failure is err else self.traffic.failure
                return False
            raise
        self._entries[path] = (path, self._sources[path].size)
        return True

    def tensor(self, header: st.SafetensorsHeader, name: str) -> Any:
        return st.open_tensor(header, name, source=self.source(header.path))

    def subfolders(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        found = {p[len(prefix):].split("/")[0] for p in self._entries
                 if p.startswith(prefix) and p.count("/") > prefix.count("/") and p.endswith((".safetensors", ".gguf"))}
        return sorted(found)

    def raise_failure(self) -> None:
        """REMOTE-3.8: a read that failed inside a format's checks is could-not-run, whatever the check made of it."""
        if self.traffic.failure is not None:
            raise self.traffic.failure

    def summary(self) -> dict[str, Any]:
        sizes = [size for _, size in self._entries.values() if size is not None]
        return {"url": self.base, "revision": self.revision, "files": len(self._entries),
                "bytes_listed": sum(sizes), "bytes_fetched": self.traffic.bytes, "requests": self.traffic.requests}


def discover(io: RemoteFiles, opener: Callable[[], ck.Checkpoint]) -> ck.Checkpoint:
    """Checkpoint discovery over ``io``: a failed read is the error, whatever discovery made of it (REMOTE-3.8);
    a finding about the checkpoint carries what was fetched (``err.remote``, REMOTE-4.3)."""
    try:
        return opener()
    except QFormatsError as err:
        io.raise_failure()
        err.remote = io.summary()
        raise


def audit_unit(arg: str) -> Any:
    """The audit's resolver for ``hf://`` units (spec/audit.md AUDIT-2.1): the revision pinned to the commit the
    hub lists now, so ``--resume`` re-runs a repository that changed since, and the unit validated at that commit
    (``pinned``), so its row describes the commit its key names even if the branch moves before the unit runs.
    When the listing fails the unit keeps the revision as written and its run records the could-not-run error."""
    if not str(arg).startswith("hf://"):
        return None
    import dataclasses

    from ..audit.units import remote
    from .hub import pin

    unit = remote(arg)
    try:
        revision, pinned = pin(arg)
    except QFormatsError:
        return unit
    return dataclasses.replace(unit, revision=revision, pinned=pinned if pinned != arg else "")


def open_remote(url: str) -> ck.Checkpoint:
    """REMOTE-2: a checkpoint at ``hf://ORG/REPO[@REV][/FILE]`` (through huggingface_hub) or an http(s) URL of
    one file (``.safetensors``, ``.gguf`` or a ``*.safetensors.index.json`` whose shards sit beside it)."""
    if url.startswith("hf://"):
        from .hub import open_hub

        return open_hub(url)
    head, _, name = url.partition("?")[0].rpartition("/")
    if not name or head.endswith(":/") or head.endswith(":"):
        raise fail("remote.url.invalid", "path", "an http(s) URL of one file (https://HOST/PATH/FILE)", url, file=url)
    io = RemoteFiles(head, {url: (url, None)}, listed=False)
    io.source(url)                                  # HEAD: the size, or the could-not-run error now
    for config, _ in ck.CONFIG_FILES:               # CKPT-2.1: the configs beside a file count, as on disk;
        io.check_exists(f"{head}/{config}", ("remote.not_found", "remote.unauthorized"))   # (S3 says 403)
    return discover(io, lambda: ck._open_file(url, io, directory=head))
