"""An HTTP range reader: a byte source whose every ``read(offset, n)`` is ranged GETs (spec/remote.md REMOTE-3).

Why the standard library and not the hub client for the bytes: the reader must see the status line and
``Content-Range`` of every answer before it takes the body, abort a ``200`` (a server that ignores ``Range``
would otherwise stream the whole shard), and read exactly ``n`` bytes into a buffer it sized from the
validated header. ``urllib`` gives that control, follows the hub's redirects to its CDN keeping ``Range``
(CPython ``HTTPRedirectHandler.redirect_request`` drops only the content headers), and never sends the token
past a redirect (it is an unredirected header).

Every failure is a could-not-run ``remote.*`` error (REMOTE-3): 404, 401/403, 429 after bounded retries with
backoff, other statuses, no ``206``/matching ``Content-Range``, a short body, a size that disagrees with the
listing or ``Content-Length``. The first one is also kept in :attr:`Traffic.failure`, so a format check that
turns errors into findings cannot hide it: the validator raises it after the run (REMOTE-3.8).
"""

from __future__ import annotations

import http.client
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from ..containers.source import check_read
from ..errors import QFormatsError, fail

__all__ = ["HttpRangeSource", "Traffic", "CHUNK_BYTES", "RETRIES"]

CHUNK_BYTES = 1 << 26        # one request reads at most 64 MiB; a larger read is several requests
RETRIES = 4                  # 429 and 502/503/504: tries after the first, then remote.rate_limited / remote.http
BACKOFF_S = 0.5              # the k-th retry waits BACKOFF_S * 2**k seconds, or Retry-After if given
MAX_WAIT_S = 30.0            # ... never longer than this per retry
TIMEOUT_S = 60.0             # per connect and per socket read
_RETRY_STATUS = frozenset({429, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
_OPENER = urllib.request.build_opener()


@dataclass
class Traffic:
    """What one checkpoint's reads cost: body bytes received, requests made, and the ranges read per file."""

    bytes: int = 0
    requests: int = 0
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    failure: QFormatsError | None = None

    def keep(self, err: QFormatsError) -> QFormatsError:
        if self.failure is None:
            self.failure = err
        return err


class HttpRangeSource:
    """One remote file of ``size`` bytes (from the listing; else ``HEAD``'s ``Content-Length``).

    ``headers`` go with every request (the user agent); ``auth`` only to the first host (a token).
    """

    def __init__(self, url: str, *, name: str | None = None, size: int | None = None, traffic: Traffic | None = None,
                 headers: dict[str, str] | None = None, auth: dict[str, str] | None = None) -> None:
        self.url = url
        self.name = name or url
        self.traffic = traffic if traffic is not None else Traffic()
        self._headers = dict(headers or {})
        self._auth = dict(auth or {})
        self.size = size if size is not None else self._head_size()

    # -- requests ------------------------------------------------------------------------------------------
    def _open(self, method: str, extra: dict[str, str]) -> http.client.HTTPResponse:
        """One request, retried on 429/502/503/504 (bounded, with backoff); error statuses as remote.* codes."""
        for attempt in range(RETRIES + 1):
            self.traffic.requests += 1
            try:
                req = urllib.request.Request(self.url, headers={**self._headers, **extra}, method=method)
                for key, value in self._auth.items():
                    req.add_unredirected_header(key, value)
                return _OPENER.open(req, timeout=TIMEOUT_S)
            except urllib.error.HTTPError as err:
                status, wait = err.code, err.headers.get("Retry-After") if err.headers else None
                err.close()                                  # the error body is never read
                if status in _RETRY_STATUS and attempt < RETRIES:
                    time.sleep(_delay(attempt, wait))
                    continue
                raise self._status_error(status, attempt) from None
            except (ValueError, http.client.InvalidURL) as err:
                # urllib/http.client on a URL they cannot send, given or in a redirect's Location (REMOTE-2.1): a bad
                # IPv6 host (ValueError), a space or control character (InvalidURL), non-ASCII (UnicodeEncodeError)
                raise self.traffic.keep(fail("remote.url.invalid", None, "an http(s) URL of ASCII characters without "
                                             "spaces (percent-encode others)", f"{type(err).__name__}: {err}"[:200],
                                             file=self.name)) from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                reason = getattr(err, "reason", err)
                raise self.traffic.keep(fail("remote.http", None, "an answer from the server",
                                             f"{type(err).__name__}: {reason}"[:200], file=self.name)) from None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _status_error(self, status: int, retries: int) -> QFormatsError:
        if status == 404:
            err = fail("remote.not_found", None, "a file that exists at this address", "HTTP 404", file=self.name)
        elif status in (401, 403):
            err = fail("remote.unauthorized", None, "a file this client may read (a gated or private repository "
                       "needs a token: `hf auth login` or HF_TOKEN)", f"HTTP {status}", file=self.name)
        elif status == 429:
            err = fail("remote.rate_limited", None, f"an answer within {retries + 1} tries", "HTTP 429 each time",
                       file=self.name)
        else:
            err = fail("remote.http", None, "HTTP 206 (or 200 for HEAD)", f"HTTP {status}", file=self.name)
        return self.traffic.keep(err)

    def _head_size(self) -> int:
        """REMOTE-3.7: the size of a file the listing did not give, from ``HEAD`` (``X-Linked-Size`` first, as
        huggingface_hub reads it for LFS files, else ``Content-Length``)."""
        with self._open("HEAD", {"Accept-Encoding": "identity"}) as resp:
            value = resp.headers.get("X-Linked-Size") or resp.headers.get("Content-Length")
        if value is None or not value.strip().isdigit():
            raise self.traffic.keep(fail("remote.size_mismatch", None, "a HEAD answer with Content-Length",
                                         repr(value), file=self.name))
        return int(value)

    # -- the byte-source call --------------------------------------------------------------------------------
    def read(self, offset: int, n: int) -> bytes:
        """Exactly ``n`` bytes at ``offset``: bounds checked first (REMOTE-1.1), then ranged GETs of at most
        :data:`CHUNK_BYTES` each."""
        check_read(self, offset, n)
        parts = [self._get(start, min(CHUNK_BYTES, offset + n - start)) for start in range(offset, offset + n,
                                                                                          CHUNK_BYTES)]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _get(self, offset: int, n: int) -> bytes:
        end = offset + n - 1
        with self._open("GET", {"Range": f"bytes={offset}-{end}", "Accept-Encoding": "identity"}) as resp:
            got = resp.headers.get("Content-Range")
            match = _CONTENT_RANGE.fullmatch(got.strip()) if got else None
            if resp.status != 206 or match is None or (int(match[1]), int(match[2])) != (offset, end):
                # REMOTE-3.1: closed before the body is read, so a whole shard is never streamed
                raise self.traffic.keep(fail(
                    "remote.range.ignored", None, f"HTTP 206 with Content-Range bytes {offset}-{end}/{self.size}",
                    f"HTTP {resp.status} with Content-Range {got!r}; aborted before the body", file=self.name))
            if int(match[3]) != self.size:
                raise self.traffic.keep(fail("remote.size_mismatch", None, f"a file of {self.size} bytes (as listed)",
                                             f"Content-Range says {int(match[3])} bytes", file=self.name))
            data = _read_exact(resp, n)
        self.traffic.bytes += len(data)
        self.traffic.ranges.setdefault(self.name, []).append((offset, len(data)))
        if len(data) != n:
            raise self.traffic.keep(fail("remote.short_read", None, f"{n} bytes at offset {offset}",
                                         f"{len(data)} bytes before the body ended", file=self.name))
        return data


def _read_exact(resp: http.client.HTTPResponse, n: int) -> bytes:
    """Up to ``n`` bytes of the body, fewer only when it ends early; never more than asked."""
    chunks, got = [], 0
    while got < n:
        try:
            chunk = resp.read(min(n - got, 1 << 20))
        except http.client.IncompleteRead as short:
            chunk = short.partial
            chunks.append(chunk)
            got += len(chunk)
            break
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _delay(attempt: int, retry_after: str | None) -> float:
    """REMOTE-3.4: Retry-After seconds when the server gives them, else exponential backoff; capped."""
    if retry_after and retry_after.strip().isdigit():
        return min(float(retry_after), MAX_WAIT_S)
    return min(BACKOFF_S * 2 ** attempt, MAX_WAIT_S)
