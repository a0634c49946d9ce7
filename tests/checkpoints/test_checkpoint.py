"""Checkpoint discovery (spec/checkpoints.md CKPT-1..4): files, directories, shards, configs, pickles."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

import st_builder as sb
from qformats.containers.checkpoint import COULD_NOT_RUN_CODES, WARNING_CODES, open_checkpoint
from qformats.errors import CODES, QFormatsError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHARED = Path("/work/shared/golden")


def _golden(sub: str, name: str) -> Path:
    """A golden checkpoint from fixtures/third_party, or the shared read-only copy."""
    for root in (FIXTURES / "third_party" / sub / "checkpoints", SHARED / sub.split("_")[0] / "checkpoints"):
        if (root / name).is_dir():
            return root / name
    pytest.skip(f"golden checkpoint {sub}/{name} not present")


GPTQ = ("gptq", "e2e_b4_sym_g32_gptq")
SPQR = ("spqr_quant", "tiny-llama-spqr-csr-actorder")


def write_dir(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, blob in files.items():
        (root / name).write_bytes(blob)
    return root


def raises(path, code: str) -> QFormatsError:
    with pytest.raises(QFormatsError) as exc:
        open_checkpoint(path)
    assert exc.value.code == code, str(exc.value)
    return exc.value


# -- golden checkpoints ----------------------------------------------------------------------

def test_gptq_golden_opens_with_both_configs():
    """CKPT-4.1: the GPTQModel checkpoint's config.json quantization_config and quantize_config.json are both found."""
    with open_checkpoint(_golden(*GPTQ)) as ckpt:
        assert ckpt.kind == "safetensors" and len(ckpt.files) == 1
        assert [(Path(c.file).name, c.key) for c in ckpt.configs] == [
            ("config.json", "quantization_config"), ("quantize_config.json", None)]
        assert ckpt.config["bits"] == 4 and ckpt.config["checkpoint_format"] == "gptq"
        assert ckpt.model_config["model_type"] == "llama"
        assert [f.code for f in ckpt.findings] == []  # the two configs agree key for key


def test_gptq_golden_lists_the_library_tensors():
    """CKPT-2.1: tensor_names() is the safetensors library's key set; qweight reads as I32 bytes identical to it."""
    path = _golden(*GPTQ)
    with open_checkpoint(path) as ckpt, safe_open(str(path / "model.safetensors"), framework="numpy") as lib:
        assert ckpt.tensor_names() == sorted(lib.keys())
        name = "model.layers.0.self_attn.q_proj.qweight"
        assert ckpt.tensor_info(name).dtype == "I32"
        np.testing.assert_array_equal(ckpt.tensor(name), lib.get_tensor(name), strict=True)


def test_spqr_golden_opens_with_config_json():
    """CKPT-4.1: the SpQR checkpoint's only config is config.json["quantization_config"] (quant_method spqr)."""
    with open_checkpoint(_golden(*SPQR)) as ckpt:
        assert [Path(c.file).name for c in ckpt.configs] == ["config.json"]
        assert ckpt.config["quant_method"] == "spqr"
        shapes = ckpt.config["shapes"]
        name = "model.layers.0.self_attn.q_proj.dense_weights"
        assert ckpt.tensor_info(name).shape == (shapes[name + ".shape"],)
        assert ckpt.tensor(name).dtype == np.int64


def test_single_file_reads_the_configs_beside_it():
    """CKPT-2.1: "the config files beside it are discovered as for its directory"."""
    with open_checkpoint(_golden(*GPTQ)) as whole, open_checkpoint(_golden(*GPTQ) / "model.safetensors") as one:
        assert one.kind == "safetensors" and one.configs and one.configs == whole.configs
        assert one.config == whole.config


# -- could not run ---------------------------------------------------------------------------

