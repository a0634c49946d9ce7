"""Checkpoint discovery, every refusal whole (issue 33 item 3): code, tensor, constraint, actual value, message, file.

Inputs are built with st_builder in tmp_path; every expected value is worked by hand from spec/checkpoints.md
(CKPT-1..4), never from running qformats.containers.checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

import st_builder as sb
from qformats.containers.checkpoint import _checkpoint_subfolders, open_checkpoint, path_error
from qformats.errors import QFormatsError

GGUF = Path(__file__).resolve().parents[2] / "fixtures" / "containers" / "gguf" / "valid_v3.gguf"
IDX = "model.safetensors.index.json"
S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
SHARD_RULE = ("a shard file name in the index's directory: 1 to 255 UTF-8 bytes, no NUL, '/' or '\\', "
              "not '.' or '..'")
PICKLE_RULE = "safetensors or GGUF weights (pickles execute code when loaded and are never opened)"
NO_MODEL_DIR = "a directory with .safetensors weights, an index, or one .gguf file"


def err(call):
    """The whole refusal plus the file it names."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return e.code, e.tensor, e.constraint, e.actual, e.message, e.file


def want(code, tensor, constraint, actual, file):
    """ERR-1's message by hand: 'tensor' (or value) must be constraint (got actual)."""
    subject = f"'{tensor}'" if tensor else "value"
    shown = actual if isinstance(actual, str) else repr(actual)
    return code, tensor, constraint, actual, f"{subject} must be {constraint} (got {shown})", file


def write(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, blob in files.items():
        (root / name).write_bytes(blob)
    return root


def codes(ckpt) -> list[str]:
    return [f.code for f in ckpt.findings]


def message(ckpt, code: str) -> str:
    (only,) = [f for f in ckpt.findings if f.code == code]
    return only.message


# -- CKPT-1 paths ------------------------------------------------------------------------------

def test_missing_path_is_named_whole(tmp_path):
    """CKPT-1.1: a path that does not exist."""
    p = str(tmp_path / "nope")
    assert err(lambda: open_checkpoint(p)) == want("ckpt.path.missing", "path", "an existing file or directory", p, p)


def test_symlink_loop_is_named_whole(tmp_path):
    """CKPT-1.3: a -> b -> a."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    assert err(lambda: open_checkpoint(str(a))) == want(
        "ckpt.path.symlink_loop", None, "a path without a symbolic link loop", str(a), str(a))


def test_unreadable_path_carries_strerror():
    """CKPT-1.2: any other OSError is unreadable, with the system's words."""
    e = path_error(OSError(errno.EACCES, "Permission denied"), "f.safetensors")
    assert (e.code, e.tensor, e.constraint, e.actual, e.message, e.file) == want(
        "ckpt.path.unreadable", None, "a readable path", "Permission denied", "f.safetensors")


def test_unreadable_path_without_strerror_carries_the_exception_text():
    """CKPT-1.2: an OSError with no strerror is shown as its text."""
    e = path_error(OSError("boom"), "f")
    assert (e.code, e.actual, e.file) == ("ckpt.path.unreadable", "boom", "f")


def test_enotdir_is_missing():
    """CKPT-1.1: a path through a regular file does not exist."""
    e = path_error(OSError(errno.ENOTDIR, "Not a directory"), "x/y")
    assert (e.code, e.tensor, e.actual, e.file) == ("ckpt.path.missing", "path", "x/y", "x/y")


def test_a_path_with_a_nul_is_unreadable(tmp_path):
    """CKPT-1.2: os.stat raises ValueError on a NUL (an API caller or an audit --list line can pass one; the fuzz
    met it as an internal error): unreadable, naming the rule."""
    p = f"{tmp_path}\0x"
    assert err(lambda: open_checkpoint(p)) == want("ckpt.path.unreadable", None, "a path without NUL characters", p, p)


def test_fifo_is_unreadable_by_mode(tmp_path):
    """CKPT-1.2: a FIFO is refused from stat, its mode shown as ls shows it."""
    p = tmp_path / "pipe"
    os.mkfifo(p)
    os.chmod(p, 0o600)
    assert err(lambda: open_checkpoint(str(p))) == want(
        "ckpt.path.unreadable", None, "a regular file or a directory", "prw-------", str(p))


# -- CKPT-2.1 single files by name, then by first bytes ----------------------------------------

def test_unknown_file_is_no_model(tmp_path):
    """CKPT-1.4, CKPT-2.1.5: byte 8 is neither '{' nor JSON whitespace."""
    p = tmp_path / "weights.dat"
    p.write_bytes(b"hello world, not weights")
    assert err(lambda: open_checkpoint(str(p))) == want(
        "ckpt.no_model", "weights.dat", "a .safetensors, .gguf or checkpoint directory", "a file of unknown kind", str(p))


def test_eight_byte_file_is_no_model(tmp_path):
    """CKPT-2.1.5: a file of 8 bytes has no byte 8."""
    p = tmp_path / "w.dat"
    p.write_bytes(b"\x01" + bytes(7))
    assert err(lambda: open_checkpoint(str(p)))[0] == "ckpt.no_model"


def test_nine_byte_file_with_brace_is_read_as_safetensors(tmp_path):
    """CKPT-2.1.5: byte 8 '{' makes it a safetensors file; its header '{' alone is not JSON (ST-2)."""
    p = tmp_path / "w.dat"
    p.write_bytes((1).to_bytes(8, "little") + b"{")
    assert err(lambda: open_checkpoint(str(p)))[0].startswith("st.")


@pytest.mark.parametrize("lead", [" ", "\t", "\n", "\r", ""])
def test_sniffed_safetensors_header_start(tmp_path, lead):
    """CKPT-2.1.5: byte 8 '{' or JSON whitespace: read as safetensors under any name."""
    p = tmp_path / "weights.dat"
    p.write_bytes(sb.st_bytes(lead + sb.obj([("a", sb.A), ("b", sb.B)])))
    with open_checkpoint(str(p)) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.files, ckpt.tensor_names()) == ("safetensors", str(p), (str(p),), ["a", "b"])


