"""``hf://ORG/REPO[@REV][/FILE]`` through huggingface_hub (the optional extra ``qformats[hub]``; spec/remote.md REMOTE-2).

The hub's own client does what is the hub's: the URI grammar (``parse_hf_uri``), the endpoint (``HF_ENDPOINT``,
read as ``huggingface_hub.constants`` reads it, but at call time), the repository listing pinned to one commit
(``HfApi(endpoint=...).repo_info(..., files_metadata=True)``: names, sizes, the commit sha), the file URLs
(``hf_hub_url``) and the request headers with the user's token (``build_hf_headers``). Its safetensors
metadata helper is not used: ``parse_safetensors_file_metadata`` (huggingface_hub 2.4.0 hf_api.py) decodes the
header with ``errors="ignore"`` and ``json.loads``, so invalid UTF-8 and duplicate keys, which ST-2 rejects,
would pass; the bytes go through qformats' own reader instead (REMOTE-1.2).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from ..containers import checkpoint as ck
from ..errors import QFormatsError, fail
from . import http
from . import RemoteFiles, discover

__all__ = ["open_hub", "endpoint", "pin"]


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise fail("remote.extra.missing", "path", "huggingface_hub installed for hf:// paths: "
                   "pip install 'qformats[hub]'", "huggingface_hub is not installed") from None
    return huggingface_hub


def endpoint() -> str:
    """REMOTE-2.2: ``HF_ENDPOINT`` as huggingface_hub.constants reads it (default https://huggingface.co, one
    trailing slash dropped), read now rather than at import so a process can point at another hub."""
    constants = _hub().constants
    if getattr(constants, "_staging_mode", False):
        return constants.ENDPOINT
    return os.getenv("HF_ENDPOINT", constants._HF_DEFAULT_ENDPOINT).rstrip("/")


def _parse(url: str) -> Any:
    from huggingface_hub.errors import HfUriError
    from huggingface_hub.utils import parse_hf_uri

    try:
        uri = parse_hf_uri(url)
    except HfUriError as err:
        raise fail("remote.url.invalid", "path", "hf://ORG/REPO[@REV][/FILE]", str(err).strip()[:200], file=url) from None
    if uri.type == "bucket":
        raise fail("remote.url.invalid", "path", "a model, dataset or space repository", "a bucket", file=url)
    return uri


def _listing(api: Any, uri: Any, url: str) -> Any:
    """The repository at one commit, 429 retried as the range reader retries (REMOTE-3.4)."""
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    for attempt in range(http.RETRIES + 1):
        try:
            return api.repo_info(uri.id, repo_type=uri.type, revision=uri.revision or "main", files_metadata=True)
        except GatedRepoError:
            raise fail("remote.unauthorized", "path", "a repository this client may read (gated: accept its terms "
                       "and log in with `hf auth login` or set HF_TOKEN)", "HTTP 401/403 (gated)", file=url) from None
        except (RepositoryNotFoundError, RevisionNotFoundError) as err:
            status = getattr(getattr(err, "response", None), "status_code", 404)
            if status in (401, 403):
                raise fail("remote.unauthorized", "path", "a repository this client may read (private or gated: "
                           "`hf auth login` or HF_TOKEN)", f"HTTP {status}", file=url) from None
            what = "revision" if isinstance(err, RevisionNotFoundError) else "repository"
            raise fail("remote.not_found", "path", f"an existing {what}", f"HTTP {status}", file=url) from None
        except HfHubHTTPError as err:
            status = getattr(getattr(err, "response", None), "status_code", None)
            if status in (429, 502, 503, 504) and attempt < http.RETRIES:
                time.sleep(http._delay(attempt, err.response.headers.get("Retry-After")))
                continue
            code = "remote.rate_limited" if status == 429 else "remote.http"
            raise fail(code, "path", "an answer to the repository listing", f"HTTP {status}", file=url) from None
        except QFormatsError:
            raise
        except OSError as err:     # a connection the hub client could not make (OfflineModeIsEnabled is one: HF_HUB_OFFLINE)
            raise fail("remote.http", "path", "an answer from the hub", f"{type(err).__name__}: {err}"[:200],
                       file=url) from None
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            # the hub client building its ModelInfo from an answer no hub writes (REMOTE-2.5): siblings that are
            # not a list of objects, an lfs that is not one, a body that is not JSON
            raise fail("remote.listing.invalid", "path", "a repository listing the hub client can parse",
                       f"{type(err).__name__}: {err}"[:200], file=url) from None
        except Exception as err:  # noqa: BLE001 - the hub client's transport errors (httpx2) share no base we import
            if type(err).__module__.split(".")[0] not in ("httpx2", "httpx", "huggingface_hub"):
                raise
            raise fail("remote.http", "path", "an answer from the hub", f"{type(err).__name__}: {err}"[:200],
                       file=url) from None
    raise AssertionError("unreachable")  # pragma: no cover


_COMMIT = re.compile(r"[0-9A-Za-z._-]{1,128}")
MAX_SIZE = 2**63 - 1


def _invalid(field: str, constraint: str, actual: Any, url: str) -> QFormatsError:
    return fail("remote.listing.invalid", field, constraint, actual, file=url)


def _commit(sha: Any, url: str) -> str | None:
    """REMOTE-2.5: the listed commit, which goes into every file's URL and name, or None when the hub gave none."""
    if sha is not None and not (isinstance(sha, str) and _COMMIT.fullmatch(sha)):
        raise _invalid("sha", "a commit id: 1 to 128 letters, digits, '.', '_' or '-'", sha, url)
    return sha


