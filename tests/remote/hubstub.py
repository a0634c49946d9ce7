"""A Hugging Face Hub stand-in on 127.0.0.1 (spec/remote.md REMOTE-2, REMOTE-3): the routes huggingface_hub 2.4.0
calls for ``HfApi.repo_info(files_metadata=True)`` and the ``resolve`` file route with Range / 206 / Content-Range,
served by a real ``http.server.ThreadingHTTPServer``. Per-file faults make the negative servers.

Routes (as huggingface_hub builds them, hf_api.py ``model_info`` and file_download.py ``hf_hub_url``):
``GET /api/models/{org}/{name}/revision/{rev}?blobs=true`` -> ``{id, sha, siblings: [{rfilename, size, blobId,
lfs}]}``; ``HEAD|GET /{org}/{name}/resolve/{rev}/{path}`` with ``ETag``, ``X-Repo-Commit``, ``Content-Length``,
``Accept-Ranges`` and, for weight files (stored in LFS on the hub), ``X-Linked-Size`` and ``X-Linked-Etag``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".gguf")
_RANGE = re.compile(r"bytes=(\d+)-(\d+)$")


@dataclass
class Faults:
    """Negative servers, per file name (the path inside the repository)."""

    ignore_range: set[str] = field(default_factory=set)      # answer 200 with the whole body
    status: dict[str, int] = field(default_factory=dict)     # answer this status (404, 401, 403, 500)
    too_many: dict[str, int] = field(default_factory=dict)   # answer 429 (Retry-After: 0) this many times first
    truncate: dict[str, int] = field(default_factory=dict)   # send this many body bytes, then close
    content_range_total: dict[str, int] = field(default_factory=dict)  # lie about the size in Content-Range
    listed_size: dict[str, int] = field(default_factory=dict)          # lie about the size in the listing
    api_status: dict[str, int] = field(default_factory=dict)           # repo id -> status of the API route
    fail_after: dict[str, int] = field(default_factory=dict)  # answer 500 after this many good ranged GETs
    listing: dict[str, tuple[str, object]] = field(default_factory=dict)  # a hub or mirror answering nonsense:
    # path -> (key, value) set in that file's listing entry ("lfs.size" inside its lfs object); "*" -> (key,
    # value) set on the listing document itself


class Hub:
    """Repositories ``{repo_id: {path: bytes}}`` and what was served: body bytes per (repo, path)."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: dict[str, str] = {}
        self.snapshots: dict[tuple[str, str], dict[str, bytes]] = {}   # (repo, old commit) -> its files, after push
        self.faults = Faults()
        self.sent: dict[tuple[str, str], int] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def start(self) -> Hub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- content ----------------------------------------------------------------------------------------------
    def add_dir(self, repo: str, directory: Path) -> str:
        self.repos[repo] = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}
        return repo

    def add_files(self, repo: str, files: dict[str, bytes]) -> str:
        self.repos[repo] = dict(files)
        return repo

    def add_paths(self, repo: str, directory: Path) -> str:
        """Files served from disk (benchmarks/remote.py: a checkpoint too large to hold in memory)."""
        self.repos[repo] = {p.name: _OnDisk(p) for p in sorted(directory.iterdir()) if p.is_file()}
        return repo

    def sha(self, repo: str) -> str:
        """The repository's commit: a hash of its name, or of its name and files after :meth:`commit`."""
        return self.commits.get(repo) or hashlib.sha1(repo.encode()).hexdigest()

    def commit(self, repo: str) -> str:
        """A new commit of ``repo`` (its files as they are now): the sha changes, as the hub's would."""
        digest = hashlib.sha1(repo.encode())
        for name, data in sorted(self.repos[repo].items()):
            digest.update(name.encode() + bytes(data[:]))
        self.commits[repo] = digest.hexdigest()
        return self.commits[repo]

    def push(self, repo: str, files: dict[str, bytes]) -> str:
        """A new commit of ``repo`` holding ``files``: the branch names it, and the old commit stays readable at its
        sha (listing and files), as on the hub."""
        self.snapshots[repo, self.sha(repo)] = self.repos[repo]
        self.repos[repo] = dict(files)
        return self.commit(repo)

    def at(self, repo: str, revision: str | None) -> tuple[str, dict[str, bytes]]:
        """(commit, files) a revision names: an old commit kept by :meth:`push`, else (a branch) the latest."""
        if (repo, revision) in self.snapshots:
            return revision, self.snapshots[repo, revision]
        return self.sha(repo), self.repos.get(repo, {})

    def url(self, repo: str, path: str) -> str:
        return f"{self.endpoint}/{repo}/resolve/main/{path}"

    def served(self, repo: str | None = None) -> int:
        """Body bytes sent for file routes (of one repository, or all)."""
        with self._lock:
            return sum(n for (r, _), n in self.sent.items() if repo is None or r == repo)

    def reset(self) -> None:
        with self._lock:
            self.sent.clear()
            self.requests.clear()

    def count(self, repo: str, path: str, n: int) -> None:
        with self._lock:
            self.sent[repo, path] = self.sent.get((repo, path), 0) + n


