"""The failure classes the in-process fuzz (tests/fuzz/inproc.py) found on 2026-11-28, each closed at its root:
the input rebuilt from a bundled fixture, the whole answer asserted (issue #33's first rule: none reaches an
internal error, a contract break or unbounded memory)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf_builder import STRING, _one_kv, gstr, kv
from safetensors.numpy import load_file, save_file

from qformats.cli import main
from qformats.validate import validate

SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
Q = "model.layers.0.self_attn.q_proj"


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(SAMPLES / name, tmp_path / name))


def _set_config(ckpt: Path, change) -> None:
    cfg = json.loads((ckpt / "config.json").read_text())
    change(cfg)
    (ckpt / "config.json").write_text(json.dumps(cfg))


def _set_tensors(ckpt: Path, change) -> None:
    tensors = load_file(str(ckpt / "model.safetensors"))
    change(tensors)
    save_file(tensors, str(ckpt / "model.safetensors"))


def _errors(report) -> list[tuple[str, str]]:
    return [(f.code, f.tensor) for f in report.findings if f.severity == "error"]


@pytest.mark.parametrize("model_type", [{"a": 1}, ["llama"]], ids=["dict", "list"])
def test_an_unhashable_model_type_is_not_llama_shaped(tmp_path, model_type):
    """CKPT-5.3 (inventory.module_shape_findings): a model_type that is no string names no architecture."""
    ckpt = _copy(tmp_path, "ctensors_w4_asym")
    _set_config(ckpt, lambda c: c.update(model_type=model_type))
    report = validate(str(ckpt))
    assert (report.verdict, _errors(report)) == ("valid", [])


@pytest.mark.parametrize("quant_type", [["nf4"], {"nf4": 1}], ids=["list", "dict"])
def test_an_unhashable_bnb_quant_type_is_a_config_error(tmp_path, quant_type):
    """BNB-7.1: bnb_4bit_quant_type is 'nf4' or 'fp4'; a list or an object is refused by name, not a TypeError."""
    ckpt = _copy(tmp_path, "bnb_nf4_dq")
    _set_config(ckpt, lambda c: c["quantization_config"].update(bnb_4bit_quant_type=quant_type))
    report = validate(str(ckpt))
    found = [f for f in report.findings if f.code == "bnb.config.invalid"]
    assert report.verdict == "invalid" and [f.tensor for f in found] == ["bnb_4bit_quant_type"]
    assert found[0].message == f"bnb_4bit_quant_type {quant_type!r} must be 'nf4' or 'fp4' (BNB-7.1)"


def test_a_bnb_module_without_its_packed_weight_is_invalid(tmp_path):
    """BNB-1.1 / BNB-1.3: the quant_state is there, the packed weight is not: a finding, not tensor.missing."""
    ckpt = _copy(tmp_path, "bnb_nf4_dq")
    _set_tensors(ckpt, lambda t: t.pop(f"{Q}.weight"))
    report = validate(str(ckpt))
    assert (report.verdict, _errors(report)) == ("invalid", [("bnb.shape", f"{Q}.weight")])
    assert report.findings[0].message == (f"'{Q}.weight' is missing: the quant_state's shape [64, 128] needs 4096 "
                                          "packed bytes (BNB-1.1, BNB-1.3)")


def test_num_hidden_layers_of_2_to_the_63_is_counted_not_enumerated(tmp_path):
    """CKPT-5.4 (completeness._layer_count_findings): the missing layers are runs between the present ones."""
    ckpt = _copy(tmp_path, "gptq_v1_sym_4bit")
    _set_config(ckpt, lambda c: c.update(num_hidden_layers=2 ** 63 - 1))
    report = validate(str(ckpt))
    missing = [f for f in report.findings if f.code == "ckpt.layer.missing"]
    assert [(f.tensor, f.count) for f in missing] == [("model.layers.1", 2 ** 63 - 2)]
    assert "have no tensor at all: 1-9223372036854775806 (config.json's num_hidden_layers says " \
           "9223372036854775807; 1 present)" in missing[0].message


def test_a_float_weight_shape_holding_inf_is_a_dtype_error(tmp_path):
    """CT-2.1 (ctensors.layers._fits): a float16 weight_shape of inf is refused by dtype, never int(inf)."""
    ckpt = _copy(tmp_path, "ctensors_w4_asym")
    _set_tensors(ckpt, lambda t: t.update({f"{Q}.weight_shape": np.array([np.inf, 128], np.float16)}))
    report = validate(str(ckpt))
    assert (report.verdict, _errors(report)) == ("invalid", [("tensor.dtype", f"{Q}.weight_shape")])


def test_a_gguf_key_with_a_newline_is_refused_on_one_line(tmp_path, capsys):
    """GGUF-2.10 and the CLI's one-line contract: decode cannot run, and says so on one line, the key escaped."""
    path = tmp_path / "newline.gguf"
    path.write_bytes(_one_kv(kv("general.architect\nre", STRING, gstr("llama"))))
    assert main(["decode", str(path), "--all", "-o", str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'general.architect\\nre' must be an ASCII key" in err
    assert err.rstrip().endswith("[gguf.key.form, GGUF-2.10]")


def test_decoding_an_fp8_module_without_its_weight_cannot_run(tmp_path, capsys):
    """FP8-6.1 (fp8.codec.dequantize): decode of a module holding a scale but no weight says so, not KeyError."""
    ckpt = Path(shutil.copytree(SAMPLES.parent / "third_party" / "fp8" / "checkpoints" / "ct_fp8_tensor",
                                tmp_path / "ct_fp8_tensor"))
    spec = importlib.util.spec_from_file_location("st_edit", Path(__file__).resolve().parents[1] / "fp8" / "st_edit.py")
    st_edit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(st_edit)              # the FP8 room's raw-bytes safetensors editor (F8, BF16)
    st_edit.edit(ckpt, lambda t: t.pop(f"{Q}.weight") and None)
    assert main(["decode", str(ckpt), "--tensor", Q, "-o", str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[fp8.weight.missing, FP8-6.1]" in err


def test_convert_writes_a_deeply_nested_config_back_in_bounded_text(tmp_path):
    """QF-1.1 (found 2026-11-29, convert case 243,767: TIMEOUT in convert._write_side_files): a config.json holding
    900-deep nests beside its quantization_config converts, the nests carried over equal, and the config written
    is at most a few times the compact text (json.dumps(indent=2) wrote 158 MB from 722 KB, taking over 5 s)."""
    ckpt = _copy(tmp_path, "ctensors_w3_per_word_0_17")
    nest = None
    for i in range(900):
        nest = [nest] if i % 2 else {"k": nest}
    _set_config(ckpt, lambda c: c.update(extra=[nest] * 200))
    assert main(["convert", str(ckpt), "--to", "compressed_tensors", "-o", str(tmp_path / "out")]) == 0
    raw = (tmp_path / "out" / "config.json").read_text()
    source = json.loads((ckpt / "config.json").read_text())
    assert json.loads(raw)["extra"] == source["extra"]
    assert len(raw) < 4 * len(json.dumps(source))
