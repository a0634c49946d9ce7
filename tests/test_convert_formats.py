"""`qformats convert` across GPTQ, AWQ GEMM and compressed-tensors checkpoints (AWQ-4, CT-4; issue #23 item 2).

The sources are the real checkpoints AutoAWQ 0.2.9, compressed-tensors 0.20.0 and GPTQModel 7.7.0 wrote
(fixtures/third_party/*/PROVENANCE.md). Every hop must decode bit for bit as its source did, lossless
round trips must give back the original bytes, outputs must validate, and — the independent route —
the real libraries (.venv/real, ``make real-subjects``) must read the converted checkpoints to the
same weights qformats decodes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import qformats
from qformats.cli import main
from qformats.containers.checkpoint import open_checkpoint
from qformats.containers.safetensors import read_header
from qformats.errors import QFormatsError
from qformats.formats import ctensors, gptq, registry
from qformats.tools import convert
from qformats.validate import group_layers, validate
from whole_error import whole_in_file as whole

ROOT = Path(__file__).resolve().parents[1]
THIRD = ROOT / "fixtures" / "third_party"
AWQ = THIRD / "autoawq" / "checkpoints" / "gemm_w4_g32"
CT = THIRD / "compressed_tensors" / "checkpoints"
GPTQ_V1 = THIRD / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq"
REAL_PYTHON = ROOT / ".venv" / "real" / "bin" / "python"
REAL_STAMP = ROOT / ".venv" / "real" / ".installed-awq-ct"

# name -> (source, --to): chains feed one hop's output into the next
HOPS = {
    "awq>v2": ("awq", "gptq_v2"), "awq>v2>ct": ("awq>v2", "compressed_tensors"),
    "awq>v2>ct>awq": ("awq>v2>ct", "awq_gemm"), "awq>v1": ("awq", "gptq"), "awq>ct": ("awq", "compressed_tensors"),
    "ct4a>awq": ("ct4a", "awq_gemm"), "ct4a>awq>v2": ("ct4a>awq", "gptq_v2"),
    "ct4a>awq>v2>ct": ("ct4a>awq>v2", "compressed_tensors"),
    "ct4s>v2": ("ct4s", "gptq_v2"), "ct4s>v2>ct": ("ct4s>v2", "compressed_tensors"),
    "ct8>v2": ("ct8", "gptq_v2"), "ct8>v2>ct": ("ct8>v2", "compressed_tensors"),
    "gptq>awq": ("gptq", "awq_gemm"), "gptq>ct": ("gptq", "compressed_tensors"),
}
SOURCES = {"awq": AWQ, "ct4a": CT / "w4_asym_group32", "ct4s": CT / "w4_sym_group32", "ct8": CT / "w8_sym_channel",
           "gptq": GPTQ_V1,
           # make demo's samples, written by qformats (qformats.samples): the real libraries must read them too
           "sample_awq": ROOT / "fixtures/checkpoints/awq_gemm", "sample_ct": ROOT / "fixtures/checkpoints/ctensors_w4_asym"}


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> dict[str, Path]:
    """Every hop of HOPS converted once (the source fixtures are never written)."""
    root = tmp_path_factory.mktemp("converted")
    paths = dict(SOURCES)
    for name, (source, to) in HOPS.items():
        paths[name] = root / name.replace(">", "_to_")
        convert(str(paths[source]), str(paths[name]), to=to)
    return paths


def decoded(path: Path) -> dict[str, np.ndarray]:
    """Every quantized module as qformats' reference decode gives it (what `qformats decode` writes)."""
    with open_checkpoint(str(path)) as ckpt:
        return {g.name: registry.FACES[g.format].layers.decode(ckpt, g)[0]
                for g in group_layers(ckpt.tensor_names(), ckpt.config)[0]}


def raw(path: Path) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """Every tensor as (safetensors dtype, shape, bytes)."""
    with open_checkpoint(str(path)) as ckpt:
        return {n: (ckpt.tensor_info(n).dtype, tuple(ckpt.tensor_info(n).shape), ckpt.tensor(n).tobytes())
                for n in ckpt.tensor_names()}


def quant_config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())["quantization_config"]


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


# -- round trips on the real fixtures (AWQ-4.1/4.2, CT-4.1/4.2/4.3) ---------------------------------------------

@pytest.mark.parametrize("hop", list(HOPS), ids=list(HOPS))
def test_every_hop_decodes_bit_for_bit_as_its_source(out, hop):
    """Each conversion keeps every decoded weight exactly (the spec reader of source and target)."""
    before, after = decoded(out[HOPS[hop][0]]), decoded(out[hop])
    assert sorted(before) == sorted(after) and len(after) >= 3
    for module, weight in before.items():
        np.testing.assert_array_equal(after[module], weight, strict=True)


def test_awq_through_gptq_v2_and_compressed_tensors_comes_back_byte_identical(out):
    """AWQ -> gptq_v2 -> compressed_tensors -> awq_gemm: AutoAWQ's own tensors, bytes and dtypes, and its config."""
    assert raw(out["awq>v2>ct>awq"]) == raw(AWQ)
    assert quant_config(out["awq>v2>ct>awq"]) == quant_config(AWQ)
    assert json.loads((out["awq>v2>ct>awq"] / "config.json").read_text())["architectures"] == ["Tiny"]


def test_compressed_tensors_through_awq_and_gptq_v2_comes_back_byte_identical(out):
    """compressed-tensors asymmetric 4-bit -> awq_gemm -> gptq_v2 -> compressed_tensors: the library's own
    tensors and exactly the quantization_config ModelCompressor wrote."""
    assert raw(out["ct4a>awq>v2>ct"]) == raw(CT / "w4_asym_group32")
    assert quant_config(out["ct4a>awq>v2>ct"]) == quant_config(CT / "w4_asym_group32")


