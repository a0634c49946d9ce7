"""Remote checkpoints over a hub stand-in on 127.0.0.1, driven through huggingface_hub itself (spec/remote.md).

Expected byte counts come from the files' own framing read here with ``struct`` (safetensors: 8 + the u64 header
length, ST-1) or from gguf-py's reader (the data offset), never from the reader under test; expected findings
come from validating the same bytes on disk.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.containers import gguf as gguf_reader
from qformats.containers.source import FileSource
from qformats.errors import QFormatsError
from qformats.remote import http
from qformats.validate import validate

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
CKPTS = ROOT / "checkpoints"


# -- helpers ----------------------------------------------------------------------------------------------------

def header_bytes(blob: bytes) -> int:
    """ST-1: a safetensors file's framing: the 8-byte length and the header it counts."""
    return 8 + struct.unpack("<Q", blob[:8])[0]


def refused(path: str, **options) -> QFormatsError:
    """The could-not-run error validate raises."""
    with pytest.raises(QFormatsError) as info:
        validate(path, **options)
    return info.value


def findings(report) -> list[tuple]:
    return [(f.code, f.severity, f.tensor, f.message) for f in report.findings]


def same_report(remote, local) -> None:
    """Everything but the path and what only a remote read has: verdict, findings, rows, what was not checked."""
    assert remote.verdict == local.verdict
    assert findings(remote) == findings(local)
    assert remote.layers == local.layers
    strip = {"remote"}
    assert {k: v for k, v in remote.summary.items() if k not in strip} == \
        {k: v for k, v in local.summary.items() if k not in strip}


def sharded_dir(src: Path, out: Path) -> Path:
    """The fixture's tensors split over two shards by the safetensors library, with an index and its config."""
    tensors = load_file(src / "model.safetensors")
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    out.mkdir()
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, str(out / shard))
    weight_map = {n: shard for shard, members in shards.items() for n in members}
    total = sum(t.nbytes for t in tensors.values())
    (out / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                  "weight_map": weight_map}))
    (out / "config.json").write_bytes((src / "config.json").read_bytes())
    return out


