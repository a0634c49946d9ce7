"""Tests with teeth for the hf:// client and the HTTP range reader (spec/remote.md REMOTE-2, REMOTE-3; issue 33).

Each test pins one behaviour and asserts the whole refusal (code, tensor, constraint, actual value, file). Expected
values are worked by hand from spec/remote.md, read from the hub stand-in's own request log (``hub.requests``,
``hub.served()``, or :func:`intercept`'s log of raw requests with their headers), or taken from the standard library
and huggingface_hub (the messages they raise); never from the reader under test. Waits are recorded by a
monkeypatched ``time.sleep``: nothing here sleeps for real.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import urllib.parse
from pathlib import Path

import pytest

from qformats.errors import QFormatsError
from qformats.remote import http as rhttp
from qformats.remote import hub as rhub
from qformats.validate import validate

from .hubstub import Hub

CKPTS = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
GPTQ = CKPTS / "gptq_v1_sym_4bit"


# -- helpers ----------------------------------------------------------------------------------------------------

def whole(err: QFormatsError) -> tuple:
    return err.code, err.tensor, err.constraint, err.actual, err.file


def refused(call) -> QFormatsError:
    with pytest.raises(QFormatsError) as info:
        call()
    return info.value


def intercept(hub: Hub, answer=None) -> list:
    """Log every request the stand-in gets (method, raw path, headers); ``answer(handler)`` may answer one itself
    (returning True), for server behaviours the stand-in has no fault for. The stand-in's routing is untouched."""
    log = []

    class Intercepted(hub.server.RequestHandlerClass):
        def _route(self, head):
            log.append((self.command, self.path, self.headers))
            if not (answer and answer(self)):
                super()._route(head)

    hub.server.RequestHandlerClass = Intercepted
    return log


def answer_raw(handler, status: int, headers: dict[str, str], body: bytes = b"") -> bool:
    """An answer with exactly these headers (the stand-in's own always adds Content-Length)."""
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.end_headers()
    try:
        if body and handler.command != "HEAD":
            handler.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):      # a client that took what it asked and closed
        pass
    return True


@pytest.fixture
def waits(monkeypatch):
    """REMOTE-3.4's waits, recorded instead of slept, with the spec's backoff (the hub fixture shortens it)."""
    slept = []
    monkeypatch.setattr(rhttp.time, "sleep", slept.append)
    monkeypatch.setattr(rhttp, "BACKOFF_S", 0.5)
    return slept


def api_requests(hub: Hub) -> list[str]:
    return [p for m, p, _ in hub.requests if p.startswith("/api/")]


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with fixed bytes and closes it (for answers
    http.server cannot send: a bad status line, a chunked body cut short)."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/f.bin"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


# -- REMOTE-2.1: addresses ------------------------------------------------------------------------------------------

def test_unparsable_address_names_huggingface_hubs_reason(hub):
    """REMOTE-2.1: an address parse_hf_uri refuses is remote.url.invalid with its message, stripped (this one ends
    in a space)."""
    from huggingface_hub.errors import HfUriError
    from huggingface_hub.utils import parse_hf_uri

    with pytest.raises(HfUriError) as theirs:
        parse_hf_uri("hf://org")
    assert str(theirs.value).endswith(" ")
    err = refused(lambda: validate("hf://org"))
    assert whole(err) == ("remote.url.invalid", "path", "hf://ORG/REPO[@REV][/FILE]", str(theirs.value).strip(),
                          "hf://org")
    assert hub.requests == []


def test_unparsable_long_address_is_cut_to_200_characters(hub):
    """REMOTE-2.1: the hub client's message quotes the address; the error keeps its first 200 characters."""
    from huggingface_hub.errors import HfUriError
    from huggingface_hub.utils import parse_hf_uri

    url = "hf://" + "a" * 300
    with pytest.raises(HfUriError) as theirs:
        parse_hf_uri(url)
    err = refused(lambda: validate(url))
    assert len(str(theirs.value).strip()) > 200
    assert whole(err) == ("remote.url.invalid", "path", "hf://ORG/REPO[@REV][/FILE]",
                          str(theirs.value).strip()[:200], url)


def test_bucket_address_is_refused_before_any_request(hub):
    """REMOTE-2.1: parse_hf_uri takes buckets; qformats reads repositories only."""
    err = refused(lambda: validate("hf://buckets/org/x"))
    assert whole(err) == ("remote.url.invalid", "path", "a model, dataset or space repository", "a bucket",
                          "hf://buckets/org/x")
    assert hub.requests == []


def test_no_revision_lists_main(hub):
    """REMOTE-2.1: the revision defaults to main (the listing route huggingface_hub builds for it)."""
    repo = hub.add_dir("org/gptq", GPTQ)
    validate(f"hf://{repo}")
    assert api_requests(hub) == ["/api/models/org/gptq/revision/main"]


def test_listing_asks_for_file_sizes(hub):
    """REMOTE-2.1: the listing is asked with files_metadata=True (``?blobs=true``), so no file needs a HEAD."""
    repo = hub.add_dir("org/gptq", GPTQ)
    log = intercept(hub)
    validate(f"hf://{repo}")
    assert [p for m, p, _ in log if p.startswith("/api/")] == ["/api/models/org/gptq/revision/main?blobs=true"]
    assert [m for m, _, _ in log if m == "HEAD"] == []


def _serve_datasets_as_models(hub: Hub) -> list:
    """The stand-in serves model routes only: map huggingface_hub's dataset routes onto them, logging the raw path."""
    def rewrite(handler):
        handler.path = re.sub(r"^/datasets/", "/", re.sub(r"^/api/datasets/", "/api/models/", handler.path))
        return False
    return intercept(hub, rewrite)