@pytest.mark.parametrize("name", ["m.gguf", "weights.dat"])
def test_gguf_by_name_or_magic(tmp_path, name):
    """CKPT-2.1.2 by name, 2.1.5 by GGUF magic under a name that says nothing; path and files are the path given."""
    p = tmp_path / name
    shutil.copyfile(GGUF, p)
    with open_checkpoint(str(p)) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.files) == ("gguf", str(p), (str(p),))
        assert ckpt.tensor_names()


def test_pickle_suffix_refused_whole(tmp_path):
    """CKPT-2.2: a .pt path is refused by its name, never opened."""
    p = tmp_path / "m.pt"
    p.write_bytes(b"anything")
    assert err(lambda: open_checkpoint(str(p))) == want("ckpt.pickle.refused", "m.pt", PICKLE_RULE, "a .pt file", str(p))


def test_pickle_magic_refused_whole(tmp_path):
    """CKPT-2.2: PROTO 4 under an unknown name; the first four bytes shown."""
    p = tmp_path / "m.dat"
    p.write_bytes(b"\x80\x04\x95\x05\x06\x07")
    assert err(lambda: open_checkpoint(str(p))) == want(
        "ckpt.pickle.refused", "m.dat", PICKLE_RULE, "pickle/zip magic bytes b'\\x80\\x04\\x95\\x05'", str(p))


def test_safetensors_file_reads_configs_beside_it(tmp_path):
    """CKPT-2.1.1: a .safetensors file's directory configs count; the path is the file."""
    d = write(tmp_path / "c", {"model.safetensors": sb.base(),
                               "config.json": json.dumps({"quantization_config": sb.QCONFIG}).encode()})
    p = str(d / "model.safetensors")
    with open_checkpoint(p) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.files) == ("safetensors", p, (p,))
        assert ckpt.model_config == {"quantization_config": sb.QCONFIG}
        assert [(c.file, c.key, c.config) for c in ckpt.configs] == [
            (str(d / "config.json"), "quantization_config", sb.QCONFIG)]
        assert codes(ckpt) == []


def test_index_path_opens_that_index(tmp_path):
    """CKPT-2.1.3: the index given is used even beside model.safetensors.index.json."""
    files = sb.sharded()
    files["other.safetensors.index.json"] = sb.index({"x.qweight": S1}, total=16)
    d = write(tmp_path / "c", files)
    p = str(d / "other.safetensors.index.json")
    with open_checkpoint(p) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.index_file, ckpt.tensor_names()) == ("sharded", p, p, ["x.qweight"])
        assert ckpt.files == (str(d / S1),)


def test_relative_index_path_without_folder(tmp_path, monkeypatch):
    """CKPT-2.1.3: an index named without a folder is the current directory's."""
    write(tmp_path, sb.sharded())
    monkeypatch.chdir(tmp_path)
    with open_checkpoint(IDX) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.tensor_names()) == ("sharded", IDX, ["x.qweight", "y.qweight"])


# -- CKPT-2 / 3.2 directories ------------------------------------------------------------------

def test_two_indexes_neither_preferred_is_ambiguous(tmp_path):
    """CKPT-3.2: two indexes, none named model.safetensors.index.json."""
    files = sb.sharded()
    blob = files.pop(IDX)
    d = write(tmp_path / "c", {**files, "a.safetensors.index.json": blob, "b.safetensors.index.json": blob})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.ambiguous", None, f"one index file or one named {IDX}",
        ["a.safetensors.index.json", "b.safetensors.index.json"], str(d))


def test_two_indexes_one_preferred_uses_it(tmp_path):
    """CKPT-3.2: model.safetensors.index.json wins over another index."""
    files = sb.sharded()
    files["a.safetensors.index.json"] = sb.index({"x.qweight": S1}, total=16)
    d = write(tmp_path / "c", files)
    with open_checkpoint(str(d)) as ckpt:
        assert (ckpt.index_file, ckpt.path, ckpt.tensor_names()) == (str(d / IDX), str(d), ["x.qweight", "y.qweight"])


def test_one_index_of_another_name_is_used(tmp_path):
    """CKPT-3.2: a single index is used whatever its name."""
    files = sb.sharded()
    files["weights.safetensors.index.json"] = files.pop(IDX)
    d = write(tmp_path / "c", files)
    with open_checkpoint(str(d)) as ckpt:
        assert (ckpt.kind, ckpt.index_file) == ("sharded", str(d / "weights.safetensors.index.json"))


def test_directory_of_one_gguf(tmp_path):
    """CKPT-2.1.4: a directory whose weights are one .gguf file; the path is the directory."""
    d = tmp_path / "c"
    d.mkdir()
    shutil.copyfile(GGUF, d / "m.gguf")
    with open_checkpoint(str(d)) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.files) == ("gguf", str(d), (str(d / "m.gguf"),))