def big_file(size: int = 32 << 20) -> bytes:
    """One F32 tensor filling ``size`` bytes: a shard too large to stream by mistake."""
    from safetensors.numpy import save

    return save({"w": np.zeros(size // 4, np.float32)})


# -- REMOTE-4.1: headers only ------------------------------------------------------------------------------------

def test_header_only_fetches_the_config_and_the_header_exactly(hub):
    """REMOTE-4.1: without --sample only config.json and the safetensors framing are fetched, and said."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    files = hub.repos[repo]
    report = validate(f"hf://{repo}")
    expected = len(files["config.json"]) + header_bytes(files["model.safetensors"])
    assert hub.served() == expected
    assert report.summary["remote"]["bytes_fetched"] == expected
    assert report.summary["remote"]["bytes_listed"] == sum(len(b) for b in files.values())
    assert report.summary["sample"] == {"asked": 0, "checked": []}


def test_header_only_sharded_gets_the_local_findings(hub, tmp_path):
    """REMOTE-4.1: a sharded checkpoint's index, config and shard headers only; the findings are the local ones."""
    local = sharded_dir(CKPTS / "gptq_v2_zeros_labelled_gptq", tmp_path / "sharded")
    repo = hub.add_dir("org/sharded", local)
    files = hub.repos[repo]
    report = validate(f"hf://{repo}")
    expected = len(files["config.json"]) + len(files["model.safetensors.index.json"]) + \
        sum(header_bytes(b) for n, b in files.items() if n.endswith(".safetensors"))
    assert hub.served() == expected == report.summary["remote"]["bytes_fetched"]
    same_report(report, validate(str(local), sample=0))


def test_header_only_names_every_quantized_tensor_unchecked(hub):
    """REMOTE-4.1: the layers not read are named as not checked, never counted as checked (CKPT-5.1)."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_zero_underflow_autogptq")
    report = validate(f"hf://{repo}")
    assert report.summary["tensors_checked"] == 0
    reasons = {entry["reason"] for entry in report.summary["not_checked"]}
    assert reasons == {"not sampled: --sample 0 checked 0 of 2 (REMOTE-4.1)"}
    assert len(report.summary["not_checked"]) == report.summary["tensors"] == 8


def test_header_only_finds_header_defects_as_locally(hub, tmp_path):
    """REMOTE-4.1: an index that maps a tensor to the wrong shard is found from the headers (CKPT-3.4)."""
    local = sharded_dir(CKPTS / "gptq_v1_sym_4bit", tmp_path / "bad")
    index = json.loads((local / "model.safetensors.index.json").read_text())
    first = sorted(index["weight_map"])[0]
    index["weight_map"][first] = "model-00002-of-00002.safetensors"
    (local / "model.safetensors.index.json").write_text(json.dumps(index))
    repo = hub.add_dir("org/bad", local)
    report = validate(f"hf://{repo}")
    assert report.verdict == "invalid"
    assert [f.code for f in report.findings] == ["ckpt.index.tensor_elsewhere"]
    assert findings(report) == findings(validate(str(local), sample=0))
    assert report.summary["remote"]["bytes_fetched"] == hub.served() > 0


# -- REMOTE-4.2: --deep --sample N ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    pytest.param("gptq_v1_sym_4bit", id="gptq-valid"),
    pytest.param("gptq_v1_zero_underflow_autogptq", id="gptq-invalid"),
    pytest.param("fp8_block_nan_byte", id="fp8-invalid"),
])
def test_deep_sample_all_gets_the_local_report(hub, name):
    """REMOTE-4.2: every layer sampled remotely gives the local report of the same options."""
    repo = hub.add_dir(f"org/{name}", CKPTS / name)
    same_report(validate(f"hf://{repo}", deep=True, sample=100), validate(str(CKPTS / name), deep=True, sample=100))


def test_deep_sample_all_sharded_gets_the_local_report(hub, tmp_path):
    """REMOTE-4.2: a sharded invalid checkpoint, every layer read by ranged requests: the local report."""
    local = sharded_dir(CKPTS / "gptq_v2_zeros_labelled_gptq", tmp_path / "sharded")
    repo = hub.add_dir("org/sharded", local)
    remote = validate(f"hf://{repo}", deep=True, sample=100)
    assert remote.verdict == "invalid"
    same_report(remote, validate(str(local), deep=True, sample=100))


@pytest.mark.parametrize("name", [pytest.param("q4_k_m.gguf", id="valid"),
                                  pytest.param("q4_k_m_nan_scale.gguf", id="nan-scale")])
def test_deep_sample_all_gguf_gets_the_local_report(hub, name):
    """REMOTE-4.2: a GGUF file, every tensor's blocks fetched: the local report (the NaN scale found)."""
    repo = hub.add_files("org/gguf", {name: (CKPTS / name).read_bytes()})
    same_report(validate(f"hf://{repo}/{name}", deep=True, sample=100),
                validate(str(CKPTS / name), deep=True, sample=100))


def test_deep_sample_one_fetches_that_layer_only(hub, tmp_path):
    """REMOTE-4.2: --sample 1 fetches the headers and the sampled module's tensors, nothing else."""
    local = sharded_dir(CKPTS / "gptq_v1_sym_4bit", tmp_path / "sharded")
    repo = hub.add_dir("org/sharded", local)
    report = validate(f"hf://{repo}", deep=True, sample=1)
    (layer,) = report.summary["sample"]["checked"]
    files = hub.repos[repo]
    tensors = {}
    for name in files:
        if name.endswith(".safetensors"):
            tensors.update(load_file(local / name))
    layer_bytes = sum(t.nbytes for n, t in tensors.items() if n.startswith(layer + "."))
    headers = len(files["config.json"]) + len(files["model.safetensors.index.json"]) + \
        sum(header_bytes(b) for n, b in files.items() if n.endswith(".safetensors"))
    assert hub.served() == headers + layer_bytes == report.summary["remote"]["bytes_fetched"]
    assert report.summary["tensors_checked"] == sum(n.startswith(layer + ".") for n in tensors)


# -- REMOTE-1.2: a GGUF header fetched as a growing prefix -----------------------------------------------------------

@pytest.mark.parametrize("first", [pytest.param(7, id="7-bytes"), pytest.param(100, id="100-bytes")])
def test_gguf_short_prefix_reads_as_the_whole_file(monkeypatch, first):
    """REMOTE-1.2: from a prefix of any length the reader asks for more and ends as reading the file does,
    for every GGUF container fixture (valid or malformed: the same header or the same error)."""
    monkeypatch.setattr(gguf_reader, "FIRST_READ", first)

    def outcome(read):
        try:
            g = read()
            return g.header.model_dump(), [t.model_dump() for t in g.tensors], dict(g.metadata_types)
        except QFormatsError as err:
            return err.code, str(err)

    paths = sorted((ROOT / "containers" / "gguf").glob("*.gguf")) + sorted(CKPTS.glob("*.gguf"))
    assert len(paths) > 50
    for path in paths:
        assert outcome(lambda: gguf_reader.read_gguf_source(FileSource(path))) == \
            outcome(lambda: gguf_reader.read_gguf(path)), path.name


def test_gguf_large_header_is_fetched_in_growing_ranges(hub, tmp_path):
    """REMOTE-1.2: a 300 KB metadata header (past the first 64 KiB read) is fetched whole, the data not."""
    import gguf

    path = tmp_path / "big_header.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", [f"token-{i:06d}" for i in range(20000)])
    writer.add_tensor("w", np.zeros((256, 1024), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data_offset = gguf.GGUFReader(str(path)).data_offset
    repo = hub.add_files("org/big", {"big_header.gguf": path.read_bytes()})
    report = validate(f"hf://{repo}")
    assert data_offset > gguf_reader.FIRST_READ
    assert data_offset <= hub.served() <= 2 * data_offset < path.stat().st_size
    assert findings(report) == findings(validate(str(path), sample=0))


@pytest.mark.parametrize("name", [pytest.param(n, id=n.removesuffix(".gguf")) for n in (
    "string_past_eof.gguf", "kv_count_beyond_file.gguf", "data_short_by_1.gguf", "trailing_bytes.gguf",
    "short_3_bytes.gguf", "q4k_dmin_nan.gguf")])
def test_malformed_gguf_gets_the_local_findings(hub, name):
    """REMOTE-1.2: a malformed GGUF file over HTTP gets the finding it gets on disk (truncation is the file's, never
    the prefix's), with every tensor read (--deep --sample all)."""
    path = ROOT / "containers" / "gguf" / name
    repo = hub.add_files("org/bad", {name: path.read_bytes()})
    remote, local = validate(f"hf://{repo}/{name}", deep=True, sample=100), validate(str(path), deep=True, sample=100)
    assert remote.verdict == "invalid"
    same_report(remote, local)
    assert remote.summary["remote"]["bytes_fetched"] == hub.served()


# -- REMOTE-2: addresses ------------------------------------------------------------------------------------------

def test_plain_http_url_of_one_file_gets_the_local_report(hub):
    """REMOTE-2.4: an http:// URL of one .safetensors file, sized by HEAD, validated as the local file."""
    repo = hub.add_dir("org/awq", CKPTS / "awq_gemm")
    url = hub.url(repo, "model.safetensors")
    local = CKPTS / "awq_gemm" / "model.safetensors"
    report = validate(url, deep=True, sample=100)
    same_report(report, validate(str(local), deep=True, sample=100))
    assert report.summary["remote"]["bytes_listed"] == sum(p.stat().st_size for p in local.parent.iterdir())


def test_revision_and_file_reach_the_api_route_huggingface_hub_builds(hub):
    """REMOTE-2.1: hf://ORG/REPO@REV/FILE lists the repository at that revision (huggingface_hub's route)."""
    repo = hub.add_files("org/gguf", {"q4_k.gguf": (CKPTS / "q4_k.gguf").read_bytes()})
    validate(f"hf://{repo}@v1.0/q4_k.gguf")
    assert ("GET", "/api/models/org/gguf/revision/v1.0", None) in hub.requests
    assert all("/resolve/" + hub.sha(repo) + "/" in p for m, p, _ in hub.requests if "/resolve/" in p)


def test_missing_file_in_the_repository_is_could_not_run(hub):
    """REMOTE-2.1: a FILE the repository does not list."""
    repo = hub.add_files("org/gguf", {"q4_k.gguf": (CKPTS / "q4_k.gguf").read_bytes()})
    err = refused(f"hf://{repo}/other.gguf")
    assert err.code == "remote.not_found"
    assert str(err) == (f"hf://{repo}/other.gguf: 'path' must be a file or folder of org/gguf@"
                               f"{hub.sha(repo)[:12]} (got other.gguf) [remote.not_found, REMOTE-3.2]")


def test_decode_reads_a_remote_layer_as_the_local_one(hub, tmp_path):
    """REMOTE-2.1: decode takes an hf:// address; the layer decoded is the one decoded from the same bytes on disk."""
    repo = hub.add_dir("org/decode", CKPTS / "gptq_v1_sym_4bit")
    module = "model.layers.0.self_attn.q_proj"
    assert main(["decode", f"hf://{repo}", "--tensor", module, "-o", str(tmp_path / "remote.safetensors")]) == 0
    assert main(["decode", str(CKPTS / "gptq_v1_sym_4bit"), "--tensor", module, "-o", str(tmp_path / "local.safetensors")]) == 0
    assert (tmp_path / "remote.safetensors").read_bytes() == (tmp_path / "local.safetensors").read_bytes()


def test_convert_of_a_remote_checkpoint_is_refused_naming_the_download(hub, tmp_path, capsys):
    """REMOTE-2.1: convert copies every file, so it takes local checkpoints only; an hf:// address is refused
    before any request (before, a FileNotFoundError for 'hf:/org' ended it as an internal error)."""
    repo = hub.add_dir("org/convert", CKPTS / "gptq_v1_sym_4bit")
    hub.reset()
    assert main(["convert", f"hf://{repo}", "--to", "gptq_v2", "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"qformats: 'path' must be a local checkpoint: convert copies every file of it (download it first, e.g. "
        f"`hf download ORG/REPO --local-dir DIR`) (got hf://{repo}) [argument.invalid, QF-2.6]\n")
    assert hub.requests == [] and not (tmp_path / "out").exists()


# -- REMOTE-2.5: a listing no hub writes (a broken mirror behind HF_ENDPOINT; the fuzz's stand-in found each) --------

def _listing_refusal(hub, patch: dict) -> QFormatsError:
    repo = hub.add_dir("org/listing", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.listing.update(patch)
    err = refused(f"hf://{repo}")
    assert (err.code, err.clause, err.file) == ("remote.listing.invalid", "REMOTE-2.5", f"hf://{repo}")
    assert hub.served() == 0                                    # refused before any file is read
    return err


SIZE_RULE = "a size in bytes: an integer from 0 to 2^63 - 1"


@pytest.mark.parametrize("size", ["12", 1.5, True, -5, 2**63], ids=["string", "float", "bool", "negative", "2^63"])
def test_a_listed_size_that_is_not_a_byte_count_is_refused(hub, size):
    err = _listing_refusal(hub, {"config.json": ("size", size)})
    assert (err.tensor, err.constraint, err.actual) == ("size of config.json", SIZE_RULE, size)


def test_an_lfs_size_that_is_not_a_byte_count_is_refused(hub):
    """The size of a weight file is its lfs object's (the listing's own size is the pointer's)."""
    err = _listing_refusal(hub, {"model.safetensors": ("lfs.size", "9")})
    assert (err.tensor, err.constraint, err.actual) == ("size of model.safetensors", SIZE_RULE, "9")


@pytest.mark.parametrize("name", [None, 7, "", "../config.json", "a//b", "./x"])
def test_a_listed_path_that_is_not_a_relative_file_path_is_refused(hub, name):
    err = _listing_refusal(hub, {"config.json": ("rfilename", name)})
    assert (err.tensor, err.constraint, err.actual) == (
        "rfilename", "a relative file path ('/'-separated, no empty, '.' or '..' segment)", name)


def test_a_path_listed_twice_is_refused(hub):
    err = _listing_refusal(hub, {"model.safetensors": ("rfilename", "config.json")})
    assert (err.tensor, err.constraint, err.actual) == ("rfilename", "each file listed once", "config.json")


@pytest.mark.parametrize("sha", [5, "", "../..", "a" * 129])
def test_a_commit_that_is_not_a_commit_id_is_refused(hub, sha):
    """The commit goes into every file's URL and name: it is checked like a path."""
    err = _listing_refusal(hub, {"*": ("sha", sha)})
    assert (err.tensor, err.constraint, err.actual) == (
        "sha", "a commit id: 1 to 128 letters, digits, '.', '_' or '-'", sha)


@pytest.mark.parametrize("siblings, why", [({"a": 1}, "TypeError"), ("x", "TypeError"), ([{}], "KeyError"),
                                           ([1, 2], "TypeError")], ids=["object", "string", "no-name", "numbers"])
def test_a_listing_the_hub_client_cannot_parse_is_refused(hub, siblings, why):
    """huggingface_hub builds its ModelInfo from the answer and raises what Python raises; that is the listing's
    fault, not a bug to show as a traceback."""
    err = _listing_refusal(hub, {"*": ("siblings", siblings)})
    assert (err.tensor, err.constraint) == ("path", "a repository listing the hub client can parse")
    assert err.actual.startswith(why + ": ")


def test_a_listing_without_a_commit_reads_at_the_revision_asked(hub):
    """REMOTE-2.5: no sha is allowed; files are then read at the revision the address names (main)."""
    repo = hub.add_dir("org/nosha", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.listing["*"] = ("sha", None)
    assert validate(f"hf://{repo}").verdict == validate(str(CKPTS / "gptq_v1_sym_4bit")).verdict


# -- REMOTE-3: negative servers -------------------------------------------------------------------------------------

def test_server_ignoring_range_is_aborted_before_the_body(hub):
    """REMOTE-3.1: a 200 answer to a ranged GET is refused and its body not read, so a shard is never streamed."""
    blob = big_file()
    repo = hub.add_files("org/big", {"model.safetensors": blob})
    hub.faults.ignore_range.add("model.safetensors")
    err = refused(f"hf://{repo}")
    assert (err.code, err.file) == ("remote.range.ignored", f"hf://{repo}@{hub.sha(repo)}/model.safetensors")
    assert err.message == ("value must be HTTP 206 with Content-Range bytes 0-7/%d (got HTTP 200 with Content-Range "
                           "None; aborted before the body)" % len(blob))
    assert hub.served() < len(blob) // 2


def test_shard_404_is_could_not_run(hub, tmp_path):
    """REMOTE-3.2: a shard the listing names but the server does not serve."""
    repo = hub.add_dir("org/sharded", sharded_dir(CKPTS / "gptq_v1_sym_4bit", tmp_path / "s"))
    hub.faults.status["model-00002-of-00002.safetensors"] = 404
    err = refused(f"hf://{repo}")
    assert err.code == "remote.not_found"
    assert err.file.endswith("/model-00002-of-00002.safetensors")
    assert err.message == "value must be a file that exists at this address (got HTTP 404)"


@pytest.mark.parametrize("status", [pytest.param(401, id="401"), pytest.param(403, id="403")])
def test_gated_repository_is_unauthorized(hub, status):
    """REMOTE-3.3: 401/403 on the listing (a gated repository) says to log in."""
    repo = hub.add_dir("org/gated", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.api_status[repo] = status
    err = refused(f"hf://{repo}")
    assert err.code == "remote.unauthorized"
    assert "hf auth login" in err.message and "gated" in err.message


def test_file_401_is_unauthorized(hub):
    """REMOTE-3.3: 401 on a file read."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.status["model.safetensors"] = 401
    err = refused(f"hf://{repo}")
    assert (err.code, err.actual) == ("remote.unauthorized", "HTTP 401")


def test_429_then_success_gives_the_same_report(hub):
    """REMOTE-3.4: 429 answers are retried with backoff; the report is the one without them."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    calm = validate(f"hf://{repo}", deep=True, sample=100)
    hub.faults.too_many["model.safetensors"] = 2
    busy = validate(f"hf://{repo}", deep=True, sample=100)
    same_report(busy, calm)
    assert busy.summary["remote"]["requests"] == calm.summary["remote"]["requests"] + 2


def test_429_every_time_is_rate_limited_after_bounded_retries(hub):
    """REMOTE-3.4: RETRIES retries, then remote.rate_limited."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.too_many["model.safetensors"] = 1000
    err = refused(f"hf://{repo}")
    assert err.code == "remote.rate_limited"
    assert err.actual == "HTTP 429 each time"
    assert sum(p.endswith("/model.safetensors") for _, p, _ in hub.requests) == http.RETRIES + 1


def test_truncated_body_is_a_short_read(hub):
    """REMOTE-3.6: a 206 whose body ends before Content-Length."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.truncate["model.safetensors"] = 4
    err = refused(f"hf://{repo}")
    assert err.code == "remote.short_read"
    assert err.message == "value must be 8 bytes at offset 0 (got 4 bytes before the body ended)"


def test_listed_size_disagreeing_with_content_range_is_refused(hub):
    """REMOTE-3.7: the listing says one size, Content-Range another."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    size = len(hub.repos[repo]["model.safetensors"])
    hub.faults.listed_size["model.safetensors"] = size + 100
    err = refused(f"hf://{repo}")
    assert err.code == "remote.size_mismatch"
    assert err.message == f"value must be a file of {size + 100} bytes (as listed) (got Content-Range says " \
        f"{size} bytes)"


def test_content_range_disagreeing_with_content_length_is_refused(hub):
    """REMOTE-3.7: a plain URL sized by HEAD's Content-Length, then a Content-Range of another size."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.content_range_total["model.safetensors"] = 5
    err = refused(hub.url(repo, "model.safetensors"))
    assert (err.code, err.actual) == ("remote.size_mismatch", "Content-Range says 5 bytes")


def test_failure_inside_a_format_check_is_could_not_run(hub):
    """REMOTE-3.8: a tensor read failing inside a check (which turns errors into findings) is still could-not-run."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    hub.faults.fail_after["model.safetensors"] = 2          # the two header reads pass, the first tensor fails
    err = refused(f"hf://{repo}", deep=True, sample=100)
    assert (err.code, err.actual) == ("remote.http", "HTTP 500")


# -- the command -------------------------------------------------------------------------------------------------

def test_cli_json_says_what_was_sampled_and_fetched(hub, capsys):
    """REMOTE-4.3: validate --json carries summary.sample and summary.remote; the bytes are the server's."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_zero_underflow_autogptq")
    assert main(["validate", f"hf://{repo}", "--deep", "--sample", "1", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["sample"] == {"asked": 1, "checked": ["model.layers.0.mlp.down_proj"]}
    assert doc["summary"]["remote"]["bytes_fetched"] == hub.served()
    assert doc["summary"]["remote"]["revision"] == hub.sha(repo)


def test_cli_text_says_what_was_sampled_and_fetched(hub, capsys):
    """REMOTE-4.3: the human report's second and third lines."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    assert main(["validate", f"hf://{repo}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "sampled: --sample 0: headers only, no layer read; the rest are named as not checked"
    assert lines[2] == (f"fetched: {hub.served()} bytes (1.1 KiB) in 3 requests (10.01% of the 11663 bytes "
                        f"(11.4 KiB) listed) from hf://{repo}@{hub.sha(repo)}")


def test_cli_could_not_run_for_a_missing_repository(hub, capsys):
    """REMOTE-3.2: exit 2 and the could-not-run document."""
    assert main(["validate", "hf://org/none", "--json"]) == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert (doc["verdict"], doc["error"]["code"]) == ("could-not-run", "remote.not_found")
    assert "[remote.not_found, REMOTE-3.2]" in err


def test_cli_without_the_hub_extra_names_it(hub, capsys, monkeypatch):
    """REMOTE-2.3: without huggingface_hub, hf:// says which extra it needs (exit 2)."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert main(["validate", "hf://org/any"]) == 2
    err = capsys.readouterr().err
    assert err == ("qformats: 'path' must be huggingface_hub installed for hf:// paths: pip install 'qformats[hub]' "
                   "(got huggingface_hub is not installed) [remote.extra.missing, REMOTE-2.3]\n")


def test_cli_inspect_gguf_rows_for_the_sample(hub, capsys):
    """REMOTE-4.2: inspect --sample N: rows with statistics for the sampled tensors, the others marked unchecked."""
    repo = hub.add_files("org/gguf", {"q4_k_m.gguf": (CKPTS / "q4_k_m.gguf").read_bytes()})
    assert main(["inspect", f"hf://{repo}/q4_k_m.gguf", "--sample", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    stats = [row["layer"] for row in doc["rows"] if "std" in row]
    assert stats == sorted(doc["summary"]["sample"]["checked"], key=[r["layer"] for r in doc["rows"]].index)
    assert len(stats) == 2 and len(doc["rows"]) == doc["summary"]["tensors"]


@pytest.mark.parametrize("html", [False, True], ids=["table", "html"])
def test_cli_inspect_gguf_counts_every_byte_it_fetched(hub, capsys, tmp_path, html):
    """REMOTE-4.3: inspect opens a remote GGUF again for its header and rows (and with --html for the pictures);
    the bytes and requests the document says are all the server sent, counted by the server."""
    repo = hub.add_files("org/gguf", {"q4_k_m.gguf": (CKPTS / "q4_k_m.gguf").read_bytes()})
    hub.reset()
    extra = ["--html", str(tmp_path / "page.html")] if html else []
    assert main(["inspect", f"hf://{repo}/q4_k_m.gguf", "--sample", "2", "--json", *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    ranged = [r for r in hub.requests if "/resolve/" in r[1]]
    assert doc["summary"]["remote"]["bytes_fetched"] == hub.served(repo)
    assert doc["summary"]["remote"]["requests"] == len(ranged)


# -- REMOTE-1.1 and REMOTE-3.5 ------------------------------------------------------------------------------------

def test_read_outside_the_file_is_refused_before_any_request(hub):
    """REMOTE-1.1: a read past the end is refused before a request is made or a buffer allocated."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    size = len(hub.repos[repo]["model.safetensors"])
    src = http.HttpRangeSource(hub.url(repo, "model.safetensors"), size=size)
    with pytest.raises(QFormatsError) as info:
        src.read(size - 4, 1 << 62)
    err = info.value
    assert (err.code, err.clause) == ("argument.invalid", "REMOTE-1.1")
    assert err.actual == f"{1 << 62} bytes at offset {size - 4}"
    assert src.traffic.requests == 0 and hub.requests == []


def test_unreachable_hub_is_could_not_run(hub, monkeypatch):
    """REMOTE-3.5: no answer from the endpoint (a closed port) is remote.http, not a traceback."""
    hub.stop()
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    err = refused("hf://org/gptq")
    assert err.code == "remote.http"
    assert err.constraint == "an answer from the hub"


def test_cli_inspect_headers_only_says_so(hub, capsys):
    """REMOTE-4.1: inspect of a remote safetensors checkpoint without --sample has no rows and says why (exit 0)."""
    repo = hub.add_dir("org/gptq", CKPTS / "gptq_v1_sym_4bit")
    assert main(["inspect", f"hf://{repo}"]) == 0
    assert capsys.readouterr().out == (f"hf://{repo}: headers only (a remote path's default, --sample 0): no layer "
                                       "read; --sample N reads N layers\n")


def test_stand_in_head_is_what_huggingface_hub_reads(hub):
    """REMOTE-2.1: the stand-in's HEAD answers huggingface_hub's own get_hf_file_metadata as the hub does (commit,
    size from X-Linked-Size, ETag), so the routes the tests drive are the client's."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    repo = hub.add_files("org/gguf", {"q4_k.gguf": (CKPTS / "q4_k.gguf").read_bytes()})
    meta = get_hf_file_metadata(hf_hub_url(repo, "q4_k.gguf", endpoint=hub.endpoint))
    assert (meta.commit_hash, meta.size) == (hub.sha(repo), (CKPTS / "q4_k.gguf").stat().st_size)
    assert meta.etag


def test_plain_http_index_reads_its_shards_beside_it(hub, tmp_path):
    """REMOTE-2.4: an http:// URL of a shard index: its shards (found by HEAD beside it) and config, as on disk."""
    local = sharded_dir(CKPTS / "gptq_v1_zero_underflow_autogptq", tmp_path / "sharded")
    repo = hub.add_dir("org/sharded", local)
    index = "model.safetensors.index.json"
    remote = validate(hub.url(repo, index), deep=True, sample=100)
    assert remote.verdict == "invalid"
    same_report(remote, validate(str(local / index), deep=True, sample=100))