def test_missing_path(tmp_path):
    """CKPT-1.1: a path that does not exist is ckpt.path.missing (could not run)."""
    err = raises(tmp_path / "nope", "ckpt.path.missing")
    assert err.file == str(tmp_path / "nope") and err.code in COULD_NOT_RUN_CODES


def test_symlink_loop(tmp_path):
    """CKPT-1.3: a path whose resolution loops (ELOOP) is ckpt.path.symlink_loop, not a traceback."""
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    assert raises(tmp_path / "a", "ckpt.path.symlink_loop").code in COULD_NOT_RUN_CODES


def test_fifo_is_unreadable_not_a_hang(tmp_path):
    """CKPT-1.2: a FIFO is not a regular file; it is refused without being opened (opening would block)."""
    os.mkfifo(tmp_path / "w.safetensors")
    raises(tmp_path / "w.safetensors", "ckpt.path.unreadable")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path):
    """CKPT-1.2: a file without read permission is ckpt.path.unreadable."""
    path = tmp_path / "m.safetensors"
    path.write_bytes(sb.base())
    path.chmod(0)
    raises(path, "ckpt.path.unreadable")


def test_empty_directory(tmp_path):
    """CKPT-1.4: a directory without weights is ckpt.no_model (could not run)."""
    raises(tmp_path, "ckpt.no_model")


def test_directory_with_only_configs(tmp_path):
    """CKPT-1.4: configs without weight files are not a model."""
    write_dir(tmp_path, {"config.json": b"{}", "tokenizer.json": b"{}"})
    raises(tmp_path, "ckpt.no_model")


def test_unknown_file_kind(tmp_path):
    """CKPT-1.4: a file that is neither safetensors, GGUF nor a pickle by name or bytes is ckpt.no_model."""
    (tmp_path / "notes.txt").write_bytes(b"hello world, not weights")
    raises(tmp_path / "notes.txt", "ckpt.no_model")


# -- pickles ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "model.pth", "x.pkl", "last.ckpt"])
def test_pickle_file_refused_by_suffix(tmp_path, name):
    """CKPT-2.2: a pickle-suffixed file is refused by name; its bytes (here a valid safetensors) are not read."""
    (tmp_path / name).write_bytes(sb.base())
    err = raises(tmp_path / name, "ckpt.pickle.refused")
    assert err.tensor == name and err.code not in COULD_NOT_RUN_CODES


@pytest.mark.parametrize("magic", [pytest.param(b"\x80\x02}q\x00.", id="pickle-protocol-2"),
                                   pytest.param(b"\x80\x04\x95", id="pickle-protocol-4"),
                                   pytest.param(b"PK\x03\x04" + bytes(30), id="torch-zip")])
def test_pickle_refused_by_magic(tmp_path, magic):
    """CKPT-2.2: a file named without a pickle suffix is still refused when its first bytes are pickle/zip magic."""
    (tmp_path / "weights").write_bytes(magic)
    raises(tmp_path / "weights", "ckpt.pickle.refused")


def test_directory_of_pickles_is_refused_not_no_model(tmp_path):
    """CKPT-2.2: a directory whose only weights are pickles is ckpt.pickle.refused, naming the file."""
    write_dir(tmp_path, {"config.json": b"{}", "pytorch_model.bin": b"\x80\x02."})
    err = raises(tmp_path, "ckpt.pickle.refused")
    assert err.tensor == "pytorch_model.bin"


def test_directory_pickle_found_by_magic(tmp_path):
    """CKPT-2.2: in a directory, an extensionless file with pickle magic counts as a pickle."""
    write_dir(tmp_path, {"weights_blob": b"\x80\x05\x95."})
    raises(tmp_path, "ckpt.pickle.refused")


def test_pickle_beside_safetensors_is_skipped_with_warning(tmp_path):
    """CKPT-2.3: training_args.bin beside model.safetensors is not opened; a warning names it."""
    write_dir(tmp_path, {"model.safetensors": sb.base(), "training_args.bin": b"\x80\x04."})
    with open_checkpoint(tmp_path) as ckpt:
        codes = [f.code for f in ckpt.findings]
        assert "ckpt.pickle.skipped" in codes and "training_args.bin" in ckpt.findings[0].message