def test_bfloat16_scales_come_back_as_float16_of_the_same_values(out):
    """GPTQ and AWQ store float16 scales (CT-4.1): bfloat16 scales return float16, equal in value; the codes'
    bytes are unchanged and the unquantized lm_head keeps its BF16 bytes (copied raw, not through NumPy)."""
    src, back = raw(CT / "w4_sym_group32"), raw(out["ct4s>v2>ct"])
    assert sorted(src) == sorted(back)
    for name, (dtype, shape, data) in src.items():
        if name.endswith(".weight_scale"):
            widened = (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(np.float32)
            assert back[name][:2] == ("F16", shape)
            np.testing.assert_array_equal(np.frombuffer(back[name][2], np.float16).astype(np.float32), widened)
        else:
            assert back[name] == (dtype, shape, data), name
    assert quant_config(out["ct4s>v2>ct"]) == quant_config(CT / "w4_sym_group32")


def test_sharded_checkpoint_stays_sharded_with_a_rewritten_index(out):
    """Two shards in, two shards out; the index maps every written tensor to the shard holding it (CKPT-3)."""
    ckpt_dir = out["ct8>v2"]
    assert sorted(p.name for p in ckpt_dir.glob("*.safetensors")) == sorted(
        p.name for p in (CT / "w8_sym_channel").glob("*.safetensors"))
    index = json.loads((ckpt_dir / "model.safetensors.index.json").read_text())["weight_map"]
    held = {n: f.name for f in ckpt_dir.glob("*.safetensors") for n in read_header(str(f)).tensors}
    assert index == held
    assert "model.layers.0.mlp.up_proj.qweight" in index and not any("weight_packed" in n for n in index)


def test_shard_index_given_by_file_name_converts_the_whole_checkpoint(tmp_path, capsys):
    """PATH naming the *.safetensors.index.json writes the whole checkpoint directory, as for GPTQ."""
    target = tmp_path / "out"
    assert main(["convert", str(CT / "w8_sym_channel" / "model.safetensors.index.json"), "--to", "gptq_v2",
                 "-o", str(target)]) == 0
    assert capsys.readouterr().out == f"converted 3 compressed-tensors layers to gptq_v2: {target}\n"
    assert (target / "model.safetensors.index.json").is_file()
    assert quant_config(target)["checkpoint_format"] == "gptq_v2"
    ours, source = decoded(target), decoded(CT / "w8_sym_channel")
    assert sorted(ours) == sorted(source) and all(np.array_equal(ours[m], source[m]) for m in source)


@pytest.mark.parametrize("hop", list(HOPS), ids=list(HOPS))
def test_every_output_validates_without_errors_or_warnings(out, hop):
    """`qformats validate --strict` on each converted checkpoint: valid, nothing to warn about."""
    report = validate(str(out[hop]))
    assert [(f.code, f.message) for f in report.findings if f.severity in ("error", "warning")] == []
    assert report.verdict == "valid"


def test_a_mislabelled_gptq_checkpoint_converts_only_when_told_what_its_zeros_are(tmp_path):
    """GPTQ-8.3 holds across formats: v2 zeros labelled v1 are refused, naming the fix; with --source-version v2
    they convert, and the AWQ layers decode as the v2 reading of the source."""
    source = THIRD / "gptq" / "checkpoints" / "neg_b4_sym_v2_zeros_labelled_gptq"
    err = refused(source, "awq_gemm", tmp_path)
    assert (err.code, err.tensor, Path(err.file).name) == ("gptq.label.mismatch",
                                                           "model.layers.0.mlp.down_proj.qzeros", "model.safetensors")
    assert "--source-version v2" in err.constraint
    convert(str(source), str(tmp_path / "awq"), to="awq_gemm", source_version="v2")
    t = load_file(str(source / "model.safetensors"))
    module = "model.layers.1.self_attn.k_proj"
    v2 = gptq.dequantize({k: t[f"{module}.{k}"] for k in ("qweight", "qzeros", "scales", "g_idx")}, bits=4,
                         version="v2")
    np.testing.assert_array_equal(decoded(tmp_path / "awq")[module], v2, strict=True)


def test_gptq_v1_to_v2_keeps_bfloat16_tensors_bfloat16(tmp_path):
    """The GPTQ relabelling writes the other tensors of a file it rewrites as their raw bytes: a BF16 tensor stays
    BF16 (it came back U16 when written through NumPy, which has no bfloat16)."""
    from qformats.convert import write_safetensors

    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes((GPTQ_V1 / "config.json").read_bytes())
    kept = raw(GPTQ_V1)
    entries = [(n, d, s, np.frombuffer(b, np.uint8)) for n, (d, s, b) in kept.items()]
    write_safetensors(src / "model.safetensors", entries + [("extra.norm", "BF16", (2,), np.array([0x3F80, 0x4000],
                                                                                                    np.uint16))])
    convert(str(src), str(tmp_path / "v2"), to="gptq_v2")
    assert raw(tmp_path / "v2")["extra.norm"] == ("BF16", (2,), np.array([0x3F80, 0x4000], np.uint16).tobytes())


# -- the configs the target libraries write ---------------------------------------------------------------------

def test_awq_config_is_autoawqs_with_unquantized_modules_listed(out):
    """AWQ-5.1: AwqConfig.to_transformers_dict's keys, in its order; every unquantized 2-D weight's module listed
    (the checkpoint does not say which are Linear; AutoAWQ skips non-Linear modules anyway)."""
    config = quant_config(out["gptq>awq"])
    assert list(config) == ["quant_method", "zero_point", "group_size", "bits", "version", "modules_to_not_convert"]
    assert config == {"quant_method": "awq", "zero_point": True, "group_size": 32, "bits": 4, "version": "gemm",
                      "modules_to_not_convert": ["model.embed_tokens"]}


def test_compressed_tensors_config_is_model_compressors(out):
    """CT-5.1: a GPTQ v1 symmetric checkpoint becomes one symmetric group config group, ignore listing the
    unquantized modules; every other key as ModelCompressor.update_config writes it."""
    config = quant_config(out["gptq>ct"])
    reference = quant_config(CT / "w4_sym_group32")
    assert config == reference | {"ignore": ["model.embed_tokens"]}


def test_gptq_config_is_gptqmodels_and_keeps_the_other_keys(out):
    """GPTQ-6.3: checkpoint_format (and GPTQModel's format alias) say the version; config.json's other keys stay."""
    v2, v1 = quant_config(out["awq>v2"]), quant_config(out["awq>v1"])
    assert v2 == {"bits": 4, "checkpoint_format": "gptq_v2", "desc_act": False, "format": "gptq_v2",
                  "group_size": 32, "lm_head": False, "method": "gptq", "pack_dtype": "int32", "quant_method": "gptq",
                  "sym": False}
    assert v1 == v2 | {"checkpoint_format": "gptq", "format": "gptq"}
    whole = json.loads((out["awq>v2"] / "config.json").read_text())
    assert {k: v for k, v in whole.items() if k != "quantization_config"} == {"architectures": ["Tiny"],
                                                                               "model_type": "tiny"}



def test_channel_config_comes_back_as_model_compressors(out):
    """CT-5.1: compressed-tensors' 8-bit channel checkpoint through gptq_v2 and back states the channel strategy
    (group_size null) exactly as ModelCompressor wrote it."""
    assert quant_config(out["ct8>v2>ct"]) == quant_config(CT / "w8_sym_channel")


def test_each_shard_keeps_its_metadata_and_names_qformats_after_the_producer(out):
    """Every header key is kept; ``producer`` says qformats rewrote what the library wrote (GPTQ's shard, with no
    producer, keeps its metadata as it was)."""
    produced = f"qformats {qformats.__version__} convert (from AutoAWQ 0.2.9 WQLinear_GEMM)"
    assert read_header(str(out["awq>v2"] / "model.safetensors")).metadata == {"producer": produced, "format": "pt"}
    assert read_header(str(out["gptq>awq"] / "model.safetensors")).metadata == {"format": "pt"}


@pytest.mark.parametrize("hop", ["gptq>awq", "awq>v2", "gptq>ct"])
def test_tensors_are_laid_out_as_the_safetensors_library_writes_them(out, tmp_path, hop):
    """safetensors' own writer (save_file) orders the same tensors largest item size first, names sorted within:
    every tensor starts aligned to its item size, at the same offset as in the written file."""
    path = out[hop] / "model.safetensors"
    ours = read_header(str(path)).tensors
    save_file(load_file(str(path)), str(tmp_path / "library.safetensors"))
    library = read_header(str(tmp_path / "library.safetensors")).tensors
    assert {n: ours[n].data_offsets for n in ours} == {n: library[n].data_offsets for n in library}


def test_shard_index_total_size_is_recomputed_and_its_other_metadata_kept(tmp_path):
    """CKPT-3: an index stating total_size gets the written shards' data bytes (file size - 8 - header length,
    summed); its other metadata keys stay."""
    source = tmp_path / "src"
    shutil.copytree(CT / "w8_sym_channel", source)
    index = source / "model.safetensors.index.json"
    raw_index = json.loads(index.read_text())
    index.write_text(json.dumps(raw_index | {"metadata": {"total_size": 1, "note": "kept"}}))
    convert(str(source), str(tmp_path / "out"), to="gptq_v2")
    data_bytes = 0
    for shard in (tmp_path / "out").glob("*.safetensors"):
        blob = shard.read_bytes()
        data_bytes += len(blob) - 8 - int.from_bytes(blob[:8], "little")
    written = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())["metadata"]
    assert written == {"total_size": data_bytes, "note": "kept"}


