"""`qformats decode --all`, shell patterns in --tensor and near-miss names (issue 28 item 6).

A whole model is written as safetensors: every quantized layer decoded by the reference reader, every other
tensor copied as stored. Expected weights come from the real writers' own decoders: compressed-tensors
0.20.0's ``decompress_model`` (fixtures/third_party/compressed_tensors/expected) and gguf-py's
``gguf.quants.dequantize``.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.containers.checkpoint import open_checkpoint
from qformats.containers.safetensors import read_header
from qformats.errors import QFormatsError
from qformats.tools import decode
from whole_error import whole_in_file as whole

sys.path.insert(0, str(Path(__file__).resolve().parent / "ctensors"))
from ct_expected import as_bits, expected_bits  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
CT = FIXTURES / "third_party" / "compressed_tensors" / "checkpoints"
GGUF = FIXTURES / "checkpoints" / "q4_k_m.gguf"
GPTQ_NEG = FIXTURES / "third_party" / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq"
CT_MODULES = ("model.layers.0.mlp.down_proj", "model.layers.0.mlp.up_proj", "model.layers.0.self_attn.q_proj")


def stored(path: Path) -> dict[str, tuple[str, bytes]]:
    with open_checkpoint(str(path)) as ckpt:
        return {n: (ckpt.tensor_info(n).dtype, np.asarray(ckpt.tensor(n)).tobytes()) for n in ckpt.tensor_names()}


@pytest.mark.parametrize("name", ["w8_sym_channel", "w4_sym_group32"])
def test_all_decodes_every_layer_as_the_writer_does(name, tmp_path, capsys):
    """--all: every quantized layer is the library's own decode (rounded once to the model dtype, CT-3.1), every
    other tensor (lm_head, kept unquantized) its stored bytes and dtype; a sharded checkpoint gives one file."""
    out = tmp_path / "all.safetensors"
    assert main(["decode", str(CT / name), "--all", "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"1 unquantized tensor copied as stored -> {out}"
    written = stored(out)
    assert set(written) == {f"{m}.weight" for m in CT_MODULES} | {"lm_head.weight"}
    for module in CT_MODULES:
        want, dtype = expected_bits(name, module)
        dtype_written, raw = written[f"{module}.weight"]
        assert dtype_written == "F32"
        np.testing.assert_array_equal(as_bits(np.frombuffer(raw, np.float32).reshape(want.shape), dtype), want)
    assert written["lm_head.weight"] == stored(CT / name)["lm_head.weight"]


def test_all_copies_every_unquantized_tensor_of_a_gptq_model(tmp_path):
    """--all on GPTQModel's checkpoint: 14 layers decoded float32 (out, in), every embedding, norm and lm_head copied
    byte for byte with its dtype; nothing of the quantized tensors (qweight, qzeros, scales, g_idx) is left."""
    out = tmp_path / "all.safetensors"
    notes = decode(str(GPTQ_NEG), [], str(out), all_tensors=True)
    source = stored(GPTQ_NEG)
    quantized = {n for n in source if n.rsplit(".", 1)[-1] in ("qweight", "qzeros", "scales", "g_idx")}
    layers = {n.rsplit(".", 1)[0] for n in quantized}
    written = stored(out)
    assert len(layers) == 14 and set(written) == (set(source) - quantized) | {f"{m}.weight" for m in layers}
    for name in set(source) - quantized:
        assert written[name] == source[name] and notes[name] == f"copied as stored ({source[name][0]})"
    header = read_header(str(out))
    assert {header.tensors[f"{m}.weight"].dtype for m in layers} == {"F32"}


LAYERS, K, N = 8, 1024, 1024


@pytest.fixture(scope="module")
def eight_layers(tmp_path_factory) -> Path:
    """A GPTQ v2 checkpoint of 8 layers (1024 x 1024, 4-bit, symmetric, groups of 128), 4 MiB each decoded. Any
    qweight bits are codes (GPTQ-2.3), so random words make a conforming layer."""
    path = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(6)
    tensors = {}
    for i in range(LAYERS):
        name = f"model.layers.{i}.mlp.up_proj"
        tensors[f"{name}.qweight"] = rng.integers(-2**31, 2**31, (K // 8, N), dtype=np.int64).astype(np.int32)
        tensors[f"{name}.qzeros"] = np.full((K // 128, N // 8), 0x88888888 - 2**32, np.int32)   # zero 8, v2
        tensors[f"{name}.scales"] = np.full((K // 128, N), 0.01, np.float16)
        tensors[f"{name}.g_idx"] = (np.arange(K) // 128).astype(np.int32)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False,
        "checkpoint_format": "gptq_v2"}}))
    return path


def _peak(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_all_holds_one_layer_at_a_time(eight_layers, tmp_path):
    """--all is bounded by one layer: writing 8 layers peaks (Python and NumPy allocations) less than one more
    layer above writing one, where holding them all would add 7."""
    one = _peak(lambda: decode(str(eight_layers), ["model.layers.0.mlp.up_proj"], str(tmp_path / "one.safetensors")))
    every = _peak(lambda: decode(str(eight_layers), [], str(tmp_path / "all.safetensors"), all_tensors=True))
    assert len(read_header(str(tmp_path / "all.safetensors")).tensors) == LAYERS
    assert every < one + K * N * 4, (one, every)


def test_a_pattern_selects_layers_by_name(tmp_path):
    """--tensor 'model.layers.0.mlp.*': the two MLP layers, nothing else (fnmatch, case-sensitive)."""
    out = tmp_path / "mlp.safetensors"
    assert main(["decode", str(CT / "w8_sym_channel"), "--tensor", "model.layers.0.mlp.*", "-o", str(out)]) == 0
    assert set(stored(out)) == {"model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.up_proj.weight"}


def test_a_pattern_copies_the_unquantized_tensors_it_matches(tmp_path):
    """A pattern may match an unquantized tensor: it is copied as stored, not refused."""
    out = tmp_path / "head.safetensors"
    decode(str(CT / "w8_sym_channel"), ["lm_*"], str(out))
    assert stored(out) == {"lm_head.weight": stored(CT / "w8_sym_channel")["lm_head.weight"]}


def test_a_pattern_matching_nothing_is_refused(tmp_path):
    with pytest.raises(QFormatsError) as info:
        decode(str(CT / "w8_sym_channel"), ["model.layers.9.*"], str(tmp_path / "x.safetensors"))
    assert whole(info.value) == ("argument.invalid", "tensor", "a pattern matching a tensor or layer of this "
                                 "checkpoint (10 tensors)", "model.layers.9.*", None)


def test_a_near_miss_gguf_name_is_answered_with_the_closest_names(tmp_path):
    """llama.cpp names carry `.weight`: `blk.0.attn_q` is refused with `blk.0.attn_q.weight` first among the
    suggestions."""
    with pytest.raises(QFormatsError) as info:
        decode(str(GGUF), ["blk.0.attn_q"], str(tmp_path / "x.safetensors"))
    assert whole(info.value) == ("tensor.missing", "tensor", "a tensor of this file; did you mean blk.0.attn_q.weight "
                                 "or blk.0.attn_v.weight or blk.0.attn_k.weight?", "blk.0.attn_q", "q4_k_m.gguf")


def test_a_near_miss_layer_name_is_answered_with_the_closest_names(tmp_path):
    with pytest.raises(QFormatsError) as info:
        decode(str(CT / "w8_sym_channel"), ["model.layers.0.mlp.down"], str(tmp_path / "x.safetensors"))
    assert whole(info.value) == ("argument.invalid", "tensor", "a quantized layer of this checkpoint (3 layers, e.g. "
                                 "model.layers.0.mlp.down_proj); did you mean model.layers.0.mlp.down_proj or "
                                 "model.layers.0.mlp.up_proj or model.layers.0.mlp.down_proj.weight?",
                                 "model.layers.0.mlp.down", None)


def test_all_on_a_gguf_file_matches_gguf_py(tmp_path):
    """--all on a llama.cpp-typed GGUF file: block-typed tensors decoded as gguf-py's dequantize does, plain F32
    tensors written as stored, every tensor of the file present."""
    gguf = pytest.importorskip("gguf")
    out = tmp_path / "all.safetensors"
    decode(str(GGUF), [], str(out), all_tensors=True)
    got = load_file(str(out))
    reader = gguf.GGUFReader(str(GGUF))
    assert set(got) == {t.name for t in reader.tensors}
    for t in reader.tensors:
        want = gguf.quants.dequantize(t.data, t.tensor_type)
        np.testing.assert_array_equal(got[t.name].reshape(want.shape), want, err_msg=t.name)


def test_all_refuses_an_existing_output_without_force(tmp_path):
    out = tmp_path / "all.safetensors"
    out.write_bytes(b"mine")
    assert main(["decode", str(CT / "w8_sym_channel"), "--all", "-o", str(out)]) == 2
    assert out.read_bytes() == b"mine"
    assert main(["decode", str(CT / "w8_sym_channel"), "--all", "--force", "-o", str(out)]) == 0
    assert len(read_header(str(out)).tensors) == 4


def test_decode_without_a_name_or_all_is_refused(tmp_path):
    with pytest.raises(QFormatsError) as info:
        decode(str(CT / "w8_sym_channel"), [], str(tmp_path / "x.safetensors"))
    assert whole(info.value) == ("argument.invalid", "tensor", "at least one layer or tensor name, or all_tensors "
                                 "(--all)", "none", None)
