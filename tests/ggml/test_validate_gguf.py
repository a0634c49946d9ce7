"""GGML-3 in files: a GGUF file of the types a llama.cpp "Q4_K_M"/"IQ4_XS"/"MXFP4" file holds, validated.

The files are written by gguf-py's ``GGUFWriter`` (an independent writer) with blocks that ggml's own
encoders wrote (the oracle build), so neither the bytes nor the container come from qformats.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from qformats.validate import validate

LIB_PATH = os.environ.get("QFORMATS_GGML_LIB")
pytestmark = pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")
gguf = pytest.importorskip("gguf")

# what a Q4_K_M file holds, plus the IQ4_XS and MXFP4 files' own types (GGML-7)
MIXED = {"token_embd.weight": "q6_K", "blk.0.attn_q.weight": "q4_K", "blk.0.attn_v.weight": "q6_K",
         "blk.0.ffn_down.weight": "q5_K", "blk.0.ffn_up.weight": "q8_0", "blk.0.attn_k.weight": "q5_0",
         "blk.1.attn_q.weight": "iq4_xs", "blk.1.ffn_gate.weight": "mxfp4", "blk.0.attn_norm.weight": "F32"}
ROWS, N = 8, 512


def _blocks(type_name: str, rng: np.random.Generator) -> np.ndarray:
    from conformance.adapters import ggml as oracle

    x = rng.standard_normal((ROWS, N)).astype(np.float32)
    return x[0] if type_name == "F32" else oracle.quantize(type_name, x)


def write_gguf(path, tensors: dict[str, str], corrupt=None, seed=0) -> None:
    """A GGUF file with one tensor per entry; ``corrupt(name, blocks)`` may change a tensor's bytes."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, type_name in tensors.items():
        data = _blocks(type_name, rng)
        if corrupt is not None:
            data = corrupt(name, data.copy())
        if type_name == "F32":
            writer.add_tensor(name, data)
        else:
            qtype = gguf.GGMLQuantizationType[type_name.upper()]
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_mixed_file_validates_clean_and_every_tensor_is_checked(tmp_path):
    """GGML-3.5: every tensor of a Q4_K_M-like file is checked, and the verdict says how many."""
    path = tmp_path / "mixed.gguf"
    write_gguf(path, MIXED)
    report = validate(str(path), deep=True)
    assert (report.verdict, report.findings) == ("valid", [])
    assert report.summary["tensors_checked"] == report.summary["tensors"] == len(MIXED)
    assert {row["layer"]: row["format"] for row in report.layers} == {k: v.lower() for k, v in MIXED.items()}