# -- refusals: exit 2, the whole error, nothing written, input untouched ------------------------------------------

def refused(source: Path, to: str, tmp_path: Path, *extra: str) -> QFormatsError:
    """Run the CLI (exit 2 expected), then the API for the error object; no output, input unchanged."""
    before = digest(source)
    target = tmp_path / "out"
    assert main(["convert", str(source), "--to", to, "-o", str(target), *extra]) == 2
    options = dict(zip(("source_version", "reader"), (None, None)))
    for flag, key in (("--source-version", "source_version"), ("--reader", "reader")):
        if flag in extra:
            options[key] = extra[extra.index(flag) + 1]
    with pytest.raises(QFormatsError) as info:
        convert(str(source), str(target), to=to, **options)
    assert not target.exists() and [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
    assert digest(source) == before
    return info.value


def test_widths_gptq_cannot_pack_are_refused(tmp_path):
    """CT-4.1: 3-bit rows of 80 values do not fill whole words (GPTQ-2.4): compressed-tensors' w3 checkpoint."""
    err = refused(CT / "w3_asym_group16", "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "model.layers.0.mlp.down_proj.weight_shape",
                          "in and out features filling whole words at 3 bits (GPTQ-2.4)", [64, 80], "model.safetensors")


def test_awq_refuses_eight_bit_layers(tmp_path):
    """AWQ-4.2: AWQ GEMM stores 4-bit codes only (the first 8-bit module met, in its shard)."""
    err = refused(CT / "w8_sym_channel", "awq_gemm", tmp_path)
    assert whole(err) == ("awq.convert.unrepresentable", "model.layers.0.mlp.down_proj.bits",
                          "4 (AWQ GEMM stores 4-bit codes only, AWQ-4.2)", 8, "model-00002-of-00002.safetensors")


def _awq_copy(tmp_path: Path) -> Path:
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    for f in AWQ.iterdir():
        (ckpt / f.name).write_bytes(f.read_bytes())
    return ckpt


def test_gptq_v1_refuses_awq_zero_points_of_zero(tmp_path):
    """GPTQ-7.2 via AWQ-4.1: a zero point 0 has no v1 field; refused with the count, naming the tensor."""
    ckpt = _awq_copy(tmp_path)
    tensors = load_file(str(ckpt / "model.safetensors"))
    name = "model.layers.0.mlp.down_proj.qzeros"
    tensors[name] = tensors[name].copy()
    tensors[name][0, 0] = 0                                  # 8 zero points of 0 (one word)
    save_file(tensors, str(ckpt / "model.safetensors"))
    err = refused(ckpt, "gptq", tmp_path)
    assert whole(err)[:3] == ("gptq.zero.v2_not_representable_in_v1", name, "free of zero points 0 to convert to v1")
    assert err.actual.startswith("8 zero points of 0, first at [0, ")


def _act_order_gptq(tmp_path: Path) -> Path:
    """A 4-bit GPTQ v2 checkpoint with a permuted g_idx (act-order), K 64, N 32, groups of 32."""
    rng = np.random.default_rng(0)
    g_idx = rng.permutation(np.arange(64) // 32).astype(np.int32)
    layer = gptq.pack(rng.integers(0, 16, (64, 32)), rng.integers(0, 16, (2, 32)),
                      (rng.random((2, 32)) + 0.5).astype(np.float16) / 64, bits=4, g_idx=g_idx, version="v2",
                      group_size=32)
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    save_file({f"m.{k}": np.asarray(v) for k, v in layer.tensors.items()}, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": {
        "bits": 4, "group_size": 32, "desc_act": True, "sym": False, "checkpoint_format": "gptq_v2"}}))
    return ckpt


def test_awq_refuses_act_order(tmp_path):
    """AWQ-4.2: AWQ has no g_idx."""
    err = refused(_act_order_gptq(tmp_path), "awq_gemm", tmp_path)
    assert whole(err) == ("awq.convert.unrepresentable", "m.g_idx", "trivial (k // group_size): AWQ has no g_idx, "
                          "so act-order layers cannot be expressed (AWQ-4.2)", "a permuted g_idx", "model.safetensors")


def test_compressed_tensors_refuses_act_order_from_gptq(tmp_path):
    """CT-4.2: act-order layers are not converted (compressed-tensors 0.20 does not read weight_g_idx, CT-2.4)."""
    err = refused(_act_order_gptq(tmp_path), "compressed_tensors", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "m.g_idx",
                          "trivial (act-order layers are not converted, CT-4.2)", "a permuted g_idx",
                          "model.safetensors")