def test_directory_of_pickles_only_refused(tmp_path):
    """CKPT-2.2: a directory whose only weights are pickles, named."""
    d = write(tmp_path / "c", {"pytorch_model.bin": b"\x80\x02", "config.json": b"{}"})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.pickle.refused", "pytorch_model.bin", PICKLE_RULE,
        "the only weights here are pickles: ['pytorch_model.bin']", str(d / "pytorch_model.bin"))


@pytest.mark.parametrize("names, what", [
    ([], "0 files, none of them weights"),
    (["README.md"], "1 file, none of them weights"),
    (["README.md", "config.json"], "2 files, none of them weights"),
    (["a.gguf", "b.gguf"], "2 .gguf files (pass one)"),
])
def test_directory_without_weights_is_no_model(tmp_path, names, what):
    """CKPT-1.4: nothing that can be a checkpoint; the count worded in the singular at 1."""
    d = write(tmp_path / "c", {n: b"{}" for n in names})
    assert err(lambda: open_checkpoint(str(d))) == want("ckpt.no_model", "path", NO_MODEL_DIR, what, str(d))


@pytest.mark.parametrize("count, tail", [(3, "s0, s1, s2"), (4, "s0, s1, s2 (+1 more)"), (5, "s0, s1, s2 (+2 more)")])
def test_parent_of_checkpoints_names_three_subfolders(tmp_path, count, tail):
    """CKPT-1.4: a parent of checkpoints names the first three (sorted) and counts the rest."""
    d = tmp_path / "c"
    for i in range(count):
        write(d / f"s{i}", {"model.safetensors": sb.base()})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.no_model", "path", NO_MODEL_DIR,
        f"0 files, none of them weights; checkpoints in subfolders, pass one: {tail}", str(d))


def test_subfolder_scan_stops_at_1000_entries(tmp_path):
    """CKPT-1.4: only the first 1000 entries of a parent are looked at (bounded work)."""
    for i in range(1001):
        write(tmp_path / f"s{i:04d}", {"m.safetensors": b""})
    assert len(_checkpoint_subfolders(str(tmp_path))) == 1000


def test_subfolder_without_weights_is_not_named(tmp_path):
    """CKPT-1.4: a subfolder and a file beside it are not checkpoints."""
    write(tmp_path / "c" / "docs", {"README.md": b"x"})
    write(tmp_path / "c" / "w", {"m.safetensors": b""})
    (tmp_path / "c" / "x.safetensors").mkdir()
    assert _checkpoint_subfolders(str(tmp_path / "c")) == ["w"]


def test_pickle_beside_weights_is_skipped_with_its_name(tmp_path):
    """CKPT-2.3: the pickle is reported, not opened; the directory is the path."""
    d = write(tmp_path / "c", {"model.safetensors": sb.base(), "training_args.bin": b"\x80\x02"})
    with open_checkpoint(str(d)) as ckpt:
        assert (ckpt.kind, ckpt.path) == ("safetensors", str(d))
        assert message(ckpt, "ckpt.pickle.skipped") == (
            "pickle file training_args.bin not opened (safetensors weights are used instead)")


# -- CKPT-3.1 the index ------------------------------------------------------------------------

def _index_dir(tmp_path, text: str) -> tuple[Path, str]:
    files = sb.sharded()
    files[IDX] = text.encode()
    d = write(tmp_path / "c", files)
    return d, str(d / IDX)


@pytest.mark.parametrize("text, subject, constraint, actual", [
    ("[]", "index", "a JSON object", "list"),
    ('{"weight_map": {}, "weight_map": {}}', "index", "each key once", "a duplicate top-level key"),
    ('{"metadata": {}}', "weight_map", "an object {tensor name: shard file}", "NoneType"),
    ('{"weight_map": []}', "weight_map", "an object {tensor name: shard file}", "list"),
    (f'{{"weight_map": {{"x": "{S1}", "x": "{S1}"}}}}', "weight_map.x", "a tensor listed once", "duplicate"),
    ('{"weight_map": {"\\ud800": "s.safetensors"}}', "weight_map", "tensor names without lone surrogate escapes",
     "'\\ud800'"),
])
def test_index_structure_refused_whole(tmp_path, text, subject, constraint, actual):
    """CKPT-3.1: an object, each key once, weight_map an object of text names each listed once."""
    d, idx = _index_dir(tmp_path, text)
    assert err(lambda: open_checkpoint(str(d))) == want("ckpt.index.json", subject, constraint, actual, idx)


@pytest.mark.parametrize("shard, shown", [
    ("", "''"), (".", "'.'"), ("..", "'..'"), ("../x.safetensors", "'../x.safetensors'"),
    ("a\\b", "'a\\\\b'"), ("a\u0000b", "'a\\x00b'"), (5, "5"), ("\ud800", "'\\ud800'"),
    ("a" * 256, None),
])
def test_bad_shard_name_refused_whole(tmp_path, shard, shown):
    """CKPT-3.1: a plain name of 1..255 UTF-8 bytes; 256 is one past."""
    d, idx = _index_dir(tmp_path, json.dumps({"weight_map": {"x": shard}}))
    shown = shown or repr(shard)[:80]
    assert err(lambda: open_checkpoint(str(d))) == want("ckpt.index.json", "weight_map.x", SHARD_RULE, shown, idx)