# -- directories and shards ------------------------------------------------------------------

def test_unindexed_directory_takes_every_safetensors_file(tmp_path):
    """CKPT-2.4: without an index, every *.safetensors file in the directory is a weight file."""
    write_dir(tmp_path, {"a.safetensors": sb.shard("x"), "b.safetensors": sb.shard("y"),
                         "quant_config.json": json.dumps(sb.QCONFIG).encode()})
    with open_checkpoint(tmp_path) as ckpt:
        assert ckpt.tensor_names() == ["x", "y"] and Path(ckpt.file_of("y")).name == "b.safetensors"
        assert [Path(c.file).name for c in ckpt.configs] == ["quant_config.json"]


def test_unindexed_duplicate_tensor(tmp_path):
    """CKPT-2.4: one tensor name in two unindexed weight files is ambiguous: ckpt.tensor.duplicate."""
    write_dir(tmp_path, {"a.safetensors": sb.shard("x"), "b.safetensors": sb.shard("x")})
    raises(tmp_path, "ckpt.tensor.duplicate")


def test_checkpoint_without_tensors(tmp_path):
    """CKPT-2.5: a checkpoint whose files hold no tensor is invalid ("0 tensors checked" is never valid)."""
    write_dir(tmp_path, {"model.safetensors": sb.st_bytes("{}", b"")})
    raises(tmp_path, "ckpt.tensors.none")


def test_sharded_tensors_map_to_their_shards():
    """CKPT-3.3: a valid sharded checkpoint maps each tensor to the shard the index names."""
    with open_checkpoint(FIXTURES / sb.FIXTURE_DIR / "sharded_valid") as ckpt:
        assert ckpt.kind == "sharded" and Path(ckpt.index_file).name == "model.safetensors.index.json"
        assert Path(ckpt.file_of("y.qweight")).name == sb.S2
        assert ckpt.tensor("y.qweight").tolist() == [0x03020100, 0x07060504, 0x0B0A0908, 0x0F0E0D0C]


def test_index_file_path_opens_its_directory():
    """CKPT-3.1: passing the index file itself opens the sharded checkpoint it describes."""
    index = FIXTURES / sb.FIXTURE_DIR / "sharded_valid" / "model.safetensors.index.json"
    with open_checkpoint(index) as ckpt:
        assert ckpt.kind == "sharded" and ckpt.tensor_names() == ["x.qweight", "y.qweight"]


def test_index_duplicate_weight_map_key(tmp_path):
    """CKPT-3.1: a tensor listed twice in weight_map is an invalid index (JSON loaders keep the last silently)."""
    files = sb.sharded()
    files["model.safetensors.index.json"] = (
        b'{"weight_map": {"x.qweight": "%s", "x.qweight": "%s"}}' % (sb.S1.encode(), sb.S2.encode()))
    raises(write_dir(tmp_path, files), "ckpt.index.json")


def test_two_indexes_without_model_index_are_ambiguous(tmp_path):
    """CKPT-3.2: two index files, neither model.safetensors.index.json, cannot be chosen between."""
    files = sb.sharded()
    idx = files.pop("model.safetensors.index.json")
    files.update({"a.safetensors.index.json": idx, "b.safetensors.index.json": idx})
    raises(write_dir(tmp_path, files), "ckpt.index.ambiguous")