def _ct_checkpoint(tmp_path: Path, modules: dict[str, dict], groups: dict[str, dict], **layer_extra) -> Path:
    """A synthetic pack-quantized checkpoint: module -> ctensors.pack keywords; config groups as given."""
    rng = np.random.default_rng(1)
    tensors = {}
    for name, spec in modules.items():
        bits, gs = spec["num_bits"], spec.get("group_size")
        g = 1 if gs is None else 64 // gs
        layer = ctensors.pack(rng.integers(-(1 << bits - 1), 1 << bits - 1, (32, 64)),
                              (rng.random((32, g)) + 0.5).astype(np.float16) / 64, **spec, **layer_extra)
        tensors.update({f"{name}.{k}": np.asarray(v) for k, v in layer.tensors.items()})
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    save_file(tensors, str(ckpt / "model.safetensors"))
    config = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": [],
              "config_groups": {k: {"targets": v.pop("targets"), "weights": v} for k, v in groups.items()}}
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": config}))
    return ckpt


def test_gptq_refuses_compressed_tensors_act_order(tmp_path):
    """CT-4.1: a layer with weight_g_idx is not converted."""
    ckpt = _ct_checkpoint(tmp_path, {"m": {"num_bits": 4, "group_size": 32}},
                          {"g": {"targets": ["Linear"], "num_bits": 4, "type": "int", "symmetric": True,
                                 "strategy": "group", "group_size": 32, "actorder": "group"}},
                          g_idx=np.arange(64, dtype=np.int32) % 2)
    err = refused(ckpt, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "m.weight_g_idx",
                          "absent (act-order layers are not converted, CT-4.1)", "present", "model.safetensors")


def test_mixed_group_sizes_are_refused(tmp_path):
    """CT-4.4: two config groups of different group sizes; the written config states one scheme."""
    ckpt = _ct_checkpoint(tmp_path, {"a": {"num_bits": 4, "group_size": 32}, "b": {"num_bits": 4, "group_size": 16}},
                          {"g0": {"targets": ["a"], "num_bits": 4, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 32},
                           "g1": {"targets": ["b"], "num_bits": 4, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 16}})
    err = refused(ckpt, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "b.group_size", "32, as in a: qformats convert writes "
                          "one scheme for every module (AWQ-4.3, CT-4.4)", 16, "model.safetensors")


def test_bfloat16_bias_is_refused_for_float16_targets(tmp_path):
    """CT-4.4 / AWQ-2.1: GPTQ stores float16 biases; a bfloat16 bias would be rounded."""
    ckpt = _ct_checkpoint(tmp_path, {"m": {"num_bits": 4, "group_size": 32}},
                          {"g": {"targets": ["Linear"], "num_bits": 4, "type": "int", "symmetric": True,
                                 "strategy": "group", "group_size": 32}})
    tensors = load_file(str(ckpt / "model.safetensors"))
    from qformats.convert import write_safetensors

    entries = [(n, {"int32": "I32", "int64": "I64", "float16": "F16"}[a.dtype.name], a.shape, a)
               for n, a in tensors.items()] + [("m.bias", "BF16", (32,), np.zeros(32, np.uint16))]
    write_safetensors(ckpt / "model.safetensors", entries)
    err = refused(ckpt, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "m.bias", "float16: AWQ GEMM and GPTQ store float16 "
                          "biases (AWQ-2.1, GPTQ-2.1); converting it would round", "BF16", "model.safetensors")