def test_shard_name_of_255_bytes_passes_the_name_rule(tmp_path):
    """CKPT-3.1, 3.3: 255 bytes is a name; no such file is then shard_missing."""
    name = "a" * 245 + ".safetensors"[:10]
    assert len(name.encode()) == 255
    d, idx = _index_dir(tmp_path, json.dumps({"weight_map": {"x": name}}))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.shard_missing", name, "an existing file named by the index", "no such file", idx)


def test_index_values_limit(tmp_path):
    """CKPT-3.1: 2^22 values is the limit (counted before parsing); one more is refused."""
    commas = (1 << 22) - 1                     # values = commas + 1 = 2^22: counted, then parsed
    d, idx = _index_dir(tmp_path, "," * commas)
    assert err(lambda: open_checkpoint(str(d)))[:2] == ("ckpt.index.json", IDX)
    assert "JSON values" not in err(lambda: open_checkpoint(str(d)))[2]
    (d / IDX).write_bytes(b"," * (commas + 1))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.json", IDX, f"at most {1 << 22} JSON values", f"up to {(1 << 22) + 1}", idx)


def test_index_size_limit(tmp_path):
    """CKPT-3.1: at most 100,000,000 bytes, refused from its size before reading."""
    d, idx = _index_dir(tmp_path, "")
    with open(idx, "wb") as fh:
        fh.truncate(100_000_001)
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.json", IDX, "at most 100000000 bytes", 100_000_001, idx)


# -- CKPT-3.3..3.7 shards against the index -----------------------------------------------------

def test_missing_shard_refused_whole(tmp_path):
    """CKPT-3.3: a shard the index names is not there."""
    d = write(tmp_path / "c", sb.sharded(drop=S2))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.shard_missing", S2, "an existing file named by the index", "no such file", str(d / IDX))


def test_tensor_in_another_listed_shard(tmp_path):
    """CKPT-3.4: mapped to shard 2, held by shard 1 (also listed)."""
    d = write(tmp_path / "c", sb.sharded({"x.qweight": S2, "y.qweight": S1}))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.tensor_elsewhere", "x.qweight", f"in {S2}, as the index says", f"in {[S1]}", str(d / IDX))


def test_tensor_in_an_unlisted_file(tmp_path):
    """CKPT-3.4: mapped to shard 2, held only by shard 1, which the index does not name."""
    d = write(tmp_path / "c", sb.sharded({"x.qweight": S2, "y.qweight": S2}))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.tensor_elsewhere", "x.qweight", f"in {S2}, as the index says", f"in {[S1]}", str(d / IDX))


def test_tensor_in_no_shard(tmp_path):
    """CKPT-3.4: held by no file of the directory."""
    d = write(tmp_path / "c", sb.sharded({"x.qweight": S1, "y.qweight": S2, "z": S1}))
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.tensor_missing", "z", f"in {S1}, as the index says", "in no shard", str(d / IDX))


def test_empty_weight_map_has_no_tensors(tmp_path):
    """CKPT-2.5: an index mapping nothing."""
    d = write(tmp_path / "c", sb.sharded())
    (d / IDX).write_bytes(b'{"weight_map": {}}')
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.tensors.none", None, "a checkpoint with at least one tensor", "0 tensors", str(d / IDX))


def test_sharded_checkpoint_whole(tmp_path):
    """CKPT-3: a valid two-shard checkpoint: files sorted, every tensor located, no warnings."""
    d = write(tmp_path / "c", sb.sharded())
    with open_checkpoint(str(d)) as ckpt:
        assert (ckpt.kind, ckpt.path, ckpt.index_file) == ("sharded", str(d), str(d / IDX))
        assert ckpt.files == (str(d / S1), str(d / S2))
        assert (ckpt.file_of("x.qweight"), ckpt.file_of("y.qweight")) == (str(d / S1), str(d / S2))
        assert list(ckpt.headers) == [str(d / S1), str(d / S2)]
        assert ckpt.tensor("y.qweight").tolist() == [0x03020100, 0x07060504, 0x0B0A0908, 0x0F0E0D0C]
        assert codes(ckpt) == []
        assert err(lambda: ckpt.file_of("nope")) == want(
            "tensor.missing", "nope", "a tensor of this checkpoint (2 tensors)", "absent", str(d))


def test_unlisted_tensor_and_shard_warned(tmp_path):
    """CKPT-3.5, 3.6: shard 1 holds a tensor the index does not map; a third file is not named."""
    files = sb.sharded({"x.qweight": S1}, total=16)
    files[S1] = sb.st_bytes(sb.obj([("w", {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]}),
                                    ("x.qweight", {"dtype": "I32", "shape": [4], "data_offsets": [4, 20]})]),
                            bytes(20))
    d = write(tmp_path / "c", files)
    with open_checkpoint(str(d)) as ckpt:
        (unlisted,) = [f for f in ckpt.findings if f.code == "ckpt.index.tensor_unlisted"]
        assert (unlisted.message, unlisted.tensor) == (f"{S1} holds 1 tensors the index does not map to it: ['w']", "w")
        assert message(ckpt, "ckpt.index.shard_unlisted") == f"{S2} is not named by {IDX}"
        assert ckpt.tensor_names() == ["x.qweight"]


@pytest.mark.parametrize("total, shown", [(31, "31"), ("32", "'32'"), (32.0, "32.0"), (True, "True")])
def test_total_size_that_differs_is_warned(tmp_path, total, shown):
    """CKPT-3.7: the integer sum of mapped bytes is 2 x 16 = 32; anything else is warned."""
    d = write(tmp_path / "c", sb.sharded())
    (d / IDX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": {"x.qweight": S1, "y.qweight": S2}}))
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.index.total_size") == (
            f"{IDX} metadata.total_size is {shown}; the mapped tensors hold 32 bytes")