def test_dataset_files_are_named_and_fetched_as_dataset_files(hub):
    """REMOTE-2.1: a datasets/ repository is listed and read by its own routes, its files named hf://datasets/..."""
    repo = hub.add_dir("org/ds", GPTQ)
    log = _serve_datasets_as_models(hub)
    report = validate(f"hf://datasets/{repo}")
    sha = hub.sha(repo)
    assert report.summary["remote"]["url"] == f"hf://datasets/{repo}@{sha}"
    paths = [p for _, p, _ in log]
    assert paths[0] == f"/api/datasets/{repo}/revision/main?blobs=true"
    assert paths[1:] and all(p.startswith(f"/datasets/{repo}/resolve/{sha}/") for p in paths[1:])


def test_dataset_file_missing_is_named_with_its_prefix(hub):
    """REMOTE-2.1: the not-found message names the repository id, the file as asked."""
    repo = hub.add_dir("org/ds", GPTQ)
    _serve_datasets_as_models(hub)
    err = refused(lambda: validate(f"hf://datasets/{repo}/nope.safetensors"))
    assert whole(err) == ("remote.not_found", "path", f"a file or folder of {repo}@{hub.sha(repo)[:12]}",
                          "nope.safetensors", f"hf://datasets/{repo}/nope.safetensors")


def test_a_folder_of_the_repository_is_read_as_a_directory(hub):
    """REMOTE-2.1: hf://ORG/REPO/FOLDER reads that folder as the local folder is read (a name ending in X: only a
    trailing '/' is dropped from the address)."""
    files = {f"subX/{p.name}": p.read_bytes() for p in GPTQ.iterdir() if p.is_file()}
    repo = hub.add_files("org/nested", {**files, "config.json": b"{}"})
    report = validate(f"hf://{repo}/subX/")
    local = validate(str(GPTQ))
    assert (report.verdict, [f.code for f in report.findings]) == (local.verdict, [f.code for f in local.findings])
    assert sorted(p.rsplit("/", 1)[1] for _, p, _ in hub.requests if "/resolve/" in p) == \
        ["config.json", "model.safetensors", "model.safetensors"]
    assert all(f"/resolve/{hub.sha(repo)}/subX/" in p for _, p, _ in hub.requests if "/resolve/" in p)


def test_a_name_prefix_of_a_folder_is_not_that_folder(hub):
    """REMOTE-2.1: hf://ORG/REPO/su names no file or folder when only sub/ exists."""
    repo = hub.add_files("org/nested", {f"sub/{p.name}": p.read_bytes() for p in GPTQ.iterdir() if p.is_file()})
    err = refused(lambda: validate(f"hf://{repo}/su"))
    assert whole(err) == ("remote.not_found", "path", f"a file or folder of {repo}@{hub.sha(repo)[:12]}", "su",
                          f"hf://{repo}/su")


def test_a_file_of_the_repository_finds_the_config_beside_it(hub):
    """REMOTE-2.1: hf://ORG/REPO/FILE is that file, its folder the repository (CKPT-2.1: config.json beside it)."""
    repo = hub.add_dir("org/gptq", GPTQ)
    report = validate(f"hf://{repo}/model.safetensors")
    local = validate(str(GPTQ / "model.safetensors"), sample=0)
    assert (report.format, report.verdict, report.layers) == (local.format, local.verdict, local.layers)
    assert ("GET", "/org/gptq/resolve/%s/config.json" % hub.sha(repo), "bytes=0-%d" % (
        len(hub.repos[repo]["config.json"]) - 1)) in hub.requests


# -- REMOTE-2.2: the endpoint and the token ------------------------------------------------------------------------

def test_endpoint_drops_trailing_slashes_at_call_time(monkeypatch):
    """REMOTE-2.2: HF_ENDPOINT read now, every trailing slash dropped (str.rstrip, as huggingface_hub does)."""
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example:8080//")
    assert rhub.endpoint() == "http://mirror.example:8080"


def test_endpoint_keeps_the_rest_of_its_path(monkeypatch):
    """REMOTE-2.2: only slashes are dropped (a mirror under a path ending in X keeps it)."""
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example/HFX/")
    assert rhub.endpoint() == "https://mirror.example/HFX"


def test_endpoint_defaults_to_huggingface_co(monkeypatch):
    """REMOTE-2.2: no HF_ENDPOINT: the public hub."""
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert rhub.endpoint() == "https://huggingface.co"