def _files(info: Any, url: str) -> list[tuple[str, int | None]]:
    """REMOTE-2.5: (path, size) of each listed file, checked before any is read."""
    files: dict[str, int | None] = {}
    for sibling in info.siblings or ():
        name = getattr(sibling, "rfilename", None)
        if not (isinstance(name, str) and all(part not in ("", ".", "..") for part in name.split("/"))):
            raise _invalid("rfilename", "a relative file path ('/'-separated, no empty, '.' or '..' segment)", name,
                           url)
        if name in files:
            raise _invalid("rfilename", "each file listed once", name, url)
        lfs = getattr(sibling, "lfs", None)
        size = getattr(lfs, "size", None) if lfs else sibling.size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SIZE):
            raise _invalid(f"size of {name}", "a size in bytes: an integer from 0 to 2^63 - 1", size, url)
        files[name] = size
    return list(files.items())


def pin(url: str) -> tuple[str, str]:
    """AUDIT-2.1: (the commit an ``hf://`` address names now, the address at that commit), by one listing request.
    Where the listing names no commit, the revision asked (main by default) and the address as given."""
    _hub()
    uri = _parse(url)
    info = _listing(_hub().HfApi(endpoint=endpoint()), uri, url)
    sha = _commit(info.sha, url)
    if sha is None:
        return uri.revision or "main", url
    return sha, f"{_base(uri, sha)}/{uri.path_in_repo}".rstrip("/")


def _base(uri: Any, sha: str) -> str:
    """The repository at one commit as an address: ``hf://[datasets/|spaces/]ORG/REPO@COMMIT``."""
    return f"hf://{'' if uri.type == 'model' else uri.type + 's/'}{uri.id}@{sha}"


def open_hub(url: str) -> ck.Checkpoint:
    """REMOTE-2.1: list the repository (pinned to its commit), then discover the checkpoint as a directory (the
    repository or FILE's folder) or a single FILE, every file read by ranged requests."""
    hub = _hub()
    uri = _parse(url)
    where = endpoint()
    info = _listing(hub.HfApi(endpoint=where), uri, url)
    sha = _commit(info.sha, url) or uri.revision or "main"
    base = _base(uri, sha)
    entries: dict[str, tuple[str, int | None]] = {}
    for name, size in _files(info, url):
        entries[f"{base}/{name}"] = (
            hub.hf_hub_url(uri.id, name, repo_type=uri.type, revision=sha, endpoint=where), size)
    headers = hub.utils.build_hf_headers(library_name="qformats")
    auth = {k: v for k, v in headers.items() if k.lower() == "authorization"}
    io = RemoteFiles(base, entries, headers={k: v for k, v in headers.items() if k not in auth}, auth=auth,
                     revision=sha)
    target = f"{base}/{uri.path_in_repo}".rstrip("/")
    if target == base or any(path.startswith(target + "/") for path in entries):
        return discover(io, lambda: ck._open_dir(target, io=io, path=url))
    if target in entries:
        return discover(io, lambda: ck._open_file(target, io, directory=target.rpartition("/")[0]))
    raise fail("remote.not_found", "path", f"a file or folder of {uri.id}@{sha[:12]}", uri.path_in_repo, file=url)