@pytest.mark.parametrize("meta", [{"total_size": 32}, {}, None, []])
def test_total_size_right_or_absent_is_quiet(tmp_path, meta):
    """CKPT-3.7: 32 is right; an absent total (or metadata not an object) says nothing."""
    d = write(tmp_path / "c", sb.sharded())
    top = {"weight_map": {"x.qweight": S1, "y.qweight": S2}} | ({} if meta is None else {"metadata": meta})
    (d / IDX).write_text(json.dumps(top))
    with open_checkpoint(str(d)) as ckpt:
        assert codes(ckpt) == []


# -- CKPT-4 configs ------------------------------------------------------------------------------

def _config_dir(tmp_path, configs: dict[str, object]) -> Path:
    files = {"model.safetensors": sb.base()}
    files.update({n: (v if isinstance(v, bytes) else json.dumps(v).encode()) for n, v in configs.items()})
    return write(tmp_path / "c", files)


def test_config_not_an_object(tmp_path):
    """CKPT-4.2: config.json's top level must be an object."""
    d = _config_dir(tmp_path, {"config.json": [1]})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.config.json", "config.json", "a JSON object", "list", str(d / "config.json"))


def test_quantization_config_not_an_object(tmp_path):
    """CKPT-4.2: quantization_config must be an object or null."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": [4]}})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.config.json", "config.json['quantization_config']", "a JSON object", "list", str(d / "config.json"))


def test_side_config_not_an_object(tmp_path):
    """CKPT-4.2: quantize_config.json's top level must be an object."""
    d = _config_dir(tmp_path, {"quantize_config.json": "gptq"})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.config.json", "quantize_config.json", "a JSON object", "str", str(d / "quantize_config.json"))


def test_config_size_limit(tmp_path):
    """CKPT-4.2: a config over 100,000,000 bytes is refused from its size."""
    d = _config_dir(tmp_path, {"config.json": b""})
    with open(d / "config.json", "wb") as fh:
        fh.truncate(100_000_001)
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.config.json", "config.json", "at most 100000000 bytes", 100_000_001, str(d / "config.json"))


def test_null_quantization_config_keeps_the_model_config(tmp_path):
    """CKPT-4.1, 4.3: null is no config; config.json is still the model config; the side file is primary."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": None, "hidden_size": 8},
                               "quantize_config.json": sb.QCONFIG})
    with open_checkpoint(str(d)) as ckpt:
        assert ckpt.model_config == {"quantization_config": None, "hidden_size": 8}
        assert [(c.file, c.key) for c in ckpt.configs] == [(str(d / "quantize_config.json"), None)]
        assert ckpt.config == sb.QCONFIG
        assert codes(ckpt) == []


def test_no_config_is_warned_in_full(tmp_path):
    """CKPT-4.3: no quantization config beside the weights."""
    d = _config_dir(tmp_path, {"config.json": {"hidden_size": 8}})
    with open_checkpoint(str(d)) as ckpt:
        assert ckpt.configs == () and ckpt.config is None and ckpt.model_config == {"hidden_size": 8}
        assert message(ckpt, "ckpt.config.none") == (
            "no quantization config beside the weights: none of config.json['quantization_config'], "
            "quantize_config.json, quant_config.json; the format's label is unknown (GPTQ layers are read as "
            "their zeros say, v1 where they cannot tell, with bits and group size from the tensors)")


def test_every_config_recorded_in_order(tmp_path):
    """CKPT-4.1: config.json, quantize_config.json, quant_config.json, each with its file and key."""
    q = {"bits": 4}
    d = _config_dir(tmp_path, {"quant_config.json": q, "quantize_config.json": q,
                               "config.json": {"quantization_config": q}})
    with open_checkpoint(str(d)) as ckpt:
        assert [(os.path.basename(c.file), c.key, c.config) for c in ckpt.configs] == [
            ("config.json", "quantization_config", q), ("quantize_config.json", None, q), ("quant_config.json", None, q)]
        assert codes(ckpt) == []


def test_conflict_names_keys_and_readers(tmp_path):
    """CKPT-4.4: config.json and quantize_config.json disagree on bits and sym."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": {"bits": 4, "sym": True, "group_size": 32}},
                               "quantize_config.json": {"sym": False, "bits": 8, "group_size": 32}})
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.config.conflict") == (
            "config.json and quantize_config.json disagree on ['bits', 'sym']; AutoGPTQ/GPTQModel read "
            "quantize_config.json first, transformers/vLLM read config.json first")


def test_conflict_with_quant_config(tmp_path):
    """CKPT-4.4: AutoAWQ 0.1.6..0.1.8 read quant_config.json only."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": {"w_bit": 4}}, "quant_config.json": {"w_bit": 3}})
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.config.conflict") == (
            "config.json and quant_config.json disagree on ['w_bit']; AutoAWQ 0.1.6 .. 0.1.8 read "
            "quant_config.json only, transformers/vLLM read config.json first")


def test_version_compares_in_any_case(tmp_path):
    """CKPT-4.4: GEMM and gemm are one version."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": {"version": "gemm"}},
                               "quant_config.json": {"version": "GEMM"}})
    with open_checkpoint(str(d)) as ckpt:
        assert codes(ckpt) == []