def test_endpoint_in_staging_mode_is_the_staging_hub(monkeypatch):
    """REMOTE-2.2: huggingface_hub in staging mode (HUGGINGFACE_CO_STAGING at its import) talks to hub-ci."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "_staging_mode", True)
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub-ci.huggingface.co")
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.example")
    assert rhub.endpoint() == "https://hub-ci.huggingface.co"


def test_token_goes_to_the_hub_and_never_past_a_redirect(hub, monkeypatch):
    """REMOTE-2.2: the hub's token is sent to the hub (listing and file reads) and not to the CDN it redirects
    weight files to; the user agent (huggingface_hub's, library qformats) goes to both."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False)
    monkeypatch.setenv("HF_TOKEN", "hf_teeth")
    cdn = Hub().start()
    try:
        repo = hub.add_dir("org/gptq", GPTQ)
        cdn.add_dir(repo, GPTQ)
        weights = f"/{repo}/resolve/{hub.sha(repo)}/model.safetensors"

        def to_cdn(handler):
            return handler.path == weights and answer_raw(handler, 302, {"Location": cdn.endpoint + weights,
                                                                        "Content-Length": "0"})
        at_hub, at_cdn = intercept(hub, to_cdn), intercept(cdn)
        assert validate(f"hf://{repo}").verdict == "valid"
    finally:
        cdn.stop()
    assert {p.split("?")[0].rsplit("/", 1)[1]: h.get("Authorization") for _, p, h in at_hub} == {
        "main": "Bearer hf_teeth", "config.json": "Bearer hf_teeth", "model.safetensors": "Bearer hf_teeth"}
    assert [(p, h.get("Authorization")) for _, p, h in at_cdn] == [(weights, None), (weights, None)]
    assert all(h.get("User-Agent", "").startswith("qformats/") for _, p, h in at_hub + at_cdn if "/resolve/" in p)
    assert [h.get("Range") for _, _, h in at_cdn] == ["bytes=0-7", f"bytes=8-{struct_len(hub, repo) - 1}"]


def struct_len(hub: Hub, repo: str) -> int:
    """ST-1: 8 + the u64 header length of the repository's model.safetensors."""
    return 8 + int.from_bytes(hub.repos[repo]["model.safetensors"][:8], "little")


# -- REMOTE-2.5: sizes at the bounds ---------------------------------------------------------------------------------

def test_an_empty_file_listed_with_size_0_is_taken(hub):
    """REMOTE-2.5: 0 is a size; the checkpoint reads as without the empty file."""
    repo = hub.add_files("org/empty", {**{p.name: p.read_bytes() for p in GPTQ.iterdir()}, "notes.txt": b""})
    report = validate(f"hf://{repo}")
    assert (report.verdict, report.summary["remote"]["files"]) == ("valid", 3)


def test_a_size_of_2_63_minus_1_is_taken(hub):
    """REMOTE-2.5: 2^63 - 1 is the largest size; an unread file that large passes the listing."""
    repo = hub.add_files("org/huge", {**{p.name: p.read_bytes() for p in GPTQ.iterdir()}, "notes.json": b"x"})
    hub.faults.listed_size["notes.json"] = 2**63 - 1
    report = validate(f"hf://{repo}")
    assert report.verdict == "valid"
    assert report.summary["remote"]["bytes_listed"] == 2**63 - 1 + sum(p.stat().st_size for p in GPTQ.iterdir())


def test_a_weight_file_without_lfs_takes_the_listed_size(hub):
    """REMOTE-2.5: an entry without lfs (a small file stored in git) has its own size."""
    repo = hub.add_dir("org/gptq", GPTQ)
    size = len(hub.repos[repo]["model.safetensors"])
    hub.faults.listing["model.safetensors"] = ("lfs", None)
    hub.faults.listed_size["model.safetensors"] = size + 1
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.size_mismatch", None, f"a file of {size + 1} bytes (as listed)",
                          f"Content-Range says {size} bytes", f"hf://{repo}@{hub.sha(repo)}/model.safetensors")


def test_a_file_listed_without_a_size_is_sized_by_head(hub):
    """REMOTE-2.5: an entry with no size is allowed; its size is HEAD's (REMOTE-3.7), asked once."""
    repo = hub.add_dir("org/gptq", GPTQ)
    hub.faults.listing["config.json"] = ("size", None)
    report = validate(f"hf://{repo}")
    assert report.verdict == "valid"
    heads = [p for m, p, _ in hub.requests if m == "HEAD"]
    assert heads == [f"/{repo}/resolve/{hub.sha(repo)}/config.json"]
    assert report.summary["remote"]["bytes_listed"] == sum(p.stat().st_size for p in GPTQ.iterdir())


def test_the_checkpoint_is_the_address_as_given(hub):
    """REMOTE-2.1: a repository read as a directory is the checkpoint at the address given (Checkpoint.path, which a
    --jobs run reopens), its files named at the commit."""
    repo = hub.add_dir("org/gptq", GPTQ)
    ckpt = rhub.open_hub(f"hf://{repo}")
    assert (ckpt.path, ckpt.files) == (f"hf://{repo}", (f"hf://{repo}@{hub.sha(repo)}/model.safetensors",))


# -- REMOTE-3 on the listing ------------------------------------------------------------------------------------------

def test_gated_listing_is_unauthorized_whole(hub):
    """REMOTE-3.3: the hub's GatedRepo answer says to accept the terms and log in."""
    repo = hub.add_dir("org/gated", GPTQ)
    hub.faults.api_status[repo] = 403
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.unauthorized", "path", "a repository this client may read (gated: accept its terms "
                          "and log in with `hf auth login` or set HF_TOKEN)", "HTTP 401/403 (gated)", f"hf://{repo}")


def test_missing_repository_is_not_found_whole(hub):
    """REMOTE-3.2: RepoNotFound on the listing."""
    err = refused(lambda: validate("hf://org/none"))
    assert whole(err) == ("remote.not_found", "path", "an existing repository", "HTTP 404", "hf://org/none")


def test_missing_revision_is_not_found_whole(hub):
    """REMOTE-3.2: the hub's RevisionNotFound (X-Error-Code) on the listing names the revision."""
    repo = hub.add_dir("org/gptq", GPTQ)
    intercept(hub, lambda h: h.path.startswith("/api/") and answer_raw(
        h, 404, {"X-Error-Code": "RevisionNotFound", "Content-Length": "2"}, b"{}"))
    err = refused(lambda: validate(f"hf://{repo}@v9"))
    assert whole(err) == ("remote.not_found", "path", "an existing revision", "HTTP 404", f"hf://{repo}@v9")


