"""Inputs a fuzzer drove `convert` and `decode` into internal errors with (issue 33 item 1), each built from a
fixture: they now convert, or are refused with a structured error, and never write into their input (QF-1.2)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.tools import convert, decode
from qformats.validate import validate
from whole_error import whole_in_file as whole

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
GPTQ_V1 = FIXTURES / "third_party" / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq"
CT_SHARDED = FIXTURES / "third_party" / "compressed_tensors" / "checkpoints" / "w8_sym_channel"
CT_W4 = FIXTURES / "third_party" / "compressed_tensors" / "checkpoints" / "w4_asym_group32"
ACT_ORDER = FIXTURES / "checkpoints" / "gptq_v2_asym_3bit_actorder"
MODULE = "model.layers.0.mlp.down_proj"


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + f.read_bytes())
    return h.hexdigest()


def copy(src: Path, tmp_path: Path, name: str = "ckpt") -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


@pytest.fixture
def null_quantization_config(tmp_path) -> Path:
    """GPTQModel's v1 checkpoint whose config.json says `"quantization_config": null` beside quantize_config.json."""
    path = copy(GPTQ_V1, tmp_path)
    raw = json.loads((path / "config.json").read_text())
    raw["quantization_config"] = None
    (path / "config.json").write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize("to", ["gptq_v2", "awq_gemm"])
def test_a_null_quantization_config_beside_quantize_config_converts(null_quantization_config, to, tmp_path):
    """CKPT-4, GPTQ-7: the settings come from quantize_config.json; config.json's null is kept as it was (it was a
    TypeError in the config merge); the output validates with every module's zeros agreeing with its label."""
    out = tmp_path / "out"
    assert main(["convert", str(null_quantization_config), "--to", to, "-o", str(out)]) == 0
    report = validate(str(out))
    assert report.verdict == "valid" and report.summary["layers"] == 14
    if to == "gptq_v2":
        assert json.loads((out / "config.json").read_text())["quantization_config"] is None
        assert json.loads((out / "quantize_config.json").read_text())["checkpoint_format"] == "gptq_v2"
        assert {row["evidence"] for row in report.layers} == {"v2"}


def test_a_null_quantization_config_alone_is_refused(null_quantization_config, tmp_path):
    """GPTQ-6.5: with quantize_config.json gone too, nothing says bits or version: refused, naming what is missing."""
    (null_quantization_config / "quantize_config.json").unlink()
    with pytest.raises(QFormatsError) as info:
        convert(str(null_quantization_config), str(tmp_path / "out"), to="gptq_v2")
    assert whole(info.value) == ("checkpoint.config.missing", "quantization_config",
                                 "present to know bits and version", "no config found", None)


def test_a_compressed_tensors_module_without_weight_scale_is_refused(tmp_path):
    """CT-2.1: a module missing weight_scale is named (it was a KeyError in convert)."""
    path = copy(CT_W4, tmp_path)
    tensors = load_file(str(path / "model.safetensors"))
    del tensors[f"{MODULE}.weight_scale"]
    save_file(tensors, str(path / "model.safetensors"))
    assert main(["convert", str(path), "--to", "gptq_v2", "-o", str(tmp_path / "out")]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(path), str(tmp_path / "out"), to="gptq_v2")
    assert whole(info.value) == ("tensor.missing", f"{MODULE}.weight_scale", "present (CT-2.1)", "absent",
                                 "model.safetensors")


@pytest.mark.parametrize("metadata", ["not an object", [1, 2], 7], ids=["text", "list", "number"])
def test_index_metadata_that_is_no_object_is_kept(metadata, tmp_path):
    """CKPT-3.1: the index's metadata is read only for total_size; any other value is kept as it was (a ValueError
    in convert's index rewrite)."""
    path = copy(CT_SHARDED, tmp_path)
    index = path / "model.safetensors.index.json"
    raw = json.loads(index.read_text())
    index.write_text(json.dumps({**raw, "metadata": metadata}))
    assert main(["convert", str(path), "--to", "gptq_v2", "-o", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())["metadata"] == metadata
    assert validate(str(tmp_path / "out")).verdict == "valid"


OUTSIDE = "outside the input checkpoint (qformats never writes to its input)"


@pytest.mark.parametrize("command", ["decode", "convert"])
def test_an_index_path_protects_its_whole_directory(command, tmp_path):
    """QF-1.2: given the shard index, an output into its directory is refused and the input is unchanged."""
    path = copy(CT_SHARDED, tmp_path)
    before = digest(path)
    index, out = path / "model.safetensors.index.json", path / "decoded.safetensors"
    argv = ["--tensor", MODULE] if command == "decode" else ["--to", "gptq_v2"]
    assert main([command, str(index), *argv, "-o", str(out)]) == 2
    with pytest.raises(QFormatsError) as info:
        if command == "decode":
            decode(str(index), [MODULE], str(out))
        else:
            convert(str(index), str(out), to="gptq_v2")
    assert whole(info.value) == ("argument.invalid", "output", OUTSIDE, str(out), None)
    assert digest(path) == before


def test_a_single_file_protects_the_configs_beside_it(tmp_path):
    """QF-1.2: a .safetensors file reads the config beside it (CKPT-4): --force does not let decode replace it."""
    path = copy(GPTQ_V1, tmp_path)
    before = digest(path)
    target = path / "config.json"
    with pytest.raises(QFormatsError) as info:
        decode(str(path / "model.safetensors"), [MODULE], str(target), force=True)
    assert whole(info.value) == ("argument.invalid", "output", OUTSIDE, str(target), None)
    assert digest(path) == before


def test_decode_with_an_unused_group_gets_the_g_idx_error(tmp_path):
    """GPTQ-5.2: an act-order g_idx that leaves the last group empty is refused as validate reports it (the label
    evidence read past the rows: IndexError in add.reduceat)."""
    path = copy(ACT_ORDER, tmp_path)
    tensors = load_file(str(path / "model.safetensors"))
    g_idx = tensors[f"{MODULE}.g_idx"]
    groups = tensors[f"{MODULE}.scales"].shape[0]
    tensors[f"{MODULE}.g_idx"] = np.minimum(g_idx, groups - 2).astype(g_idx.dtype)
    save_file(tensors, str(path / "model.safetensors"))
    with pytest.raises(QFormatsError) as info:
        decode(str(path), [MODULE], str(tmp_path / "w.safetensors"))
    rows = int(np.count_nonzero(g_idx >= groups - 2))
    assert whole(info.value) == ("gptq.g_idx.group_sizes", f"{MODULE}.g_idx", f"32 rows in group {groups - 2}",
                                 f"{rows} rows", None)
    assert any(f.code == "gptq.g_idx.group_sizes" for f in validate(str(path)).findings)


@pytest.mark.parametrize("version", [{}, []], ids=["object", "list"])
def test_an_awq_version_that_is_no_text_is_refused(version, tmp_path):
    """AWQ-5.1: `version` must be 'gemm'; an object or list is refused as such (it was a TypeError, unhashable, in
    the config parse every command shares)."""
    path = copy(FIXTURES / "checkpoints" / "awq_gemm", tmp_path)
    raw = json.loads((path / "config.json").read_text())
    raw["quantization_config"]["version"] = version
    (path / "config.json").write_text(json.dumps(raw))
    with pytest.raises(QFormatsError) as info:
        convert(str(path), str(tmp_path / "out"), to="gptq_v2")
    assert whole(info.value) == ("awq.config.invalid", "version", "'gemm'", version, "config.json")
    assert main(["validate", str(path)]) == 1