def test_shard_tensor_not_in_index_warns(tmp_path):
    """CKPT-3.5: a shard tensor the weight_map does not list is reported as a warning."""
    files = sb.sharded({"x.qweight": sb.S1, "y.qweight": sb.S2}, total=None)
    files[sb.S2] = sb.st_bytes(sb.obj([("y.qweight", {"dtype": "I32", "shape": [4], "data_offsets": [0, 16]}),
                                       ("y.extra", {"dtype": "U8", "shape": [1], "data_offsets": [16, 17]})]),
                               bytes(17))
    with open_checkpoint(write_dir(tmp_path, files)) as ckpt:
        assert [f.code for f in ckpt.findings] == ["ckpt.index.tensor_unlisted"]
        assert ckpt.findings[0].tensor == "y.extra"


def test_malformed_shard_is_its_st_code(tmp_path):
    """CKPT-3.3 with ST-4.3: a shard with trailing bytes fails with st.file.size naming that shard."""
    files = sb.sharded()
    files[sb.S2] += b"junk"
    err = raises(write_dir(tmp_path, files), "st.file.size")
    assert err.file == str(tmp_path / sb.S2)


def test_dangling_shard_symlink_is_missing(tmp_path):
    """CKPT-3.3: a shard that is a dangling symlink (an incomplete HF cache) is ckpt.index.shard_missing."""
    files = sb.sharded(drop=sb.S2)
    write_dir(tmp_path, files)
    os.symlink(tmp_path / "blobs" / "absent", tmp_path / sb.S2)
    raises(tmp_path, "ckpt.index.shard_missing")


def test_symlinked_shards_are_followed(tmp_path):
    """CKPT-1: shards that are symlinks to blobs (the HF cache layout) are read through the link."""
    src = write_dir(tmp_path / "blobs", sb.sharded())
    snap = tmp_path / "snapshot"
    snap.mkdir()
    for name in sb.sharded():
        os.symlink(src / name, snap / name)
    with open_checkpoint(snap) as ckpt:
        assert ckpt.tensor_names() == ["x.qweight", "y.qweight"]


# -- configs ---------------------------------------------------------------------------------

def test_config_conflict_warns(tmp_path):
    """CKPT-4.4: config.json and quantize_config.json disagreeing on bits is a warning naming the key."""
    files = sb.sharded()
    files["config.json"] = json.dumps({"quantization_config": {**sb.QCONFIG, "bits": 8}}).encode()
    with open_checkpoint(write_dir(tmp_path, files)) as ckpt:
        (conflict,) = [f for f in ckpt.findings if f.code == "ckpt.config.conflict"]
        assert "['bits']" in conflict.message
        assert ckpt.config["bits"] == 8  # config.json first (transformers/vLLM order)


def _awq_0_1_8_configs(tmp_path, legacy_version: str):
    """AutoAWQ 0.1.6 .. 0.1.8 save both: config.json's quantization_config (version lower-case) and
    quant_config.json (its own keys, version as given, default "GEMM") (AWQ-5.1)."""
    files = sb.sharded(drop="quantize_config.json")
    files["config.json"] = json.dumps({"quantization_config": {
        "quant_method": "awq", "zero_point": True, "group_size": 128, "bits": 4, "version": "gemm"}}).encode()
    files["quant_config.json"] = json.dumps({"zero_point": True, "q_group_size": 128, "w_bit": 4,
                                             "version": legacy_version}).encode()
    return open_checkpoint(write_dir(tmp_path, files))


def test_config_version_in_another_case_is_no_conflict(tmp_path):
    """CKPT-4.4: AutoAWQ and transformers lower-case ``version``: "GEMM" and "gemm" agree."""
    with _awq_0_1_8_configs(tmp_path, "GEMM") as ckpt:
        assert [f.code for f in ckpt.findings] == []


def test_config_version_naming_another_layout_conflicts_naming_autoawq(tmp_path):
    with _awq_0_1_8_configs(tmp_path, "GEMV") as ckpt:
        (conflict,) = ckpt.findings
        assert (conflict.code, conflict.message) == ("ckpt.config.conflict", (
            "config.json and quant_config.json disagree on ['version']; AutoAWQ 0.1.6 .. 0.1.8 read "
            "quant_config.json only, transformers/vLLM read config.json first"))