def test_version_that_differs_conflicts(tmp_path):
    """CKPT-4.4: GEMM and GEMV differ in any case; a non-text version compares as is."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": {"version": "gemv", "v": "A"}},
                               "quant_config.json": {"version": "GEMM", "v": "a"}})
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.config.conflict").startswith("config.json and quant_config.json disagree on ['v', 'version'];")


def test_modelopt_config_in_config_json_keys(tmp_path):
    """CKPT-4.5: hf_quant_config.json's quantization read as ModelOpt's config.json keys."""
    producer = {"name": "modelopt", "version": "0.47.0"}
    d = _config_dir(tmp_path, {"hf_quant_config.json": {
        "producer": producer, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None,
                                               "exclude_modules": ["lm_head"]}}})
    with open_checkpoint(str(d)) as ckpt:
        (c,) = ckpt.configs
        assert (c.file, c.key) == (str(d / "hf_quant_config.json"), "quantization")
        assert c.config == {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": None,
                            "ignore": ["lm_head"], "producer": producer}
        assert ckpt.model_config is None


def test_modelopt_config_without_producer_or_excludes(tmp_path):
    """CKPT-4.5: only the keys present are carried."""
    d = _config_dir(tmp_path, {"hf_quant_config.json": {"quantization": {"quant_algo": "NVFP4"}}})
    with open_checkpoint(str(d)) as ckpt:
        assert ckpt.config == {"quant_method": "modelopt", "quant_algo": "NVFP4"}


def test_modelopt_and_config_json_agree(tmp_path):
    """CKPT-4.5, 4.4: both files naming one config raise no conflict."""
    d = _config_dir(tmp_path, {
        "config.json": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}},
        "hf_quant_config.json": {"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}})
    with open_checkpoint(str(d)) as ckpt:
        assert len(ckpt.configs) == 2 and codes(ckpt) == []


# -- CKPT-2.4, 2.5 unindexed directories ---------------------------------------------------------

def test_duplicate_tensor_across_files(tmp_path):
    """CKPT-2.4: one name in two unindexed files."""
    d = write(tmp_path / "c", {"a.safetensors": sb.base(), "b.safetensors": sb.base()})
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.tensor.duplicate", "a", "in one weight file only", "in a.safetensors and b.safetensors", str(d))


def test_no_tensors_in_unindexed_file(tmp_path):
    """CKPT-2.5: a valid header with no tensors."""
    p = tmp_path / "m.safetensors"
    p.write_bytes(sb.st_bytes("{}", b""))
    assert err(lambda: open_checkpoint(str(p))) == want(
        "ckpt.tensors.none", None, "a checkpoint with at least one tensor", "0 tensors", str(p))


# -- more of CKPT-2.2, 3.1, 3.4, 1.2 ------------------------------------------------------------

def test_pickles_by_suffix_in_any_case_not_by_known_names(tmp_path):
    """CKPT-2.2: .bin in any case is a pickle by name; .safetensors, .gguf and .json are never sniffed."""
    files = sb.sharded()
    files.update({"ARGS.BIN": b"not pickle bytes", "extra.safetensors": b"\x80\x02xx", "notes.json": b"PK\x03\x04",
                  "other.gguf": b"\x80\x04xx"})
    d = write(tmp_path / "c", files)
    with open_checkpoint(str(d)) as ckpt:
        assert [(f.code, f.message) for f in ckpt.findings] == [
            ("ckpt.pickle.skipped", "pickle file ARGS.BIN not opened (safetensors weights are used instead)"),
            ("ckpt.index.shard_unlisted", f"extra.safetensors is not named by {IDX}")]


def test_unreadable_unlisted_file_is_passed_over(tmp_path):
    """CKPT-3.4: an unlisted file that does not parse is skipped while looking for the tensor elsewhere."""
    files = sb.sharded({"x.qweight": S2, "y.qweight": S2})
    files["0bad.safetensors"] = b"junk"
    d = write(tmp_path / "c", files)
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.tensor_elsewhere", "x.qweight", f"in {S2}, as the index says", f"in {[S1]}", str(d / IDX))


def test_shortest_and_capital_shard_names(tmp_path):
    """CKPT-3.1: a 1-byte name and a name with capitals are plain shard names."""
    d = write(tmp_path / "c", {"a": sb.shard("x"), "X": sb.shard("y"), IDX: sb.index({"x": "a", "y": "X"})})
    with open_checkpoint(str(d)) as ckpt:
        assert ckpt.files == (str(d / "X"), str(d / "a"))


def test_shard_that_is_a_directory_is_unreadable(tmp_path):
    """CKPT-1.2, 3.3: a shard name that is a folder exists but cannot be read."""
    files = sb.sharded()
    del files[S2]
    d = write(tmp_path / "c", files)
    (d / S2).mkdir()
    code, subject, constraint, actual, _, file = err(lambda: open_checkpoint(str(d)))
    # ST-5.4: the reader refuses a non-regular file after stat; its words are the reader's (not asserted here)
    assert (code, subject, constraint, file) == ("ckpt.path.unreadable", None, "a readable path", str(d / S2))
    assert isinstance(actual, str) and actual


def test_index_that_is_a_directory_is_unreadable(tmp_path):
    """CKPT-1.2: an index path that is a folder cannot be read."""
    from qformats.containers.checkpoint import _open_file

    p = tmp_path / IDX
    p.mkdir()
    assert err(lambda: _open_file(str(p))) == want("ckpt.path.unreadable", None, "a readable path", "Is a directory", str(p))


def test_directory_that_is_a_file_is_missing(tmp_path):
    """CKPT-1.1: listing a regular file as a folder (ENOTDIR)."""
    from qformats.containers.checkpoint import _open_dir

    p = tmp_path / "f"
    p.write_bytes(b"")
    assert err(lambda: _open_dir(str(p))) == want("ckpt.path.missing", "path", "an existing file or directory", str(p), str(p))


def test_index_at_the_size_limit_is_read(tmp_path):
    """CKPT-3.1: 100,000,000 bytes is allowed (then refused as JSON, not for its size)."""
    d, idx = _index_dir(tmp_path, "")
    with open(idx, "wb") as fh:
        fh.truncate(100_000_000)
    code, subject, constraint, _, _, file = err(lambda: open_checkpoint(str(d)))
    assert (code, subject, constraint, file) == ("ckpt.index.json", IDX, "UTF-8 JSON", idx)


def test_index_not_json_refused_whole(tmp_path):
    """CKPT-3.1: NaN is not JSON in an index (serde_json); the decoder's words, at most 200 characters."""
    d, idx = _index_dir(tmp_path, '{"weight_map": {}, "metadata": {"total_size": NaN}}')
    code, subject, constraint, actual, msg, file = err(lambda: open_checkpoint(str(d)))
    assert (code, subject, constraint, file) == ("ckpt.index.json", IDX, "UTF-8 JSON", idx)
    assert "NaN" in actual and len(actual) <= 200 and msg == f"'{IDX}' must be UTF-8 JSON (got {actual})"