def test_awq_refuses_an_unquantized_name_inside_a_quantized_one(tmp_path):
    """AWQ-5.2: AutoAWQ matches modules_to_not_convert as substrings: 'mlp.gate' would also exclude 'mlp.gate_proj'."""
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    tensors = load_file(str(GPTQ_V1 / "model.safetensors"))
    tensors["model.layers.0.mlp.gate.weight"] = np.zeros((4, 128), np.float16)
    save_file(tensors, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_bytes((GPTQ_V1 / "config.json").read_bytes())
    err = refused(ckpt, "awq_gemm", tmp_path)
    assert whole(err) == ("awq.convert.unrepresentable", "modules_to_not_convert", "entries that are no substring of "
                          "a quantized module's name (AutoAWQ matches substrings, AWQ-5.2): 'model.layers.0.mlp.gate' "
                          "is in 'model.layers.0.mlp.gate_proj'", "model.layers.0.mlp.gate", None)


def test_same_format_is_refused(tmp_path):
    err = refused(AWQ, "awq_gemm", tmp_path)
    assert whole(err) == ("argument.invalid", "to", "a format other than the checkpoint's (awq_gemm)", "awq_gemm", None)


def test_compressed_tensors_to_itself_is_refused_when_already_dense(tmp_path):
    """CT-4.5: only a checkpoint in the per-word layout (CT-2.6) has something to repack."""
    err = refused(CT / "w4_sym_group32", "compressed_tensors", tmp_path)
    assert whole(err) == ("argument.invalid", "to", "a format other than the checkpoint's, or compressed_tensors from "
                          "compressed-tensors <= 0.17's per-word layout (CT-4.5)",
                          "compressed_tensors for a checkpoint in the dense layout already", None)


def test_source_version_is_refused_for_a_non_gptq_source(tmp_path):
    """--source-version says what GPTQ zeros are (GPTQ-8.3); an AWQ checkpoint has no such label."""
    err = refused(AWQ, "gptq_v2", tmp_path, "--source-version", "v2")
    assert whole(err) == ("argument.invalid", "source_version", "given only for a GPTQ checkpoint (what its stored "
                          "zeros really are, GPTQ-8.3)", "v2 for a AWQ GEMM checkpoint", None)


def test_reader_is_refused_across_formats(tmp_path):
    """--reader picks a real reader's zero points for GPTQ v1 -> gptq_v2 only (GPTQ-4.2)."""
    err = refused(CT / "w4_sym_group32", "gptq_v2", tmp_path, "--reader", "gptqmodel")
    assert whole(err) == ("argument.invalid", "reader", "given only to convert GPTQ v1 zeros to gptq_v2 (GPTQ-4.2)",
                          "gptqmodel for compressed-tensors to gptq_v2", None)


def test_a_single_file_is_refused_across_formats(tmp_path):
    """Without config.json beside it the output could not say its format (qweight is GPTQ's and AWQ's name)."""
    err = refused(AWQ / "model.safetensors", "compressed_tensors", tmp_path)
    assert whole(err) == ("argument.invalid", "path", "a checkpoint directory or shard index (a conversion to another "
                          "format rewrites config.json's quantization_config)", "the single file model.safetensors",
                          None)


def test_an_existing_output_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    assert main(["convert", str(AWQ), "--to", "compressed_tensors", "-o", str(tmp_path / "out")]) == 2
    with pytest.raises(QFormatsError) as info:
        convert(str(AWQ), str(tmp_path / "out"), to="compressed_tensors")
    assert whole(info.value) == ("argument.invalid", "output", "a file path, not an existing directory",
                                 str(tmp_path / "out"), None)
    assert list((tmp_path / "out").iterdir()) == []


def test_an_output_linked_into_the_input_is_refused(tmp_path):
    """A symbolic link into the input is the input: never written."""
    src = _awq_copy(tmp_path)
    before = digest(src)
    os.symlink(src / "sub", tmp_path / "link")
    with pytest.raises(QFormatsError) as info:
        convert(str(src), str(tmp_path / "link"), to="gptq_v2")
    assert whole(info.value) == ("argument.invalid", "output", "outside the input checkpoint (qformats never writes "
                                 "to its input)", str(tmp_path / "link"), None)
    assert digest(src) == before and not (src / "sub").exists()


@pytest.mark.parametrize("to", ["--to-awq", "--to-ct"])
def test_every_fixture_gets_an_answer_or_a_structured_refusal(tmp_path, to):
    """QF-5.1 for the new targets, under the fuzz contract (tests/fuzz/commands.py): every fixture converts or is
    refused with a QFormatsError; never another exception, never a write to the input or an existing output."""
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    import commands
    from test_commands import fixture_targets

    broken, converted = [], []
    for i, target in enumerate(fixture_targets()):
        mode = "new" if "third_party" in target.parts else ("new", "existing", "symlink-into-input")[i % 3]
        inv = commands.Invocation(command="convert", options=[to], output=mode)
        outcome, detail = commands.sweep_one(inv, target, tmp_path / f"out{i}")
        if outcome.startswith(("EXCEPTION", "CONTRACT")):
            broken.append((str(target.relative_to(ROOT)), outcome, detail[:200]))
        if outcome == "exit0":
            converted.append(target.name)
    assert broken == []
    assert {"gemm_w4_g32" if to == "--to-ct" else "w4_asym_group32", "e2e_b4_sym_g32_gptq"} <= set(converted)


# -- the independent route: the real libraries read the converted checkpoints ----------------------------------

REAL_CHECK = r'''
import importlib, json, sys, types
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(sys.argv[1])
sys.path.insert(0, str(ROOT))
jobs, results = json.loads(sys.stdin.read()), {}


def state_of(path):
    state = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        state.update(load_file(str(f)))
    return state


def compressed_tensors(path):
    """As transformers loads it: CompressedTensorsConfig -> ModelCompressor, the scheme applied to a model of
    Linear modules, compress_model (the parameters it expects), the checkpoint loaded strictly, decompress_model."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import apply_quantization_config
    from transformers import CompressedTensorsConfig

    config = json.loads((Path(path) / "config.json").read_text())["quantization_config"]
    compressor = ModelCompressor.from_compression_config(CompressedTensorsConfig.from_dict(config))
    state = state_of(path)
    shapes = {n[:-13]: tuple(int(v) for v in t) for n, t in state.items() if n.endswith(".weight_shape")}
    shapes |= {n[:-7]: tuple(t.shape) for n, t in state.items() if n.endswith(".weight") and t.ndim == 2}
    model = torch.nn.Module()
    for name, (n_out, n_in) in shapes.items():
        parent = model
        *path_, leaf = name.split(".")
        for part in path_:
            if not hasattr(parent, part):
                parent.add_module(part, torch.nn.Module())
            parent = getattr(parent, part)
        parent.add_module(leaf, torch.nn.Linear(n_in, n_out, bias=f"{name}.bias" in state))
    apply_quantization_config(model, compressor.quantization_config)
    compressor.compress_model(model)
    expected = model.state_dict()
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=True)
    compressor.decompress_model(model)
    return {n: model.get_submodule(n).weight.detach().float().numpy().tolist()
            for n in shapes if f"{n}.weight_packed" in state}


def autoawq(path):
    """AutoAWQ reads the config (AwqConfig.from_transformers_dict) and decodes each layer (WQLinear_GEMM, CPU)."""
    from conformance.adapters import autoawq as adapter

    root = adapter.SDIST / "awq" / "models"
    module = types.ModuleType("awq.models")
    module.__path__ = [str(root)]
    sys.modules.setdefault("awq.models", module)
    AwqConfig = importlib.import_module("awq.models._config").AwqConfig
    raw = json.loads((Path(path) / "config.json").read_text())["quantization_config"]
    config = AwqConfig.from_dict(AwqConfig().from_transformers_dict(raw))
    assert (config.w_bit, config.version, config.zero_point) == (4, "gemm", True), vars(config)
    state = state_of(path)
    out = {}
    for name in sorted(n[:-8] for n in state if n.endswith(".qweight")):
        assert not any(key in name for key in config.modules_to_not_convert or ()), name
        w = adapter.dequantize(qweight=state[f"{name}.qweight"], qzeros=state[f"{name}.qzeros"],
                               scales=state[f"{name}.scales"], group_size=config.q_group_size)
        out[name] = w.float().numpy().tolist()
    return out


def gptqmodel(path):
    """GPTQModel parses the config (QuantizeConfig.from_quant_config) and decodes each layer (TorchLinear)."""
    from gptqmodel.quantization.config import QuantizeConfig
    from conformance.adapters import gptqmodel as adapter

    raw = json.loads((Path(path) / "config.json").read_text())["quantization_config"]
    config = QuantizeConfig.from_quant_config(raw)
    fmt = str(getattr(config.format, "value", config.format))
    decode = {"gptq_v2": adapter.dequantize_v2, "gptq": adapter.dequantize_v1}[fmt]
    state = state_of(path)
    out = {}
    for name in sorted(n[:-8] for n in state if n.endswith(".qweight")):
        w = decode(**{k: state[f"{name}.{k}"].numpy() for k in ("qweight", "qzeros", "scales", "g_idx")},
                   bits=config.bits, group_size=config.group_size)
        out[name] = w.float().numpy().tolist()
    return out


for key, (library, path) in jobs.items():
    results[key] = globals()[library](path)
print(json.dumps(results))
'''

REAL_JOBS = {"awq>ct": "compressed_tensors", "gptq>ct": "compressed_tensors", "ct8>v2>ct": "compressed_tensors",
             "ct4a>awq": "autoawq", "gptq>awq": "autoawq",
             "awq>v2": "gptqmodel", "awq>v1": "gptqmodel", "ct8>v2": "gptqmodel",
             "sample_awq": "autoawq", "sample_ct": "compressed_tensors"}


@pytest.fixture(scope="module")
def real(out) -> dict[str, dict[str, np.ndarray]]:
    """One run of the real-library environment over every job (one process: the imports dominate, ~10 s):
    {job: {module: weight (out, in)}}."""
    if not REAL_STAMP.exists():
        pytest.skip("AutoAWQ / compressed-tensors / GPTQModel environment not built (make real-subjects)")
    jobs = {key: (library, str(out[key])) for key, library in REAL_JOBS.items()}
    done = subprocess.run([str(REAL_PYTHON), "-c", REAL_CHECK, str(ROOT)], input=json.dumps(jobs), capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {key: {m: np.asarray(w, np.float32) for m, w in modules.items()} for key, modules in got.items()}


def source_weights(job: str) -> dict[str, np.ndarray]:
    """qformats' decode of the checkpoint the real library wrote first, at the start of the job's chain: a
    converted config that misstated the layout would make the library read other weights."""
    return decoded(SOURCES[job.split(">")[0]])


@pytest.mark.parametrize("job", [k for k, v in REAL_JOBS.items() if v == "compressed_tensors"])
def test_compressed_tensors_decompresses_the_converted_checkpoint_to_qformats_weights(out, real, job):
    """compressed-tensors 0.20.0 loads the written config and tensors (strictly: names, shapes, the ignore list)
    and decompresses each module, in float32, to exactly qformats' decode of the original checkpoint."""
    ours = source_weights(job)
    assert sorted(real[job]) == sorted(ours)
    for module, weight in ours.items():
        np.testing.assert_array_equal(real[job][module], weight)


@pytest.mark.parametrize("job", [k for k, v in REAL_JOBS.items() if v == "autoawq"])
def test_autoawq_reads_the_converted_checkpoint_as_qformats(out, real, job):
    """AutoAWQ 0.2.9 parses the config and its CPU GEMM path decodes each module to the original checkpoint's
    weights (qformats' decode), rounded to float16 as it computes them."""
    ours = source_weights(job)
    assert sorted(real[job]) == sorted(ours)
    for module, weight in ours.items():
        np.testing.assert_array_equal(real[job][module], weight.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("job", [k for k, v in REAL_JOBS.items() if v == "gptqmodel"])
def test_gptqmodel_reads_the_converted_checkpoint_as_qformats(out, real, job):
    """GPTQModel 7.7.0 parses the config's checkpoint_format and decodes each module (float16) to the original
    checkpoint's weights (qformats' decode)."""
    ours = source_weights(job)
    assert sorted(real[job]) == sorted(ours)
    for module, weight in ours.items():
        np.testing.assert_array_equal(real[job][module], weight.astype(np.float16).astype(np.float32))


def test_modules_of_two_formats_are_refused(tmp_path):
    """QF-5.1: a GPTQ checkpoint holding one compressed-tensors module (weight_packed) has no one source format."""
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    tensors = load_file(str(GPTQ_V1 / "model.safetensors"))
    tensors.update({"extra.weight_packed": np.zeros((4, 16), np.int32),
                    "extra.weight_scale": np.ones((4, 1), np.float16),
                    "extra.weight_shape": np.array([4, 128], np.int64)})
    save_file(tensors, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_bytes((GPTQ_V1 / "config.json").read_bytes())
    err = refused(ckpt, "awq_gemm", tmp_path)
    assert whole(err) == ("argument.invalid", "path", "a checkpoint whose quantized modules are of one format",
                          "ctensors, gptq", None)


def test_a_spqr_checkpoint_is_refused_across_formats(tmp_path):
    """Only GPTQ, AWQ GEMM and compressed-tensors modules convert across formats (AWQ-4, CT-4)."""
    err = refused(ROOT / "fixtures" / "checkpoints" / "spqr_csr", "awq_gemm", tmp_path)
    assert whole(err) == ("argument.invalid", "path", "a GPTQ, AWQ GEMM or compressed-tensors pack-quantized "
                          "checkpoint", "spqr layers", None)


def test_a_checkpoint_without_quantized_modules_is_refused_across_formats(tmp_path):
    ckpt = tmp_path / "src"
    ckpt.mkdir()
    save_file({"lm_head.weight": np.zeros((4, 8), np.float16)}, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text("{}")
    err = refused(ckpt, "compressed_tensors", tmp_path)
    assert whole(err) == ("argument.invalid", "path", "a GPTQ, AWQ GEMM or compressed-tensors pack-quantized "
                          "checkpoint", "no quantized modules", None)


def _pinned_config(path: Path) -> dict:
    """The quantization_config the real library wrote for a fixture checkpoint (GPTQModel's run metadata dropped)."""
    return {k: v for k, v in quant_config(path).items() if k != "meta"}


@pytest.mark.parametrize(("to", "symmetric", "path"), [("awq_gemm", False, AWQ),
                                                        ("compressed_tensors", True, CT / "w4_sym_group32"),
                                                        ("gptq", True, GPTQ_V1)], ids=["awq", "ct", "gptq"])
def test_quantization_config_is_the_one_the_real_library_wrote(to, symmetric, path):
    """AWQ-5.1, CT-5.1, GPTQ-6.3: 4-bit, group size 32, lm_head unquantized, as the pinned fixture configs."""
    from qformats.convert import quantization_config

    assert quantization_config(to, bits=4, group_size=32, symmetric=symmetric,
                               excluded=[] if to == "gptq" else ["lm_head"]) == _pinned_config(path)


def test_gptq_config_says_lm_head_when_lm_head_is_quantized():
    """GPTQ-6.3: GPTQModel's ``lm_head`` key is true when lm_head is one of the quantized modules."""
    from qformats.convert import quantization_config

    assert quantization_config("gptq_v2", bits=4, group_size=32, symmetric=True, quantized={"lm_head"})["lm_head"]


def test_mixed_group_sizes_are_refused_with_awqs_code_for_awq(tmp_path):
    """AWQ-4.3: the one-scheme refusal for target awq_gemm carries AWQ's error code."""
    ckpt = _ct_checkpoint(tmp_path, {"a": {"num_bits": 4, "group_size": 32}, "b": {"num_bits": 4, "group_size": 16}},
                          {"g0": {"targets": ["a"], "num_bits": 4, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 32},
                           "g1": {"targets": ["b"], "num_bits": 4, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 16}})
    err = refused(ckpt, "awq_gemm", tmp_path)
    assert whole(err) == ("awq.convert.unrepresentable", "b.group_size", "32, as in a: qformats convert writes "
                          "one scheme for every module (AWQ-4.3, CT-4.4)", 16, "model.safetensors")


def test_conversion_across_formats_creates_a_missing_output_parent(tmp_path):
    out = tmp_path / "new" / "parent" / "ct"
    modules = sum(name.endswith(".qweight") for name in load_file(str(AWQ / "model.safetensors")))
    assert convert(str(AWQ), str(out), to="compressed_tensors") == {"layers": modules, "from": "awq"}
    assert (out / "config.json").is_file()


def test_output_is_staged_in_a_hidden_sibling_then_renamed(tmp_path, monkeypatch):
    """Staged beside the output (same filesystem, so the rename is atomic) under '.<name>.', as tools.convert."""
    import qformats.convert as across

    renames = []
    monkeypatch.setattr(across.os, "replace", lambda src, dst: renames.append((Path(src), Path(dst))))
    convert(str(AWQ), str(tmp_path / "out"), to="compressed_tensors")
    (stage, dst), = renames
    assert dst == tmp_path / "out" and stage.parent == tmp_path and stage.name.startswith(".out.")


def test_a_failure_while_writing_leaves_no_output_and_no_staging_directory(tmp_path, monkeypatch):
    import qformats.convert as across

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(across, "_write_side_files", broken)
    with pytest.raises(OSError, match="disk full"):
        convert(str(AWQ), str(tmp_path / "out"), to="compressed_tensors")
    assert list(tmp_path.iterdir()) == []


def test_a_bad_awq_config_is_refused_naming_config_json(tmp_path):
    """AWQ-5.1: AWQ GEMM stores zero points, so its config says zero_point true; the error names config.json."""
    src = tmp_path / "src"
    shutil.copytree(AWQ, src)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"]["zero_point"] = False
    (src / "config.json").write_text(json.dumps(config))
    err = refused(src, "gptq_v2", tmp_path)
    assert whole(err) == ("awq.config.invalid", "zero_point", "true", False, "config.json")


def test_a_compressed_tensors_checkpoint_without_config_is_refused(tmp_path):
    """CT-5.1: the scheme of pack-quantized modules is in config.json's config_groups; without it none is known."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(CT / "w4_sym_group32" / "model.safetensors", src)
    err = refused(src, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.config.invalid", "config_groups", "present", {}, None)


def test_an_unknown_source_version_is_refused_across_formats(tmp_path):
    err = refused(GPTQ_V1, "awq_gemm", tmp_path, "--source-version", "v3")
    assert whole(err) == ("argument.invalid", "source_version", "v1 or v2", "v3", None)


UNQUANTIZED_BY_CONFIG = {   # source, config edit, target, the whole error (the module still holds its code tensor)
    "gptq": (GPTQ_V1, {"dynamic": {"-:.*down_proj": {}}}, "awq_gemm",
             ("gptq.config.tensor_mismatch", "model.layers.0.mlp.down_proj.qweight", "absent: dynamic rule "
              "'-:.*down_proj' leaves this module unquantized (GPTQ-6.6)", "present", "model.safetensors")),
    "awq": (AWQ, {"modules_to_not_convert": ["lm_head", "down_proj"]}, "gptq_v2",
            ("awq.config.tensor_mismatch", "model.layers.0.mlp.down_proj.qweight", "absent: modules_to_not_convert "
             "entry 'down_proj' leaves this module unquantized (AWQ-5.2)", "present", "model.safetensors")),
    "ct": (CT / "w4_sym_group32", {"ignore": ["lm_head", "re:.*down_proj"]}, "gptq_v2",
           ("ctensors.config.tensor_mismatch", "model.layers.0.mlp.down_proj.weight_packed", "in a module a "
            "pack-quantized config group targets (CT-5.3)", "ignored by ignore entry 're:.*down_proj'",
            "model.safetensors")),
}


@pytest.mark.parametrize("case", list(UNQUANTIZED_BY_CONFIG))
def test_a_quantized_module_its_config_leaves_unquantized_is_refused(tmp_path, case):
    """GPTQ-6.6, AWQ-5.2, CT-5.3: the config's exclusion and the module's packed codes contradict each other."""
    source, edit, to, expected = UNQUANTIZED_BY_CONFIG[case]
    src = tmp_path / "src"
    shutil.copytree(source, src)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"].update(edit)
    (src / "config.json").write_text(json.dumps(config))
    assert whole(refused(src, to, tmp_path)) == expected



def _gptq_with_config(tmp_path: Path, **edit) -> Path:
    src = tmp_path / "src"
    shutil.copytree(GPTQ_V1, src)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"].update(edit)
    (src / "config.json").write_text(json.dumps(config))
    return src


@pytest.mark.parametrize("extra", [(), ("--source-version", "v2")], ids=["v1", "read_as_v2"])
def test_a_gptq_group_size_its_tensors_contradict_is_refused(tmp_path, extra):
    """GPTQ-2.2: qzeros has ceil(K / group_size) rows: K=256 at the stated group size 64 is 4, the file has 8."""
    err = refused(_gptq_with_config(tmp_path, group_size=64), "awq_gemm", tmp_path, *extra)
    assert whole(err) == ("tensor.shape", "model.layers.0.mlp.down_proj.qzeros", "4 rows (ceil(K=256 / group_size=64))",
                          8, "model.safetensors")


def test_a_gptq_checkpoint_declared_asymmetric_stays_asymmetric(tmp_path):
    """CT-4.4: symmetric only when the source declares it; centred zero points under sym=false keep their zeros."""
    convert(str(_gptq_with_config(tmp_path, sym=False)), str(tmp_path / "out"), to="compressed_tensors")
    assert quant_config(tmp_path / "out")["config_groups"]["group_0"]["weights"]["symmetric"] is False
    assert "model.layers.0.mlp.down_proj.weight_zero_point" in load_file(str(tmp_path / "out" / "model.safetensors"))


def test_an_awq_group_size_its_tensors_contradict_is_refused(tmp_path):
    """AWQ-2.2: scales has K / group_size rows: K=128 at the stated group size 64 is 2, the file has 4."""
    src = tmp_path / "src"
    shutil.copytree(AWQ, src)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"]["group_size"] = 64
    (src / "config.json").write_text(json.dumps(config))
    err = refused(src, "gptq_v2", tmp_path)
    assert whole(err) == ("tensor.shape", "model.layers.0.mlp.down_proj.scales", "of shape (2, 64)", (4, 64),
                          "model.safetensors")


def test_mixed_bit_widths_are_refused(tmp_path):
    """CT-4.4: a 4-bit and an 8-bit module; the written config states one scheme."""
    ckpt = _ct_checkpoint(tmp_path, {"a": {"num_bits": 4, "group_size": 32}, "b": {"num_bits": 8, "group_size": 32}},
                          {"g0": {"targets": ["re:^a$"], "num_bits": 4, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 32},
                           "g1": {"targets": ["re:^b$"], "num_bits": 8, "type": "int", "symmetric": True,
                                  "strategy": "group", "group_size": 32}})
    err = refused(ckpt, "gptq_v2", tmp_path)
    assert whole(err) == ("ctensors.convert.unrepresentable", "b.bits", "4, as in a: qformats convert writes "
                          "one scheme for every module (AWQ-4.3, CT-4.4)", 8, "model.safetensors")


def test_an_asymmetric_compressed_tensors_checkpoint_stays_asymmetric(tmp_path):
    """CT-4.4: zero points that all happen to be 0 (GPTQ v2's 2^(b-1)) under symmetric=false stay asymmetric."""
    ckpt = _ct_checkpoint(tmp_path, {"m": {"num_bits": 4, "group_size": 32, "zero_points": np.zeros((32, 2), np.int8)}},
                          {"g": {"targets": ["Linear"], "num_bits": 4, "type": "int", "symmetric": False,
                                 "strategy": "group", "group_size": 32}})
    convert(str(ckpt), str(tmp_path / "out"), to="gptq_v2")
    assert quant_config(tmp_path / "out")["sym"] is False


def test_a_symmetric_source_becomes_compressed_tensors_without_zero_points(tmp_path):
    """CT-2.5: a symmetric pack-quantized module stores no weight_zero_point, as compressed-tensors' own w4 sym
    checkpoint (pinned fixture) holds the same suffixes."""
    convert(str(GPTQ_V1), str(tmp_path / "out"), to="compressed_tensors")
    module = "model.layers.0.mlp.down_proj"
    written = {n.rpartition(".")[2] for n in read_header(str(tmp_path / "out" / "model.safetensors")).tensors
               if n.startswith(module + ".")}
    pinned = {n.rpartition(".")[2] for n in read_header(str(CT / "w4_sym_group32" / "model.safetensors")).tensors
              if n.startswith(module + ".")}
    assert written == pinned == {"weight_packed", "weight_scale", "weight_shape"}


def _gptq_with_bfloat16_bias(tmp_path: Path) -> Path:
    from qformats.convert import write_safetensors

    src = tmp_path / "src"
    shutil.copytree(GPTQ_V1, src)
    tensors = load_file(str(src / "model.safetensors"))
    entries = [(n, {"int32": "I32", "int64": "I64", "float16": "F16"}[a.dtype.name], a.shape, a)
               for n, a in tensors.items()]
    entries.append(("model.layers.0.mlp.down_proj.bias", "BF16", (64,), np.arange(64, dtype=np.uint16)))
    write_safetensors(src / "model.safetensors", entries)
    return src


def test_a_bfloat16_bias_is_copied_as_is_to_compressed_tensors(tmp_path):
    """CT-4.4: compressed-tensors keeps a module's bias in its own dtype; only AWQ and GPTQ store float16."""
    convert(str(_gptq_with_bfloat16_bias(tmp_path)), str(tmp_path / "out"), to="compressed_tensors")
    out = read_header(str(tmp_path / "out" / "model.safetensors")).tensors["model.layers.0.mlp.down_proj.bias"]
    assert (out.dtype, tuple(out.shape)) == ("BF16", (64,))


def test_a_bfloat16_bias_is_refused_with_awqs_code_for_awq(tmp_path):
    err = refused(_gptq_with_bfloat16_bias(tmp_path), "awq_gemm", tmp_path)
    assert whole(err) == ("awq.convert.unrepresentable", "model.layers.0.mlp.down_proj.bias", "float16: AWQ GEMM and "
                          "GPTQ store float16 biases (AWQ-2.1, GPTQ-2.1); converting it would round", "BF16",
                          "model.safetensors")


def test_a_shard_without_quantized_modules_is_copied(tmp_path):
    """CKPT-3: a shard holding only unquantized tensors is rewritten unchanged beside the converted one."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes((AWQ / "config.json").read_bytes())
    save_file(load_file(str(AWQ / "model.safetensors")), str(src / "model-00001-of-00002.safetensors"))
    extra = np.arange(8, dtype=np.float16).reshape(2, 4)
    save_file({"extra.norm": extra}, str(src / "model-00002-of-00002.safetensors"))
    weight_map = {n: "model-00001-of-00002.safetensors" for n in load_file(str(AWQ / "model.safetensors"))}
    (src / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {**weight_map, "extra.norm": "model-00002-of-00002.safetensors"}}))
    convert(str(src / "model.safetensors.index.json"), str(tmp_path / "out"), to="compressed_tensors")
    shard = load_file(str(tmp_path / "out" / "model-00002-of-00002.safetensors"))
    assert list(shard) == ["extra.norm"]
    np.testing.assert_array_equal(shard["extra.norm"], extra, strict=True)
    index = (tmp_path / "out" / "model.safetensors.index.json").read_text()     # as transformers writes it
    assert index == json.dumps(json.loads(index), indent=2) + "\n"


def test_write_safetensors_without_metadata_writes_the_bytes_the_safetensors_library_writes(tmp_path):
    """ST-2.6: no __metadata__ key when there is none, byte for byte as safetensors' save_file writes it."""
    from qformats.convert import write_safetensors

    # "bb": the compact header is 1 past a multiple of 8, so 7 bytes of padding follow it (ST-2.3)
    tensors = {"bb": np.arange(6, dtype=np.int32).reshape(2, 3), "a": np.ones(5, np.float16)}
    write_safetensors(tmp_path / "ours.safetensors", [(n, {"int32": "I32", "float16": "F16"}[a.dtype.name], a.shape, a)
                                                      for n, a in tensors.items()])
    save_file(tensors, str(tmp_path / "theirs.safetensors"))
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


def test_every_side_file_but_the_source_format_configs_is_copied(tmp_path):
    """QF convert: tokenizer and other files come along; quantize_config.json / quant_config.json name the source
    format and are left out; config.json is rewritten, 2-space indented and newline-terminated as transformers."""
    src = tmp_path / "src"
    shutil.copytree(AWQ, src)
    side = ["tokenizer.json", "generation_config.json", "special_tokens_map.json", "vocab.txt"]
    for name in side + ["quantize_config.json", "quant_config.json"]:
        (src / name).write_text(json.dumps({"name": name}))
    convert(str(src), str(tmp_path / "out"), to="compressed_tensors")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(side + ["config.json", "model.safetensors"])
    for name in side:
        assert (tmp_path / "out" / name).read_bytes() == (src / name).read_bytes()
    text = (tmp_path / "out" / "config.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2) + "\n"


@pytest.mark.parametrize("to", ["gptq", "compressed_tensors"])
def test_a_side_file_that_cannot_be_read_is_refused_naming_it(tmp_path, to):
    """CKPT-1.2 (fuzz seed 2026, case 64916): generation_config.json linked to /proc/self/mem is a regular file
    whose read fails (EIO); convert refuses it with the file named, leaves no output, never a traceback.
    Both copy paths: GPTQ v2 -> v1 (qformats.tools) and across formats (qformats.convert)."""
    src = tmp_path / "ckpt"
    shutil.copytree(ROOT / "fixtures/checkpoints/gptq_v1_sym_4bit", src)
    (src / "generation_config.json").symlink_to("/proc/self/mem")
    out = tmp_path / "out"
    with pytest.raises(QFormatsError) as err:
        convert(str(src), str(out), to="gptq_v2" if to == "gptq" else to)
    assert (err.value.code, err.value.constraint) == ("ckpt.path.unreadable", "a readable path")
    assert err.value.file == str(src / "generation_config.json") and "Input/output error" in str(err.value.actual)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["ckpt"]