def _nan_scale(target: str, type_name: str):
    """Set the first super-scale of block 1 of row 2 of ``target`` to NaN (fp16 0x7E00; E8M0 0xFF)."""
    from qformats.formats import ggml

    bt = ggml.TYPES[type_name.lower()]

    def corrupt(name, data):
        if name != target:
            return data
        if bt.plain:
            data[2 * N // ROWS * 0 + 3] = np.nan
            return data
        start = 2 * (N // bt.block_size) * bt.type_size + 1 * bt.type_size
        if bt.fp16_offsets:
            off = next(iter(bt.fp16_offsets.values()))
            data.reshape(-1)[start + off:start + off + 2] = [0x00, 0x7E]
        else:                                             # mxfp4: the E8M0 byte leads the block
            data.reshape(-1)[start] = 0xFF
        return data
    return corrupt


@pytest.mark.parametrize("target", sorted(MIXED))
def test_a_corrupted_scale_is_an_error_naming_tensor_block_and_value(tmp_path, target):
    """GGML-3.1 / GGML-3.3: a NaN super-scale (or element) in any one tensor is an error naming it."""
    path = tmp_path / "bad.gguf"
    write_gguf(path, MIXED, corrupt=_nan_scale(target, MIXED[target]))
    report = validate(str(path))
    errors = [f for f in report.findings if f.severity == "error"]
    assert report.verdict == "invalid" and [f.tensor for f in errors] == [target]
    message = errors[0].message
    if MIXED[target] == "F32":
        assert errors[0].code == "ggml.float.nonfinite" and "first NaN at [0, 3]" in message
    else:
        assert errors[0].code == ("q4k.d.nonfinite" if MIXED[target] == "q4_K" else "ggml.scale.nonfinite")
        assert "NaN in block 1 of row 2" in message


def test_a_q8_0_only_file_is_validated_not_refused(tmp_path):
    """GGML-3.5: a file holding no q4_K tensor is validated like any other."""
    path = tmp_path / "q8_0.gguf"
    write_gguf(path, {"blk.0.attn_q.weight": "q8_0", "output.weight": "q8_0"})
    report = validate(str(path))
    assert (report.verdict, report.format, report.summary["tensors_checked"]) == ("valid", "q8_0", 2)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("mixed") / "mixed.gguf"
    write_gguf(path, MIXED)
    return path


@pytest.mark.parametrize("name", sorted(MIXED))
def test_decode_writes_every_tensor_as_ggml_decodes_it(mixed, tmp_path, name):
    """GGML-2.2 through the CLI: ``qformats decode FILE.gguf --tensor NAME`` for every type, bit-identical to ggml."""
    from safetensors.numpy import load_file

    from conformance.adapters import ggml as oracle
    from qformats.cli import main

    out = tmp_path / "w.safetensors"
    assert main(["decode", str(mixed), "--tensor", name, "-o", str(out)]) == 0
    got = load_file(str(out))[name]
    import gguf as gguf_py

    reader = gguf_py.GGUFReader(str(mixed))
    raw = next(t for t in reader.tensors if t.name == name)
    if MIXED[name] == "F32":
        expected = np.asarray(raw.data, np.float32).reshape(got.shape)
    else:
        expected = oracle.dequantize(MIXED[name], np.asarray(raw.data, np.uint8).reshape(got.shape[0], -1))
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_read_layer_returns_a_tensors_blocks(mixed):
    """read_layer on a GGUF file: the named tensor's rows of blocks, which the family decodes."""
    from qformats.formats import ggml
    from qformats.tools import read_layer

    layer = read_layer(str(mixed), "blk.0.attn_v.weight")
    assert list(layer) == ["blocks"] and layer["blocks"].shape == (ROWS, N // 256 * 210)
    assert ggml.dequantize("q6_k", layer["blocks"]).shape == (ROWS, N)
    assert list(read_layer(str(mixed), "blk.0.attn_norm.weight")) == ["weight"]


def test_read_layer_names_a_missing_tensor(mixed):
    """A tensor the file does not hold is a structured error naming the file and the tensor."""
    from qformats.errors import QFormatsError
    from qformats.tools import read_layer

    with pytest.raises(QFormatsError) as err:
        read_layer(str(mixed), "blk.9.attn_q.weight")
    assert (err.value.code, err.value.tensor, err.value.file) == ("tensor.missing", "blk.9.attn_q.weight", str(mixed))


def test_inspect_lists_every_tensor_with_its_statistics_and_no_warnings(mixed, capsys):
    """inspect: every tensor with its real type, statistics from qformats' own decoders, non-finite counts."""
    import warnings

    from qformats.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["inspect", str(mixed), "--width", "200"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert out.err == ""
    assert "non-finite" in lines[1]
    for name, type_name in MIXED.items():
        row = next(line for line in lines if line.startswith(name + " "))
        assert f" {type_name.lower()} " in row and row.split()[-1] == "0"
    assert lines[-1].startswith(f"{len(MIXED)} rows, {len(MIXED)} of {len(MIXED)} tensors checked; verdict valid")


def test_inspect_header_counts_what_gguf_py_reads(mixed, capsys):
    """GGML-7.1: the header's tensors, parameters and bits per weight are those of gguf-py's GGUFReader."""
    from gguf import GGUFReader

    from qformats.cli import main

    tensors = GGUFReader(str(mixed)).tensors
    elements, data_bytes = sum(int(t.n_elements) for t in tensors), sum(int(t.n_bytes) for t in tensors)
    assert main(["inspect", str(mixed)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"architecture llama, file type not given, {len(tensors)} tensors, {elements:,} parameters, "
        f"{data_bytes * 8 / elements:.4g} bits/weight")


def _every_type_file(path) -> dict[str, str]:
    """One tensor of every block type qformats decodes, plus F16 and BF16, written by gguf-py with ggml's bytes."""
    from conformance.adapters import ggml as oracle
    from qformats.formats.ggml.cases import subject_types

    rng = np.random.default_rng(5)
    writer = gguf.GGUFWriter(str(path), "llama")
    names = {}
    pinned = [bt for bt in subject_types() if bt.since is None]        # q2_0: tests/ggml/test_lowbit.py
    for bt in pinned + [__import__("qformats.formats.ggml", fromlist=["TYPES"]).TYPES["q4_k"]]:
        x = rng.standard_normal((4, 512)).astype(np.float32)
        w = rng.gamma(2.0, 1.0, 512).astype(np.float32) if bt.requires_importance else None
        name = f"blk.0.{bt.name}.weight"
        blocks = oracle.quantize(bt.name, x, w)
        writer.add_tensor(name, blocks, raw_shape=blocks.shape, raw_dtype=gguf.GGMLQuantizationType[bt.name.upper()])
        names[name] = bt.name
    x = rng.standard_normal((4, 512)).astype(np.float32)
    writer.add_tensor("blk.0.f16.weight", x.astype(np.float16))
    bf16 = (x.view(np.uint32) >> 16).astype(np.uint16)
    writer.add_tensor("blk.0.bf16.weight", bf16, raw_shape=bf16.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
    names.update({"blk.0.f16.weight": "f16", "blk.0.bf16.weight": "bf16"})
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return names


def test_every_type_validates_and_decodes_as_ggml_does(tmp_path):
    """GGML-2.2, GGML-3.5: a file with a tensor of every type is checked whole, and ``decode`` writes every
    tensor bit-identically to ggml's decoder (F16 and BF16 widened exactly, GGML-6)."""
    from safetensors.numpy import load_file

    from conformance.adapters import ggml as oracle
    from qformats.tools import decode

    path = tmp_path / "every.gguf"
    names = _every_type_file(path)
    report = validate(str(path), deep=True)
    assert (report.verdict, report.findings) == ("valid", [])
    assert report.summary["tensors_checked"] == report.summary["tensors"] == len(names) == 26   # 23 block types, q4_K, F16, BF16
    out = tmp_path / "every.safetensors"
    decode(str(path), list(names), str(out))
    got = load_file(str(out))
    reader = gguf.GGUFReader(str(path))
    for t in reader.tensors:
        raw = np.asarray(t.data)
        if names[t.name] == "f16":
            expected = raw.astype(np.float32)
        elif names[t.name] == "bf16":
            expected = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            expected = oracle.dequantize(names[t.name], raw.view(np.uint8).reshape(4, -1))
        assert np.array_equal(got[t.name].view(np.uint32), expected.reshape(4, 512).view(np.uint32)), t.name


def test_a_type_qformats_cannot_decode_is_a_warning_and_strict_fails(tmp_path, capsys, monkeypatch):
    """GGML-3.5: a tensor of a type qformats has no decoder for is not silently skipped: a warning naming it and
    the count checked, and --strict fails on it. qformats decodes every type ggml 0.25.3 has, so the registry
    is shown one without nvfp4 (what a type added to ggml later meets)."""
    from qformats.cli import main
    from qformats.formats.ggml import TYPES, layers

    monkeypatch.setattr(layers, "TYPES", {k: v for k, v in TYPES.items() if k != "nvfp4"})

    path = tmp_path / "nvfp4.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight"):
        writer.add_tensor(name, np.zeros((4, 144), np.uint8), raw_shape=(4, 144), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    blob = bytearray(path.read_bytes())
    at = blob.find(b"blk.0.attn_k.weight") + len(b"blk.0.attn_k.weight") + 4 + 8 * 2    # n_dims, ne[0], ne[1]
    assert blob[at:at + 4] == (12).to_bytes(4, "little")
    blob[at:at + 4] = (40).to_bytes(4, "little")      # NVFP4: 256 weights are 4 blocks of 36 bytes, as q4_K's 144
    path.write_bytes(bytes(blob))
    report = validate(str(path))
    assert (report.verdict, report.summary["tensors_checked"], report.summary["tensors"]) == ("valid", 1, 2)
    assert [(f.code, f.severity, f.tensor) for f in report.findings] == [
        ("ggml.type.unchecked", "warning", "blk.0.attn_k.weight")]
    assert "1 tensor of type NVFP4 (first 'blk.0.attn_k.weight') could not be checked" in report.findings[0].message
    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--strict", str(path)]) == 1
    assert "1 of 2 tensors checked" in capsys.readouterr().out