@pytest.mark.parametrize("status", [401, 403])
def test_private_repository_is_unauthorized_whole(hub, status):
    """REMOTE-3.3: a RepoNotFound answer with 401/403 (the hub's answer for a private repository) is unauthorized."""
    repo = hub.add_dir("org/private", GPTQ)
    intercept(hub, lambda h: h.path.startswith("/api/") and answer_raw(
        h, status, {"X-Error-Code": "RepoNotFound", "Content-Length": "2"}, b"{}"))
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.unauthorized", "path", "a repository this client may read (private or gated: "
                          "`hf auth login` or HF_TOKEN)", f"HTTP {status}", f"hf://{repo}")


def api_answers(hub: Hub, status: int, times: int = 1000, headers: dict[str, str] | None = None) -> list:
    """The listing route answers ``status`` (no X-Error-Code: not the stand-in's api_status, which always names
    RepoNotFound or GatedRepo) the first ``times`` times, then as the stand-in does; the log of every request."""
    left = [times]

    def answer(handler):
        if handler.path.startswith("/api/") and left[0]:
            left[0] -= 1
            return answer_raw(handler, status, {**(headers or {}), "Content-Length": "0"})
        return False
    return intercept(hub, answer)


def listed(log: list) -> list[str]:
    return [p for _, p, _ in log if p.startswith("/api/")]


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_busy_listing_is_retried_with_backoff_then_refused(hub, waits, status):
    """REMOTE-3.4: 4 retries after the first request, waiting 0.5, 1, 2, 4 s (no Retry-After); then could not run."""
    repo = hub.add_dir("org/busy", GPTQ)
    log = api_answers(hub, status)
    err = refused(lambda: validate(f"hf://{repo}"))
    code = "remote.rate_limited" if status == 429 else "remote.http"
    assert whole(err) == (code, "path", "an answer to the repository listing", f"HTTP {status}", f"hf://{repo}")
    assert listed(log) == [f"/api/models/{repo}/revision/main?blobs=true"] * 5
    assert waits == [0.5, 1.0, 2.0, 4.0]


def test_listing_500_is_not_retried(hub, waits):
    """REMOTE-3.5: another status is remote.http at once."""
    repo = hub.add_dir("org/broken", GPTQ)
    log = api_answers(hub, 500)
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.http", "path", "an answer to the repository listing", "HTTP 500", f"hf://{repo}")
    assert (len(listed(log)), waits) == (1, [])


def test_listing_retry_waits_retry_after(hub, waits):
    """REMOTE-3.4: a 429 with Retry-After is retried after those seconds; then the listing is read."""
    repo = hub.add_dir("org/busy", GPTQ)
    log = api_answers(hub, 429, times=2, headers={"Retry-After": "7"})
    assert validate(f"hf://{repo}").verdict == "valid"
    assert (len(listed(log)), waits) == (3, [7.0, 7.0])


def test_unreachable_hub_names_the_transport_error(hub, monkeypatch):
    """REMOTE-3.5: no answer from the endpoint: the hub client's transport error, by class and message."""
    hub.stop()
    err = refused(lambda: validate("hf://org/gptq"))
    assert (err.code, err.tensor, err.constraint, err.file) == ("remote.http", "path", "an answer from the hub",
                                                                "hf://org/gptq")
    assert err.actual.startswith("ConnectError: ") and "Connection refused" in err.actual


def test_offline_mode_is_could_not_run(hub, monkeypatch):
    """REMOTE-3.5: huggingface_hub in offline mode (HF_HUB_OFFLINE=1) sends nothing: no answer, remote.http."""
    from huggingface_hub import constants

    repo = hub.add_dir("org/gptq", GPTQ)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    err = refused(lambda: validate(f"hf://{repo}"))
    theirs = (f"OfflineModeIsEnabled: Cannot reach {hub.endpoint}/api/models/{repo}/revision/main?blobs=true: offline "
              "mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` environment variable.")
    assert whole(err) == ("remote.http", "path", "an answer from the hub", theirs[:200], f"hf://{repo}")
    assert hub.requests == []


def test_a_connection_error_of_the_hub_client_is_remote_http_cut_to_200(hub, monkeypatch):
    """REMOTE-3.5: an OSError from the hub client (a connection it could not make) is remote.http, its class and
    message cut to 200 characters like every quoted message."""
    import huggingface_hub

    def unreachable(*args, **kwargs):
        raise ConnectionError("x" * 300)
    monkeypatch.setattr(huggingface_hub.HfApi, "repo_info", unreachable)
    err = refused(lambda: validate("hf://org/gptq"))
    assert whole(err) == ("remote.http", "path", "an answer from the hub", "ConnectionError: " + "x" * 183,
                          "hf://org/gptq")


def test_a_bug_outside_the_hub_client_stays_a_bug(hub, monkeypatch):
    """REMOTE-3.5: only the hub client's own transport errors are remote.http; anything else propagates."""
    import huggingface_hub

    def broken(*args, **kwargs):
        raise RuntimeError("not the network")
    monkeypatch.setattr(huggingface_hub.HfApi, "repo_info", broken)
    with pytest.raises(RuntimeError, match="not the network"):
        validate("hf://org/gptq")


@pytest.mark.parametrize("module", ["httpx2._transports", "httpx._exceptions", "huggingface_hub.errors"])
def test_a_transport_error_of_the_hub_client_is_remote_http(hub, monkeypatch, module):
    """REMOTE-3.5: an exception of the hub client's own packages (httpx2 in huggingface_hub 2.4.0, httpx before it,
    huggingface_hub itself) that is not an HTTP status is remote.http, class and message cut to 200 characters."""
    import huggingface_hub

    stalled = type("ReadTimeout", (Exception,), {"__module__": module})

    def answer(*args, **kwargs):
        raise stalled("timed out " + "x" * 300)
    monkeypatch.setattr(huggingface_hub.HfApi, "repo_info", answer)
    err = refused(lambda: validate("hf://org/gptq"))
    assert whole(err) == ("remote.http", "path", "an answer from the hub",
                          ("ReadTimeout: timed out " + "x" * 300)[:200], "hf://org/gptq")


