"""`qformats inspect`, `decode` and `convert` (DESIGN.md §4); none writes to its input."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.tools import convert, decode
from qformats.validate import validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MISLABELLED = FIXTURES / "third_party" / "gptq" / "checkpoints" / "neg_b4_sym_v2_zeros_labelled_gptq"
VALID_V1 = FIXTURES / "third_party" / "gptq" / "checkpoints" / "e2e_b4_sym_g32_gptq"


def test_convert_relabels_the_real_mislabelled_checkpoint_without_touching_tensors(tmp_path):
    """GPTQ-8.3 "the fix is qformats convert": v2 fields relabelled gptq_v2, tensors unchanged, then valid."""
    out = tmp_path / "fixed"
    assert main(["convert", str(MISLABELLED), "--to", "gptq_v2", "--source-version", "v2", "-o", str(out)]) == 0
    assert validate(str(out)).verdict == "valid"
    assert json.loads((out / "config.json").read_text())["quantization_config"]["checkpoint_format"] == "gptq_v2"
    assert (out / "model.safetensors").read_bytes() == (MISLABELLED / "model.safetensors").read_bytes()


def test_convert_refuses_to_shift_fields_the_label_misnames(tmp_path):
    """GPTQ-8.3: adding 1 to v2 fields labelled v1 would make every zero one too high; refused."""
    with pytest.raises(QFormatsError) as info:
        convert(str(MISLABELLED), str(tmp_path / "out"), to="gptq_v2")
    assert info.value.code == "gptq.label.mismatch"
    assert "--source-version v2" in info.value.message
    assert not (tmp_path / "out").exists()


def test_convert_v1_to_v2_is_lossless(tmp_path):
    """GPTQ-7.1: per-field v1 -> v2 keeps every decoded weight bit for bit."""
    out = tmp_path / "v2"
    convert(str(VALID_V1), str(out), to="gptq_v2")
    before, after = load_file(str(VALID_V1 / "model.safetensors")), load_file(str(out / "model.safetensors"))
    module = "model.layers.1.mlp.up_proj"
    layer = {k: before[f"{module}.{k}"] for k in ("qweight", "qzeros", "scales", "g_idx")}
    layer2 = {k: after[f"{module}.{k}"] for k in ("qweight", "qzeros", "scales", "g_idx")}
    np.testing.assert_array_equal(gptq.dequantize(layer, bits=4, version="v1"),
                                  gptq.dequantize(layer2, bits=4, version="v2"))
    assert set(before) == set(after)


def test_convert_v2_to_v1_refuses_zero_point_zero_with_the_count(tmp_path):
    """GPTQ-7.2: v2 -> v1 "refused with the count" when a zero point is 0."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    name = "model.layers.0.mlp.down_proj.qzeros"
    tensors[name] = np.zeros_like(tensors[name])  # every v2 zero 0
    from safetensors.numpy import save_file

    save_file(tensors, str(ckpt / "model.safetensors"))
    config = json.loads((ckpt / "config.json").read_text())
    config["quantization_config"]["checkpoint_format"] = "gptq_v2"
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(QFormatsError) as info:
        convert(str(ckpt), str(tmp_path / "out"), to="gptq")
    assert info.value.code == "gptq.zero.v2_not_representable_in_v1"
    assert info.value.tensor == "model.layers.0.mlp.down_proj.qzeros"
    assert "256 zero points of 0" in info.value.message
    assert not (tmp_path / "out").exists()


def test_output_inside_the_input_is_refused(tmp_path):
    """No command ever writes to its input."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "checkpoints" / "gptq_v1_sym_4bit", ckpt)
    assert main(["convert", str(ckpt), "--to", "gptq_v2", "-o", str(ckpt / "sub")]) == 2
    assert sorted(p.name for p in ckpt.iterdir()) == ["config.json", "model.safetensors"]


def test_decode_reproduces_the_third_party_truth(tmp_path):
    """decode: GPTQModel 7.7.0's packed layer decodes to the golden float32 truth, as (out, in)."""
    from safetensors.numpy import save_file

    golden = load_file(str(FIXTURES / "third_party" / "gptq" / "layers" / "b3_asym_g128_k160_n64_act.safetensors"))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"m.qweight": golden["gptqmodel.qweight"], "m.qzeros": golden["gptqmodel_v2.qzeros"],
               "m.scales": golden["scales"], "m.g_idx": golden["g_idx"]}, str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": {
        "bits": 3, "group_size": 128, "desc_act": True, "sym": False, "checkpoint_format": "gptq_v2"}}))
    assert list(decode(str(ckpt), ["m"], str(tmp_path / "w.safetensors"))) == ["m.weight"]
    w = load_file(str(tmp_path / "w.safetensors"))["m.weight"]
    np.testing.assert_array_equal(w, golden["truth"].T, strict=True)