def test_gguf_tensor_plain_as_array_quantized_as_rows(tmp_path):
    """CKPT-2.1.2 (Checkpoint.tensor): F32 as float32 values, Q4_K as uint8 block rows of 144 bytes."""
    with open_checkpoint(str(GGUF)) as ckpt:
        assert ckpt.tensor("a.weight").dtype.name == "float32"
        rows = ckpt.tensor("b.weight")
        assert (rows.dtype.name, rows.ndim, rows.shape[1] % 144) == ("uint8", 2, 0)


class Spy:
    """A Files that records which calls reach it (REMOTE-1.4: discovery asks only its Files)."""

    def __init__(self):
        from qformats.containers.checkpoint import LOCAL
        self.local, self.calls = LOCAL, set()
        self.remote = False

    def __getattr__(self, attr):
        fn = getattr(self.local, attr)

        def call(*args):
            self.calls.add((attr, os.path.basename(str(args[-1] if attr != "tensor" else args[0].path))))
            return fn(*args)
        return call


def test_discovery_asks_only_its_files_sharded(tmp_path):
    """REMOTE-1.4: listing, index, configs, shard existence and headers all go through the Files given."""
    from qformats.containers.checkpoint import _open_dir

    files = sb.sharded()
    files.update({"config.json": b'{"quantization_config": {"bits": 4}}', "x.dat": b"\x80\x02", "extra.safetensors": sb.base()})
    d = write(tmp_path / "c", files)
    spy = Spy()
    ckpt = _open_dir(str(d), io=spy)
    ckpt.tensor("x.qweight")
    assert {("listing", "c"), ("sniff", "x.dat"), ("read_small", "ckpt.config.json"), ("read_small", "ckpt.index.json"),
            ("header", S1), ("header", S2), ("tensor", S1), ("join", S1)} <= spy.calls
    assert ckpt.io is spy
    (d / S2).unlink()
    with pytest.raises(QFormatsError):
        _open_dir(str(d), io=spy)
    assert ("check_exists", S2) in spy.calls


def test_discovery_asks_only_its_files_single(tmp_path):
    """REMOTE-1.4: a single file's configs, an unlisted holder's header, GGUF and sniffing go through the Files given."""
    from qformats.containers.checkpoint import _open_dir, _open_file

    d = write(tmp_path / "c", {"model.safetensors": sb.base(), "quantize_config.json": b'{"bits": 4}'})
    spy = Spy()
    ckpt = _open_file(str(d / "model.safetensors"), spy)
    assert {("listing", "c"), ("read_small", "ckpt.config.json"), ("header", "model.safetensors")} <= spy.calls
    assert ckpt.io is spy and ckpt.config == {"bits": 4}
    g = tmp_path / "g"
    g.mkdir()
    shutil.copyfile(GGUF, g / "w.dat")
    shutil.copyfile(GGUF, g / "m.gguf")
    assert _open_file(str(g / "w.dat"), spy).io is spy and _open_file(str(g / "m.gguf"), spy).io is spy
    assert {("sniff", "w.dat"), ("gguf", "w.dat"), ("gguf", "m.gguf")} <= spy.calls
    e = write(tmp_path / "e", {"only.gguf": GGUF.read_bytes()})
    assert _open_dir(str(e), io=spy).io is spy and ("gguf", "only.gguf") in spy.calls
    h = write(tmp_path / "h", {"unlisted.safetensors": sb.shard("x.qweight"), S2: sb.shard("y.qweight"),
                               IDX: sb.index({"x.qweight": S2, "y.qweight": S2})})
    with pytest.raises(QFormatsError):
        _open_dir(str(h), io=spy)
    assert ("header", "unlisted.safetensors") in spy.calls
    n = write(tmp_path / "n", {"README.md": b"x"})
    write(n / "s", {"m.safetensors": b""})
    with pytest.raises(QFormatsError):
        _open_dir(str(n), io=spy)
    assert ("subfolders", "n") in spy.calls