def test_a_listing_that_breaks_the_hub_client_is_cut_to_200_characters(hub):
    """REMOTE-2.5: the hub client's error on a listing no hub writes, by class and message, first 200 characters."""
    repo = hub.add_dir("org/odd", GPTQ)
    hub.faults.listing["*"] = ("siblings", [{"x" * 300: 1}])
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.listing.invalid", "path", "a repository listing the hub client can parse",
                          "KeyError: 'rfilename'", f"hf://{repo}")
    hub.faults.listing["*"] = ("lastModified", "y" * 300)
    from huggingface_hub.utils import parse_datetime

    with pytest.raises(ValueError) as theirs:
        parse_datetime("y" * 300)
    err = refused(lambda: validate(f"hf://{repo}"))
    assert whole(err) == ("remote.listing.invalid", "path", "a repository listing the hub client can parse",
                          f"ValueError: {theirs.value}"[:200], f"hf://{repo}")


# -- AUDIT-2.1: the commit an address names --------------------------------------------------------------------------

def test_commit_is_the_listed_sha(hub):
    """AUDIT-2.1, REMOTE-2.1: the revision asked is resolved to the commit the listing names (one request)."""
    repo = hub.add_dir("org/gptq", GPTQ)
    assert rhub.pin(f"hf://{repo}@v2")[0] == hub.sha(repo)
    assert api_requests(hub) == [f"/api/models/{repo}/revision/v2"]


@pytest.mark.parametrize("rev, expected", [("@v2", "v2"), ("", "main")])
def test_commit_without_a_listed_sha_is_the_revision_asked(hub, rev, expected):
    """AUDIT-2.1, REMOTE-2.5: a listing without a commit: the revision asked, main by default."""
    repo = hub.add_dir("org/gptq", GPTQ)
    hub.faults.listing["*"] = ("sha", None)
    assert rhub.pin(f"hf://{repo}{rev}")[0] == expected


def test_commit_of_a_missing_repository_names_the_address(hub):
    """AUDIT-2.1, REMOTE-3.2: a listing that fails names the address asked."""
    err = refused(lambda: rhub.pin("hf://org/none@v1"))
    assert whole(err) == ("remote.not_found", "path", "an existing repository", "HTTP 404", "hf://org/none@v1")


def test_commit_of_a_listing_with_a_bad_sha_is_refused(hub):
    """AUDIT-2.1, REMOTE-2.5: the commit is checked before it is used."""
    repo = hub.add_dir("org/gptq", GPTQ)
    hub.faults.listing["*"] = ("sha", "a/b")
    err = refused(lambda: rhub.pin(f"hf://{repo}"))
    assert whole(err) == ("remote.listing.invalid", "sha", "a commit id: 1 to 128 letters, digits, '.', '_' or '-'",
                          "a/b", f"hf://{repo}")


def test_pin_names_a_dataset_file_at_the_listed_commit(hub):
    """AUDIT-2.1: the address at the commit keeps the repository type and the path in the repository."""
    repo = hub.add_files("org/data", {"sub/model.gguf": b"GGUF"})
    _serve_datasets_as_models(hub)
    sha = hub.sha(repo)
    assert rhub.pin(f"hf://datasets/{repo}@v1/sub/model.gguf") == (sha, f"hf://datasets/{repo}@{sha}/sub/model.gguf")


def test_pin_of_a_repository_is_its_address_at_the_commit(hub):
    repo = hub.add_files("org/gguf", {"model.gguf": b"GGUF"})
    assert rhub.pin(f"hf://{repo}") == (hub.sha(repo), f"hf://{repo}@{hub.sha(repo)}")


def test_pin_without_a_listed_commit_is_the_address_as_given(hub):
    """AUDIT-2.1, REMOTE-2.5: no commit to pin to: the revision asked, and the address unchanged."""
    repo = hub.add_files("org/gguf", {"model.gguf": b"GGUF"})
    hub.faults.listing["*"] = ("sha", None)
    assert rhub.pin(f"hf://{repo}@v1/model.gguf") == ("v1", f"hf://{repo}@v1/model.gguf")


@pytest.mark.parametrize("rev, expected", [("@v3", "v3"), ("", "main")])
def test_files_read_without_a_listed_sha_use_the_revision_asked(hub, rev, expected):
    """REMOTE-2.5: no sha: files are read (and named) at the revision the address names, main by default."""
    repo = hub.add_dir("org/gptq", GPTQ)
    hub.faults.listing["*"] = ("sha", None)
    report = validate(f"hf://{repo}{rev}")
    assert report.summary["remote"]["url"] == f"hf://{repo}@{expected}"
    resolved = [p for _, p, _ in hub.requests if "/resolve/" in p]
    assert resolved and all(p.startswith(f"/{repo}/resolve/{expected}/") for p in resolved)


# -- REMOTE-3.1, 3.6, 3.7: the range reader --------------------------------------------------------------------------

def source(hub: Hub, name: str = "model.safetensors", **kw) -> rhttp.HttpRangeSource:
    repo = "org/gptq" if "org/gptq" in hub.repos else hub.add_dir("org/gptq", GPTQ)
    return rhttp.HttpRangeSource(hub.url(repo, name), name=name, **kw)