def test_config_none_warns(tmp_path):
    """CKPT-4.3: a directory checkpoint with no quantization config gets a ckpt.config.none warning."""
    files = sb.sharded(drop="quantize_config.json")
    files["config.json"] = b'{"model_type": "llama"}'
    with open_checkpoint(write_dir(tmp_path, files)) as ckpt:
        assert [f.code for f in ckpt.findings] == ["ckpt.config.none"]
        assert ckpt.model_config == {"model_type": "llama"} and ckpt.config is None


@pytest.mark.parametrize(("name", "text"), [
    pytest.param("config.json", b'{"quantization_config": ', id="truncated-json"),
    pytest.param("config.json", b'{"quantization_config": [4]}', id="qconfig-not-object"),
    pytest.param("quantize_config.json", b"[1, 2]", id="not-object"),
    pytest.param("quant_config.json", b"\xff{}", id="not-utf8"),
    pytest.param("quantize_config.json", b'{"bits": 4, "bits": 8}', id="duplicate-key"),
    pytest.param("config.json", b'{"quantization_config": {"bits": 4, "sym": true, "bits": 8}}',
                 id="nested-duplicate-key"),
])
def test_malformed_config(tmp_path, name, text):
    """CKPT-4.2: a config file that is not a JSON object with each key once (or holds a non-object config)
    is ckpt.config.json."""
    files = sb.sharded()
    files[name] = text
    raises(write_dir(tmp_path, files), "ckpt.config.json")


@pytest.mark.parametrize(("name", "code"), [
    pytest.param("config.json", "ckpt.config.json", id="config"),
    pytest.param("quantize_config.json", "ckpt.config.json", id="quantize-config"),
    pytest.param("model.safetensors.index.json", "ckpt.index.json", id="index"),
])
def test_json_with_too_many_values_is_refused_before_parsing(tmp_path, name, code):
    """CKPT-3.1 / CKPT-4.2: "at most ... 2^22 JSON values (counted before parsing as one more than its
    `,`, `[` and `{` bytes)": 2^22 empty arrays (8 MiB of text, ~0.3 GB once parsed) are refused."""
    files = sb.sharded()
    files[name] = b'{"x": [' + b"[]," * (2**22 - 1) + b"[]]}"
    err = raises(write_dir(tmp_path, files), code)
    assert err.actual == f"up to {1 + 1 + 2**22 + (2**22 - 1) + 1}"   # {, outer [, inner [s, commas, plus one


def test_deeply_nested_total_size_is_a_warning_not_a_crash(tmp_path):
    """CKPT-3.7: a total_size that is a 900-deep list (found by the fuzzer: repr() of it overflowed the
    stack) is reported as ckpt.index.total_size with the value cut short."""
    files = sb.sharded()
    files["model.safetensors.index.json"] = (b'{"metadata": {"total_size": ' + b"[" * 900 + b"]" * 900 +
                                             b'}, "weight_map": {"x.qweight": "%s", "y.qweight": "%s"}}'
                                             % (sb.S1.encode(), sb.S2.encode()))
    with open_checkpoint(write_dir(tmp_path, files)) as ckpt:
        (warn,) = [f for f in ckpt.findings if f.code == "ckpt.index.total_size"]
    assert warn.message == "model.safetensors.index.json metadata.total_size is [[[[[...]]]]]; the mapped " \
                           "tensors hold 32 bytes"


def test_deeply_nested_shard_name_is_refused_not_a_crash(tmp_path):
    """CKPT-3.1: a weight_map value that is a 900-deep list (found by the fuzzer: ascii() of it overflowed
    the stack) is an invalid index, quoted cut short."""
    files = sb.sharded()
    files["model.safetensors.index.json"] = b'{"weight_map": {"x.qweight": ' + b"[" * 900 + b"]" * 900 + b"}}"
    err = raises(write_dir(tmp_path, files), "ckpt.index.json")
    assert err.actual == "[[[[[...]]]]]"