def test_long_bad_shard_name_is_shown_cut_to_80(tmp_path):
    """CKPT-3.1: the refused name is shown as its ASCII repr, cut to 80 characters."""
    shard = "a/" * 50
    d, idx = _index_dir(tmp_path, json.dumps({"weight_map": {"x": shard}}))
    assert err(lambda: open_checkpoint(str(d))) == want("ckpt.index.json", "weight_map.x", SHARD_RULE,
                                                        "'" + shard[:79], idx)


def test_long_surrogate_name_is_shown_cut_to_80(tmp_path):
    """CKPT-3.1: a tensor name with a lone surrogate, shown escaped and cut to 80 characters."""
    d, idx = _index_dir(tmp_path, '{"weight_map": {"\\ud800' + "b" * 100 + '": "s"}}')
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.json", "weight_map", "tensor names without lone surrogate escapes", "'\\ud800" + "b" * 73, idx)


def test_unlisted_tensors_named_five_at_most(tmp_path):
    """CKPT-3.5: six unmapped tensors are counted and the first five (sorted) named."""
    pairs = [(f"t{i}", {"dtype": "I32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}) for i in range(6)]
    pairs.append(("x.qweight", {"dtype": "I32", "shape": [4], "data_offsets": [24, 40]}))
    files = sb.sharded(total=None)
    files[S1] = sb.st_bytes(sb.obj(pairs), bytes(40))
    d = write(tmp_path / "c", files)
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.index.tensor_unlisted") == (
            f"{S1} holds 6 tensors the index does not map to it: ['t0', 't1', 't2', 't3', 't4']")


def test_conflict_with_modelopt_config_names_no_side_reader(tmp_path):
    """CKPT-4.4, 4.5: hf_quant_config.json has no tool that reads it before config.json."""
    d = _config_dir(tmp_path, {"config.json": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}},
                               "hf_quant_config.json": {"quantization": {"quant_algo": "NVFP4"}}})
    with open_checkpoint(str(d)) as ckpt:
        assert message(ckpt, "ckpt.config.conflict") == (
            "config.json and hf_quant_config.json disagree on ['quant_algo']; transformers/vLLM read config.json first")


def test_subfolders_ignore_files_beside_them(tmp_path):
    """CKPT-1.4: regular files of a parent are not subfolders; the rest is still scanned."""
    for name in ("a.txt", "m.txt", "z.txt"):
        write(tmp_path / "c", {name: b"x"})
    for sub in ("b", "n", "y"):
        write(tmp_path / "c" / sub, {"w.gguf": b""})
    assert _checkpoint_subfolders(str(tmp_path / "c")) == ["b", "n", "y"]


def test_single_file_without_config_is_warned(tmp_path):
    """CKPT-4.3: a .safetensors file whose directory holds no quantization config."""
    d = write(tmp_path / "c", {"model.safetensors": sb.base()})
    with open_checkpoint(str(d / "model.safetensors")) as ckpt:
        assert codes(ckpt) == ["ckpt.config.none"]


def test_only_safetensors_files_are_searched_for_a_missing_tensor(tmp_path):
    """CKPT-3.4: a file of another name holding the tensor does not make it 'elsewhere'."""
    files = sb.sharded({"x.qweight": S1, "y.qweight": S2, "z": S1})
    files["z.bak"] = sb.shard("z")
    d = write(tmp_path / "c", files)
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.index.tensor_missing", "z", f"in {S1}, as the index says", "in no shard", str(d / IDX))


def test_shard_in_a_link_loop_is_refused(tmp_path):
    """CKPT-1.3, 3.1: a shard the index names that loops through links."""
    files = sb.sharded()
    del files[S2]
    d = write(tmp_path / "c", files)
    (d / S2).symlink_to(d / "loop")
    (d / "loop").symlink_to(d / S2)
    p = str(d / S2)
    assert err(lambda: open_checkpoint(str(d))) == want(
        "ckpt.path.symlink_loop", None, "a path without a symbolic link loop", p, p)


def test_gguf_that_is_a_directory_is_unreadable(tmp_path):
    """CKPT-1.2 (GGUF-6.5): a .gguf path that is a folder cannot be read."""
    from qformats.containers.checkpoint import _open_file

    p = tmp_path / "m.gguf"
    p.mkdir()
    code, subject, constraint, actual, _, file = err(lambda: _open_file(str(p)))
    assert (code, subject, constraint, file) == ("ckpt.path.unreadable", None, "a readable path", str(p))
    assert isinstance(actual, str) and actual


def test_remote_path_goes_to_the_remote_reader():
    """REMOTE-2: an hf:// path without a repository is refused by the remote reader, with a remote code."""
    assert err(lambda: open_checkpoint("hf://"))[0].startswith("remote.")


def test_discovery_asks_only_its_files_other_routes(tmp_path):
    """REMOTE-1.4: an index path, an unindexed directory and a sniffed file are read through the Files given."""
    from qformats.containers.checkpoint import _open_dir, _open_file

    d = write(tmp_path / "c", sb.sharded())
    u = write(tmp_path / "u", {"model.safetensors": sb.base(), "w.dat": sb.base()})
    spy = Spy()
    assert _open_file(str(d / IDX), spy).io is spy
    assert _open_dir(str(d), io=spy).io is spy
    assert _open_file(str(u / "w.dat"), spy).io is spy
    assert _open_dir(str(u), io=spy).io is spy