def blob(hub: Hub, name: str = "model.safetensors") -> bytes:
    return hub.repos["org/gptq"][name]


def test_read_asks_one_range_with_identity_encoding(hub):
    """REMOTE-3: GET with Range: bytes=START-END (inclusive) and Accept-Encoding: identity."""
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    log = intercept(hub)
    assert src.read(3, 10) == blob(hub)[3:13]
    [(method, _, headers)] = log
    assert (method, headers["Range"], headers["Accept-Encoding"]) == ("GET", "bytes=3-12", "identity")
    assert sorted(k.lower() for k in headers.keys()) == ["accept-encoding", "connection", "host", "range",
                                                         "user-agent"]          # and only what urllib adds
    assert (src.traffic.requests, src.traffic.bytes, src.traffic.ranges) == (1, 10, {"model.safetensors": [(3, 10)]})


def test_a_read_larger_than_a_chunk_is_several_ranges(hub, monkeypatch):
    """REMOTE-1.1: at most CHUNK_BYTES per request (here 4): 10 bytes at 3 are 3-6, 7-10, 11-12."""
    monkeypatch.setattr(rhttp, "CHUNK_BYTES", 4)
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    assert src.read(3, 10) == blob(hub)[3:13]
    assert [r for _, _, r in hub.requests] == ["bytes=3-6", "bytes=7-10", "bytes=11-12"]
    assert src.traffic.ranges == {"model.safetensors": [(3, 4), (7, 4), (11, 2)]}
    assert (src.traffic.requests, src.traffic.bytes) == (3, 10)


def test_a_read_of_exactly_two_chunks_is_both(hub, monkeypatch):
    """REMOTE-1.1: two whole chunks (CHUNK_BYTES 4): both ranges, joined."""
    monkeypatch.setattr(rhttp, "CHUNK_BYTES", 4)
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    assert src.read(0, 8) == blob(hub)[:8]
    assert [r for _, _, r in hub.requests] == ["bytes=0-3", "bytes=4-7"]


def test_a_read_of_zero_bytes_asks_nothing(hub):
    """REMOTE-1.1: n = 0 is a read inside the file; nothing is requested."""
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    assert src.read(5, 0) == b""
    assert (hub.requests, src.traffic.requests) == ([], 0)


def test_a_body_over_a_mebibyte_is_read_whole(hub):
    """REMOTE-1.3: a range longer than one socket read (1 MiB) arrives whole."""
    data = bytes(range(256)) * (3 << 12)                   # 3 MiB
    hub.add_files("org/gptq", {"big.bin": data})
    src = source(hub, "big.bin", size=len(data))
    assert src.read(1, len(data) - 1) == data[1:]
    assert hub.served() == len(data) - 1


def test_head_gives_the_size_from_content_length(hub):
    """REMOTE-2.4: a plain URL's size is HEAD's Content-Length (no X-Linked-Size on a non-LFS file)."""
    log = intercept(hub)
    src = source(hub, "config.json")
    assert src.size == len((GPTQ / "config.json").read_bytes())
    [(method, _, headers)] = log
    assert (method, headers["Accept-Encoding"], src.traffic.requests) == ("HEAD", "identity", 1)
    assert sorted(k.lower() for k in headers.keys()) == ["accept-encoding", "connection", "host", "user-agent"]


def test_head_prefers_x_linked_size(hub):
    """REMOTE-2.4: X-Linked-Size (the LFS file's size, as huggingface_hub reads it) over Content-Length."""
    intercept(hub, lambda h: answer_raw(h, 200, {"X-Linked-Size": "123456", "Content-Length": "99"}))
    assert source(hub).size == 123456


@pytest.mark.parametrize("headers, actual", [({}, "None"), ({"X-Linked-Size": "12a"}, "'12a'")],
                         ids=["none", "not-digits"])
def test_head_without_a_size_is_refused(hub, headers, actual):
    """REMOTE-3.7: a HEAD answer that gives no byte count."""
    intercept(hub, lambda h: answer_raw(h, 200, headers))
    err = refused(lambda: source(hub))
    assert whole(err) == ("remote.size_mismatch", None, "a HEAD answer with Content-Length", actual,
                          "model.safetensors")


def test_a_different_range_is_refused(hub):
    """REMOTE-3.1: a 206 for another range than asked (the server clipped it at its own end)."""
    size = len((GPTQ / "model.safetensors").read_bytes())
    src = source(hub, size=size + 100)
    err = refused(lambda: src.read(size - 2, 10))
    assert whole(err) == ("remote.range.ignored", None, f"HTTP 206 with Content-Range bytes {size - 2}-{size + 7}/"
                          f"{size + 100}", f"HTTP 206 with Content-Range 'bytes {size - 2}-{size - 1}/{size}'; "
                          "aborted before the body", "model.safetensors")
    assert src.traffic.failure is err


@pytest.mark.parametrize("status, content_range, body", [
    (206, None, b"12345678"),                    # a 206 must name its range
    (206, "bytes 0-8/100", b"123456789"),        # the end must match too
    (200, "bytes 0-7/100", b"12345678"),         # the status must be 206 even with a matching Content-Range
    (206, "bytes 0-7/100x", b"12345678"),        # 'bytes START-END/SIZE' and nothing after it
], ids=["no-content-range", "wrong-end", "status-200", "trailing-junk"])
def test_an_answer_that_is_not_the_range_asked_is_refused(hub, status, content_range, body):
    """REMOTE-3.1: only HTTP 206 with exactly the Content-Range asked is read; anything else is refused before the
    body, naming what came."""
    headers = {"Content-Length": str(len(body)), **({"Content-Range": content_range} if content_range else {})}
    intercept(hub, lambda h: answer_raw(h, status, headers, body))
    err = refused(lambda: source(hub, size=100).read(0, 8))
    assert whole(err) == ("remote.range.ignored", None, "HTTP 206 with Content-Range bytes 0-7/100",
                          f"HTTP {status} with Content-Range {content_range!r}; aborted before the body",
                          "model.safetensors")