def test_config_may_hold_python_json_constants(tmp_path):
    """CKPT-4.2: NaN and Infinity, which Python's json writes and reads, are accepted in config files."""
    files = sb.sharded()
    files["config.json"] = b'{"model_type": "llama", "rope_theta": NaN, "max_value": -Infinity}'
    with open_checkpoint(write_dir(tmp_path, files)) as ckpt:
        assert ckpt.model_config["max_value"] == float("-inf")


@pytest.mark.parametrize("text", [
    pytest.param(b'{"metadata": {"total_size": NaN}, "weight_map": {}}', id="nan"),
    pytest.param(b'{"weight_map": {"x.qweight": "%s"}} x' % sb.S1.encode(), id="trailing-data"),
])
def test_index_is_strict_json(tmp_path, text):
    """CKPT-3.1: the index is JSON in the subset of ST-2.2 (what serde_json loaders read): no NaN, nothing after it."""
    files = sb.sharded()
    files["model.safetensors.index.json"] = text
    raises(write_dir(tmp_path, files), "ckpt.index.json")


def test_tensor_of_a_removed_file_is_a_path_error(tmp_path):
    """CKPT-1.1: a weight file deleted after discovery is ckpt.path.missing when a tensor is read, not an OSError."""
    path = tmp_path / "m.safetensors"
    path.write_bytes(sb.base())
    with open_checkpoint(path) as ckpt:
        path.unlink()
        with pytest.raises(QFormatsError) as exc:
            ckpt.tensor("a")
    assert (exc.value.code, exc.value.file) == ("ckpt.path.missing", str(path))


# -- GGUF ------------------------------------------------------------------------------------

def test_gguf_file_delegates_to_gguf_reader():
    """CKPT-2.1: a .gguf path is opened by the GGUF reader; its tensors are listed and readable."""
    path = FIXTURES / "containers" / "gguf" / "valid_v3.gguf"
    if not path.exists():
        pytest.skip("GGUF fixtures not present")
    with open_checkpoint(path) as ckpt:
        assert ckpt.kind == "gguf" and ckpt.tensor_names()
        name = ckpt.tensor_names()[0]
        assert ckpt.tensor(name).size > 0 and ckpt.tensor_info(name).name == name


def test_malformed_gguf_is_invalid_not_could_not_run(tmp_path):
    """CKPT-2.1: a .gguf file with a bad magic is the GGUF reader's finding (exit 1), not a path error."""
    (tmp_path / "m.gguf").write_bytes(b"GGUX" + bytes(60))
    err = raises(tmp_path / "m.gguf", "gguf.magic")
    assert err.code not in COULD_NOT_RUN_CODES


def test_directory_with_one_gguf(tmp_path):
    """CKPT-2.1: a directory whose only weights are one .gguf file opens that file."""
    src = FIXTURES / "containers" / "gguf" / "valid_v3.gguf"
    if not src.exists():
        pytest.skip("GGUF fixtures not present")
    shutil.copy(src, tmp_path / "model.gguf")
    with open_checkpoint(tmp_path) as ckpt:
        assert ckpt.kind == "gguf"


# -- categories ------------------------------------------------------------------------------

def test_code_categories_are_registered_and_disjoint():
    """The exit-code split: could-not-run and warning codes are registered ckpt/st codes, never both."""
    assert COULD_NOT_RUN_CODES <= set(CODES) and WARNING_CODES <= set(CODES)
    assert not COULD_NOT_RUN_CODES & WARNING_CODES
    assert all(CODES[c][1].endswith("(warning)") for c in WARNING_CODES)
    assert all(CODES[c][1].endswith("(could not run)") for c in COULD_NOT_RUN_CODES)
    marked = {c for c, (_cl, m) in CODES.items() if c.startswith(("st.", "ckpt.")) and m.endswith("(warning)")}
    assert marked == WARNING_CODES