class _OnDisk:
    """A file's bytes sliced from disk, as ``bytes`` slices are (``len``, ``[a:b]``)."""

    def __init__(self, path: Path) -> None:
        self.path, self.size = path, path.stat().st_size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(self.size)
        with open(self.path, "rb") as fh:
            fh.seek(start)
            return fh.read(stop - start)


def _digest(data: bytes | _OnDisk, algorithm=hashlib.sha1) -> str:
    """Of the bytes; of the name for a file on disk (the benchmark's are too large to hash on every listing)."""
    return algorithm(data.path.name.encode() if isinstance(data, _OnDisk) else data).hexdigest()


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out as separate writes; with Nagle on, the body waits for the client's delayed
        # ACK (40 ms on Linux) and a checkpoint's dozen requests take half a second
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._route(head=True)

        def do_GET(self) -> None:
            self._route(head=False)

        # -- routing -------------------------------------------------------------------------------------------
        def _route(self, head: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append((self.command, path, self.headers.get("Range")))
            api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/(.+))?", path)
            if api:
                return self._api(api[1], api[2])
            res = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if res and res[1] in hub.repos and res[3] in hub.at(res[1], res[2])[1]:
                return self._file(res[1], res[2], res[3], head)
            return self._plain(404, {"X-Error-Code": "EntryNotFound"})

        def _plain(self, status: int, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body and self.command != "HEAD":
                self.wfile.write(body)

        def _api(self, repo: str, revision: str | None) -> None:
            status = hub.faults.api_status.get(repo)
            if status is not None:
                code = "GatedRepo" if status in (401, 403) else "RepoNotFound"
                return self._plain(status, {"X-Error-Code": code, "X-Error-Message": "stand-in"}, b"{}")
            if repo not in hub.repos:
                return self._plain(404, {"X-Error-Code": "RepoNotFound"}, b"{}")
            sha, files = hub.at(repo, revision)
            siblings = []
            for name, data in sorted(files.items()):
                size = hub.faults.listed_size.get(name, len(data))
                entry = {"rfilename": name, "size": size, "blobId": _digest(data)}
                if name.endswith(LFS_SUFFIXES):
                    entry["lfs"] = {"size": size, "sha256": _digest(data, hashlib.sha256), "pointerSize": 134}
                siblings.append(entry)
            doc = {"id": repo, "modelId": repo, "sha": sha, "private": False, "siblings": siblings}
            for name, (key, value) in hub.faults.listing.items():
                for entry in [doc] if name == "*" else [e for e in siblings if e["rfilename"] == name]:
                    if key == "lfs.size":
                        entry.setdefault("lfs", {})["size"] = value
                    else:
                        entry[key] = value
            body = json.dumps(doc).encode()
            self._plain(200, {"Content-Type": "application/json"}, body)

        def _file(self, repo: str, revision: str, name: str, head: bool) -> None:
            sha, files = hub.at(repo, revision)
            data = files[name]
            faults = hub.faults
            if name in faults.status:
                return self._plain(faults.status[name])
            if faults.too_many.get(name, 0) > 0:
                faults.too_many[name] -= 1
                return self._plain(429, {"Retry-After": "0"})
            headers = {"ETag": f'"{_digest(data)}"', "X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
            if name.endswith(LFS_SUFFIXES):
                headers["X-Linked-Size"] = str(len(data))
                headers["X-Linked-Etag"] = f'"{_digest(data)}"'
            wanted = _RANGE.fullmatch(self.headers.get("Range", "").strip())
            if wanted and name in faults.fail_after:
                if faults.fail_after[name] <= 0:
                    return self._plain(500)
                faults.fail_after[name] -= 1
            if head or wanted is None or name in faults.ignore_range:
                return self._body(repo, name, 200, headers, data, head)
            start, end = int(wanted[1]), min(int(wanted[2]), len(data) - 1)
            if start >= len(data):
                return self._plain(416, {"Content-Range": f"bytes */{len(data)}"})
            total = faults.content_range_total.get(name, len(data))
            headers["Content-Range"] = f"bytes {start}-{end}/{total}"
            self._body(repo, name, 206, headers, data[start:end + 1], head)

        def _body(self, repo: str, name: str, status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if head:
                return
            limit = hub.faults.truncate.get(name, len(body))
            try:
                for i in range(0, min(limit, len(body)), 1 << 16):
                    chunk = body[i:min(i + (1 << 16), limit)]
                    hub.count(repo, name, len(chunk))   # before the write: the client may be done before after it
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):
                return
            if limit < len(body):
                self.close_connection = True

    return Handler