def test_a_short_body_is_counted_and_refused(hub):
    """REMOTE-3.6: the 4 bytes that came are counted; the read is refused."""
    hub.faults.truncate["model.safetensors"] = 4
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    err = refused(lambda: src.read(0, 8))
    assert whole(err) == ("remote.short_read", None, "8 bytes at offset 0", "4 bytes before the body ended",
                          "model.safetensors")
    assert (src.traffic.bytes, src.traffic.ranges, src.traffic.failure) == (4, {"model.safetensors": [(0, 4)]}, err)


def test_a_chunked_body_cut_short_keeps_the_chunks_that_came():
    """REMOTE-3.6: a chunked 206 whose second chunk is cut: the first chunk's 4 bytes came (http.client's
    IncompleteRead.partial), and the read is refused."""
    server = RawServer(b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/10\r\nTransfer-Encoding: chunked\r\n"
                       b"\r\n4\r\nabcd\r\n6\r\nef")
    try:
        src = rhttp.HttpRangeSource(server.url, size=10)
        err = refused(lambda: src.read(0, 10))
    finally:
        server.close()
    assert whole(err) == ("remote.short_read", None, "10 bytes at offset 0", "4 bytes before the body ended",
                          server.url)
    assert src.traffic.bytes == 4


def test_a_connection_reset_mid_body_keeps_what_came(hub, monkeypatch):
    """REMOTE-3.6: a socket error while the body is read (here the second read raises ConnectionResetError) ends
    the body: the 3 bytes that came are counted and the read is refused."""
    opener = rhttp._OPENER

    class Resetting:
        def open(self, req, timeout):
            resp = opener.open(req, timeout=timeout)
            reads, read = [], resp.read

            def cut(amt):
                reads.append(amt)
                if len(reads) > 1:
                    raise ConnectionResetError(104, "Connection reset by peer")
                return read(3)
            resp.read = cut
            return resp
    monkeypatch.setattr(rhttp, "_OPENER", Resetting())
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    err = refused(lambda: src.read(0, 8))
    assert whole(err) == ("remote.short_read", None, "8 bytes at offset 0", "3 bytes before the body ended",
                          "model.safetensors")
    assert src.traffic.bytes == 3


# -- REMOTE-3.2 to 3.5: statuses and failures of the range reader ----------------------------------------------------

@pytest.mark.parametrize("status, code, constraint", [
    (404, "remote.not_found", "a file that exists at this address"),
    (401, "remote.unauthorized", "a file this client may read (a gated or private repository needs a token: "
                                 "`hf auth login` or HF_TOKEN)"),
    (403, "remote.unauthorized", "a file this client may read (a gated or private repository needs a token: "
                                 "`hf auth login` or HF_TOKEN)"),
    (500, "remote.http", "HTTP 206 (or 200 for HEAD)"),
])
def test_an_error_status_is_its_code_whole(hub, waits, status, code, constraint):
    """REMOTE-3.2, 3.3, 3.5: not retried, kept as the traffic's failure (REMOTE-3.8)."""
    hub.faults.status["model.safetensors"] = status
    src = source(hub, size=100)
    err = refused(lambda: src.read(0, 8))
    assert whole(err) == (code, None, constraint, f"HTTP {status}", "model.safetensors")
    assert (src.traffic.requests, waits, src.traffic.failure) == (1, [], err)