def test_decode_applies_dynamic_overrides(tmp_path):
    """GPTQ-6.6: a module overridden to another group size is decoded with it, not the global one."""
    from safetensors.numpy import save_file

    golden = load_file(str(FIXTURES / "third_party" / "gptq" / "layers" / "b4_asym_g32_k128_n64.safetensors"))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({"layers.0.mlp.down_proj." + k: golden[src] for k, src in (
        ("qweight", "gptqmodel.qweight"), ("qzeros", "gptqmodel_v1.qzeros"), ("scales", "scales"), ("g_idx", "g_idx"))},
        str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": {
        "bits": 8, "group_size": 128, "checkpoint_format": "gptq",
        "dynamic": {"+:.*down_proj": {"bits": 4, "group_size": 32}}}}))
    decode(str(ckpt), ["layers.0.mlp.down_proj"], str(tmp_path / "w.safetensors"))
    w = load_file(str(tmp_path / "w.safetensors"))["layers.0.mlp.down_proj.weight"]
    np.testing.assert_array_equal(w, golden["truth"].T, strict=True)


def test_convert_creates_a_missing_output_parent(tmp_path):
    """convert writes into a new folder path whose parent does not exist yet."""
    out = tmp_path / "new" / "parent" / "v2"
    convert(str(VALID_V1), str(out), to="gptq_v2")
    assert validate(str(out)).verdict == "valid"


def test_decode_unknown_layer_is_exit_2(tmp_path, capsys):
    """Bad usage (a layer the checkpoint lacks) could not run: exit 2 with the code."""
    assert main(["decode", str(FIXTURES / "checkpoints" / "spqr_csr"), "--tensor", "nope",
                 "-o", str(tmp_path / "x.safetensors")]) == 2
    assert "argument.invalid" in capsys.readouterr().err


def test_inspect_prints_one_row_per_layer(capsys):
    """inspect: a per-layer table with format, bits, group size and bits per weight."""
    assert main(["inspect", str(FIXTURES / "checkpoints" / "q4_k.gguf")]) == 0
    out = capsys.readouterr().out.splitlines()[1:]                            # after the GGUF header (GGML-7.1)
    assert out[0].split()[:4] == ["layer", "format", "bits", "gs"]            # gs: group size, headers kept short
    assert len(out) == 4 and "4.5" in out[1]


def test_decode_refuses_a_mislabelled_checkpoint_without_source_version(tmp_path):
    """GPTQ-8.3: v2 zeros labelled v1 are refused by decode, naming the layer and the fix; with
    --source-version v2 they decode to what the writer meant."""
    src = FIXTURES / "checkpoints" / "gptq_v2_zeros_labelled_gptq"
    with pytest.raises(QFormatsError) as exc:
        decode(str(src), ["model.layers.0.mlp.down_proj"], str(tmp_path / "w.safetensors"))
    assert exc.value.code == "gptq.label.mismatch" and "model.layers.0.mlp.down_proj" in str(exc.value)
    assert "--source-version v2" in str(exc.value)
    notes = decode(str(src), ["model.layers.0.mlp.down_proj"], str(tmp_path / "w.safetensors"), source_version="v2")
    assert notes == {"model.layers.0.mlp.down_proj.weight": "float32 (out, in), read as v2"}


def test_spqr_decode_says_its_column_order_and_offers_the_permuted_one(tmp_path):
    """SPQR-5.3: original column order by default, permuted on request; the output says which."""
    src = FIXTURES / "checkpoints" / "spqr_csr"
    layer = next(iter(validate(str(src)).layers))["layer"]
    plain = decode(str(src), [layer], str(tmp_path / "a.safetensors"))
    permuted = decode(str(src), [layer], str(tmp_path / "b.safetensors"), permuted=True)
    assert "original column order" in plain[f"{layer}.weight"]
    assert "permuted column order" in permuted[f"{layer}.weight"]
    a = load_file(str(tmp_path / "a.safetensors"))[f"{layer}.weight"]
    b = load_file(str(tmp_path / "b.safetensors"))[f"{layer}.weight"]
    words = load_file(str(src / "model.safetensors"))[f"{layer}.in_perm"]
    perm = words.view(np.uint16).astype(np.int64)                 # SPQR-4.1: uint16 pairs, low half first
    assert np.array_equal(a[:, perm], b)                            # permuted column j is original perm[j]


def test_decode_warns_when_statistical_evidence_contradicts_the_label(tmp_path):
    """GPTQ-8.2: an asymmetric v2 layer labelled v1 is not refused (the evidence is statistical) but the
    decode says what the zeros suggest."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(3)
    layer = gptq.quantize(rng.normal(0, 0.02, (64, 256)).astype(np.float32), bits=4, group_size=64, sym=False,
                          version="v2")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    save_file({f"m.{k}": np.ascontiguousarray(layer.tensors[k]) for k in ("qweight", "qzeros", "scales", "g_idx")},
              str(ckpt / "model.safetensors"))
    (ckpt / "config.json").write_text(json.dumps({"quantization_config": {
        "bits": 4, "group_size": 64, "sym": False, "checkpoint_format": "gptq"}}))
    notes = decode(str(ckpt), ["m"], str(tmp_path / "w.safetensors"))
    assert "read as v1; warning: the zeros suggest v2" in notes["m.weight"]