def test_429_every_time_is_rate_limited_whole(hub, waits):
    """REMOTE-3.4: 5 tries, each 429 with Retry-After: 0 (so no wait), then remote.rate_limited."""
    hub.faults.too_many["model.safetensors"] = 1000
    src = source(hub, size=100)
    err = refused(lambda: src.read(0, 8))
    assert whole(err) == ("remote.rate_limited", None, "an answer within 5 tries", "HTTP 429 each time",
                          "model.safetensors")
    assert (src.traffic.requests, waits) == (5, [0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_busy_gateway_is_retried_with_backoff(hub, waits, status):
    """REMOTE-3.4: 502/503/504 retried 4 times after 0.5, 1, 2, 4 s (no Retry-After), then remote.http."""
    hub.faults.status["model.safetensors"] = status
    src = source(hub, size=100)
    err = refused(lambda: src.read(0, 8))
    assert whole(err) == ("remote.http", None, "HTTP 206 (or 200 for HEAD)", f"HTTP {status}", "model.safetensors")
    assert (src.traffic.requests, waits) == (5, [0.5, 1.0, 2.0, 4.0])


def test_a_retried_read_then_answered_counts_every_request(hub, waits):
    """REMOTE-3.4, REMOTE-4.3: two 429s (Retry-After: 0, so no wait), then the bytes; three requests counted."""
    hub.faults.too_many["model.safetensors"] = 2
    src = source(hub, size=len((GPTQ / "model.safetensors").read_bytes()))
    assert src.read(0, 8) == blob(hub)[:8]
    assert (src.traffic.requests, waits) == (3, [0.0, 0.0])


def test_every_request_has_the_60_second_timeout(hub, monkeypatch):
    """REMOTE-3.5: a timeout after 60 s, per connect and socket read."""
    seen = []
    opener = rhttp._OPENER

    class Recording:
        def open(self, req, timeout):
            seen.append(timeout)
            return opener.open(req, timeout=timeout)
    monkeypatch.setattr(rhttp, "_OPENER", Recording())
    src = source(hub)
    src.read(0, 8)
    assert seen == [60.0, 60.0]


def test_the_first_failure_is_the_one_kept(hub):
    """REMOTE-3.8: a later failure does not replace the first (the one a check may have turned into a finding)."""
    hub.faults.status["model.safetensors"] = 404
    hub.faults.status["config.json"] = 500
    src = source(hub, size=100)
    first = refused(lambda: src.read(0, 8))
    other = rhttp.HttpRangeSource(hub.url("org/gptq", "config.json"), size=100, traffic=src.traffic)
    refused(lambda: other.read(0, 8))
    assert src.traffic.failure is first


@pytest.mark.parametrize("url, make", [
    ("http://[::1/x", lambda: urllib.parse.urlsplit("http://[::1/x")),
    ("http://127.0.0.1/" + "a" * 250 + " b", lambda: http.client.HTTPConnection("127.0.0.1").putrequest(
        "GET", "/" + "a" * 250 + " b")),
], ids=["ipv6-host", "space"])
def test_a_url_urllib_cannot_send_is_refused(url, make):
    """REMOTE-2.1: a host that does not parse, a space: urllib's error, class and message, first 200 characters."""
    with pytest.raises((ValueError, http.client.InvalidURL)) as theirs:
        make()
    src = rhttp.HttpRangeSource(url, size=10)
    err = refused(lambda: src.read(0, 1))
    assert whole(err) == ("remote.url.invalid", None, "an http(s) URL of ASCII characters without spaces "
                          "(percent-encode others)", f"{type(theirs.value).__name__}: {theirs.value}"[:200], url)
    assert src.traffic.failure is err


def test_a_refused_connection_is_remote_http(hub):
    """REMOTE-3.5: no answer (a closed port): the socket error urllib wraps, as the OS words it."""
    hub.stop()
    src = rhttp.HttpRangeSource(hub.url("org/x", "f.bin"), size=10)
    err = refused(lambda: src.read(0, 1))
    assert whole(err) == ("remote.http", None, "an answer from the server",
                          "URLError: [Errno 111] Connection refused", hub.url("org/x", "f.bin"))
    assert src.traffic.failure is err


def test_a_garbled_answer_is_remote_http_cut_to_200_characters():
    """REMOTE-3.5: a status line that is not HTTP (http.client's BadStatusLine, quoting it)."""
    line = "X" * 300 + "\r\n"
    server = RawServer(line.encode())
    try:
        err = refused(lambda: rhttp.HttpRangeSource(server.url, size=10).read(0, 1))
    finally:
        server.close()
    assert whole(err) == ("remote.http", None, "an answer from the server", f"BadStatusLine: {line}"[:200],
                          server.url)


def test_a_body_longer_than_the_range_is_read_no_further(hub):
    """REMOTE-3.1: the reader takes the n bytes asked, never more, even when the body goes on."""
    intercept(hub, lambda h: answer_raw(h, 206, {"Content-Range": "bytes 0-7/100", "Content-Length": "16"},
                                        b"0123456789abcdef"))
    src = source(hub, size=100)
    assert src.read(0, 8) == b"01234567"
    assert (src.traffic.bytes, src.traffic.ranges) == (8, {"model.safetensors": [(0, 8)]})


def test_a_long_body_longer_than_the_range_is_read_no_further(hub):
    """REMOTE-3.1: the same past one socket read (1 MiB): 1 MiB + 8 bytes asked, 2 MiB sent, 1 MiB + 8 taken."""
    n = (1 << 20) + 8
    body = bytes(range(256)) * (1 << 13)                    # 2 MiB
    intercept(hub, lambda h: answer_raw(h, 206, {"Content-Range": f"bytes 0-{n - 1}/{1 << 22}",
                                                 "Content-Length": str(len(body))}, body))
    src = source(hub, size=1 << 22)
    assert src.read(0, n) == body[:n]
    assert src.traffic.bytes == n


def test_head_size_may_carry_whitespace(hub):
    """REMOTE-2.4: a field value's surrounding whitespace is not part of it (RFC 9110 §5.5)."""
    intercept(hub, lambda h: answer_raw(h, 200, {"X-Linked-Size": "4096 "}))
    assert source(hub).size == 4096


# -- REMOTE-3.4: the waits -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("attempt, wait", [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 16.0), (6, 30.0),
                                           (10, 30.0)])
def test_backoff_doubles_from_half_a_second_up_to_30(attempt, wait):
    """REMOTE-3.4: 0.5 s x 2^k, never more than 30 s (0.5 x 2^6 = 32 is cut to 30)."""
    assert rhttp._delay(attempt, None) == wait


@pytest.mark.parametrize("retry_after, wait", [("7", 7.0), ("0", 0.0), ("30", 30.0), ("31", 30.0), ("3600", 30.0),
                                               (" 3 ", 3.0)])
def test_retry_after_seconds_are_waited_up_to_30(retry_after, wait):
    """REMOTE-3.4: the Retry-After seconds when given (at any attempt), never more than 30 s."""
    assert rhttp._delay(3, retry_after) == wait


@pytest.mark.parametrize("retry_after", ["", "Wed, 21 Oct 2015 07:28:00 GMT", "-1", "1.5"])
def test_retry_after_that_is_not_seconds_falls_back_to_backoff(retry_after):
    """REMOTE-3.4: an HTTP-date or anything else than delay-seconds (RFC 9110 §10.2.3): the backoff, 0.5 x 2^2."""
    assert rhttp._delay(2, retry_after) == 2.0
