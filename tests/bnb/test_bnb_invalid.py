"""spec/bnb.md: each bug under issue #30's "Why" and each malformed quant_state, made from a real
checkpoint (fixtures/third_party/bnb), is INVALID with one finding naming the tensor, clause and value."""

from __future__ import annotations

import numpy as np
import pytest

from qformats.containers.checkpoint import open_checkpoint
from qformats.errors import QFormatsError
from qformats.tools import decode
from qformats.validate import validate

from .helpers import CHECKPOINTS, O, Q, config, set_state, tensors, write

QS = f"{Q}.weight.quant_state.bitsandbytes__nf4"


def _errors(path) -> list[tuple[str, str, str | None, str]]:
    report = validate(str(path))
    assert report.verdict == "invalid"
    return [(f.code, f.clause, f.tensor, f.message) for f in report.findings if f.severity == "error"]


def _made(tmp_path, name: str, change) -> object:
    items = tensors(name)
    change(items)
    return write(tmp_path / name, items, config(name))


def test_absmax_one_entry_short(tmp_path):
    """BNB-3.4: 400 codes in blocks of 64 need 7 absmax; 6 makes bitsandbytes read past the end."""
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{Q}.weight.absmax": ("F32", t[f"{Q}.weight.absmax"][1][:6])}))
    assert _errors(path) == [("bnb.absmax.length", "BNB-3.4", f"{Q}.weight.absmax",
                              f"'{Q}.weight.absmax' has shape [6]; 7 blocks need [7] (bitsandbytes reads past the end "
                              "of a shorter absmax) (BNB-3.4)")]


def test_double_quant_without_nested_absmax(tmp_path):
    """BNB-4.4: uint8 absmax codes without nested_absmax: bitsandbytes uses the codes as scales."""
    path = _made(tmp_path, "nf4_dq", lambda t: t.pop(f"{Q}.weight.nested_absmax"))
    assert _errors(path) == [("bnb.nested.missing", "BNB-4.4", f"{Q}.weight.absmax",
                              f"'{Q}.weight.absmax' holds uint8 codes (double quantization) but the module has no "
                              "weight.nested_absmax; bitsandbytes then uses the codes themselves as scales (BNB-4.4)")]


def test_nan_absmax(tmp_path):
    """BNB-3.4: a NaN absmax decodes silently to a block of NaN in bitsandbytes."""
    def change(t):
        absmax = t[f"{Q}.weight.absmax"][1].copy()
        absmax[3] = np.nan
        t[f"{Q}.weight.absmax"] = ("F32", absmax)
    assert _errors(_made(tmp_path, "nf4", change)) == [
        ("bnb.absmax.nonfinite", "BNB-3.4", f"{Q}.weight.absmax", f"'{Q}.weight.absmax' holds nan at [3] (1 non-finite); "
         "bitsandbytes decodes its block to NaN or infinity without an error (BNB-3.4)")]


@pytest.mark.parametrize("value, named", [pytest.param(2, "col_turing", id="col_turing"),
                                          pytest.param(7, "no layout", id="unknown")])
def test_weight_format_other_than_row(tmp_path, value, named):
    """BNB-6.3: transformers never reads weight_format (decodes row-major), bitsandbytes refuses: only 0 is valid."""
    path = _made(tmp_path, "int8", lambda t: t.update({f"{Q}.weight_format": ("U8", np.array(value, np.uint8))}))
    assert _errors(path) == [("bnb.int8.weight_format", "BNB-6.3", f"{Q}.weight_format",
                              f"'{Q}.weight_format' is {value} ({named}); only 0 (row) is a layout readers decode: "
                              "transformers never reads it and decodes the bytes as row-major, bitsandbytes' load hook "
                              "refuses it (BNB-6.3)")]


def test_quant_map_disagreeing_with_quant_type(tmp_path):
    """BNB-2.4: an fp4 table under quant_type nf4: bitsandbytes decodes by the type, a table reader otherwise."""
    fp4 = tensors("fp4")[f"{Q}.weight.quant_map"]
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{Q}.weight.quant_map": fp4}))
    assert _errors(path) == [("bnb.quant_map.mismatch", "BNB-2.4", f"{Q}.weight.quant_map",
                              f"'{Q}.weight.quant_map' is the fp4 table while quant_type is 'nf4'; bitsandbytes "
                              "decodes by quant_type and ignores the stored table, readers that use the table decode "
                              "other weights (BNB-2.4)")]


def test_blocksize_outside_the_set(tmp_path):
    """BNB-3.3: blocksize 48 is not one bitsandbytes accepts."""
    path = _made(tmp_path, "nf4", lambda t: set_state(t, Q, "nf4", blocksize=48))
    assert _errors(path) == [("bnb.blocksize", "BNB-3.3", QS, f"'{QS}' says blocksize 48; bitsandbytes accepts 32, 64, "
                              "128, 256, 512, 1024, 2048, 4096 (BNB-3.3)")]


def test_state_shape_disagreeing_with_packed_weight(tmp_path):
    """BNB-1.3: the state says [20, 21] (420 codes, 210 bytes); the packed weight holds 200 bytes."""
    path = _made(tmp_path, "nf4", lambda t: set_state(t, Q, "nf4", shape=[20, 21]))
    assert _errors(path) == [("bnb.shape", "BNB-1.3", f"{Q}.weight", f"'{Q}.weight' is [200, 1] U8; the quant_state's "
                              "shape [20, 21] (420 codes) needs 210 packed bytes, (210, 1) U8 (BNB-1.3)")]


def test_weight_unpacked_to_the_config_shape(tmp_path):
    """BNB-1.3 (transformers#26037): the packed bytes stored as (N, K/2) instead of (n/2, 1)."""
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{Q}.weight": ("U8", t[f"{Q}.weight"][1].reshape(20, 10))}))
    assert _errors(path) == [("bnb.shape", "BNB-1.3", f"{Q}.weight", f"'{Q}.weight' is [20, 10] U8; the quant_state's "
                              "shape [20, 20] (400 codes) needs 200 packed bytes, (200, 1) U8 (BNB-1.3)")]


def test_state_shape_against_the_model_config(tmp_path):
    """CKPT-5.3 via BNB-5.1: a consistent module whose quant_state shape contradicts config.json's projection."""
    def change(t):
        t[f"{Q}.weight"] = ("U8", np.zeros((210, 1), np.uint8))
        set_state(t, Q, "nf4", shape=[21, 20])
    assert _errors(_made(tmp_path, "nf4", change)) == [
        ("ckpt.tensor.config_shape", "CKPT-5.3", Q, f"'{Q}' is a 20 -> 21 projection (in -> out), but config.json "
         "makes it 20 -> 20; transformers refuses to load it (size mismatch)")]


@pytest.mark.parametrize("changes, code, clause, message", [
    pytest.param({"quant_type": "int4"}, "bnb.quant_type", "BNB-5.2",
                 f"'{QS}' says quant_type 'int4'; it must be 'nf4' or 'fp4' and the one its name ends in ('nf4') "
                 "(BNB-5.2)", id="quant_type-unknown"),
    pytest.param({"quant_type": "fp4"}, "bnb.quant_type", "BNB-5.2",
                 f"'{QS}' says quant_type 'fp4'; it must be 'nf4' or 'fp4' and the one its name ends in ('nf4') "
                 "(BNB-5.2)", id="quant_type-not-its-name"),
    pytest.param({"dtype": "half"}, "bnb.dtype", "BNB-5.2",
                 f"'{QS}' says dtype 'half'; it must be one of float16, bfloat16, float32 (BNB-5.2)", id="dtype"),
    pytest.param({"shape": None}, "bnb.state.invalid", "BNB-5.1", f"'{QS}' lacks shape (BNB-5.1)", id="no-shape"),
    pytest.param({"shape": [400]}, "bnb.state.invalid", "BNB-5.1",
                 f"'{QS}' says shape [400]; a Linear's shape is [out_features, in_features] of positive integers "
                 "(BNB-5.1)", id="shape-1d"),
])
def test_malformed_quant_state(tmp_path, changes, code, clause, message):
    """BNB-5: each malformed quant_state key is one finding naming the state tensor and its value."""
    path = _made(tmp_path, "nf4", lambda t: set_state(t, Q, "nf4", **changes))
    assert _errors(path) == [(code, clause, QS, message)]


def test_quant_state_not_json(tmp_path):
    """BNB-5.1: the quant_state tensor must hold UTF-8 JSON."""
    path = _made(tmp_path, "nf4", lambda t: t.update({QS: ("U8", np.frombuffer(b"{\"quant_type\": ", np.uint8))}))
    assert _errors(path) == [("bnb.state.invalid", "BNB-5.1", QS, f"'{QS}' is not UTF-8 JSON (JSONDecodeError: "
                              "Expecting value: line 1 column 16 (char 15)) (BNB-5.1)")]


def test_two_quant_states(tmp_path):
    """BNB-5.1: bitsandbytes requires exactly one quant_state entry per module."""
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{Q}.weight.quant_state.bitsandbytes__fp4": t[QS]}))
    assert _errors(path) == [("bnb.state.duplicate", "BNB-5.1", f"{Q}.weight.quant_state",
                              f"'{Q}' holds 2 quant_state entries ({QS[:-3]}fp4, {QS}); bitsandbytes' "
                              "QuantState.from_dict requires exactly one ending in bitsandbytes__nf4 or "
                              "bitsandbytes__fp4 (BNB-5.1)")]


def test_non_uint8_storage_is_a_warning_and_decodes(tmp_path):
    """BNB-1.4: quant_storage bfloat16 (FSDP-QLoRA): the same bytes as BF16 (100, 1); transformers refuses it."""
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{O}.weight": ("BF16", t[f"{O}.weight"][1].reshape(-1).view(np.uint16).reshape(-1, 1))}))
    report = validate(str(path))
    assert report.verdict == "valid"
    assert [(f.code, f.severity, f.tensor) for f in report.findings] == [("bnb.storage", "warning", f"{O}.weight")]


def test_decode_refuses_an_invalid_module(tmp_path):
    """BNB-3.4: decode refuses what validate reports, with the same code."""
    path = _made(tmp_path, "nf4", lambda t: t.update({f"{Q}.weight.absmax": ("F32", t[f"{Q}.weight.absmax"][1][:6])}))
    with pytest.raises(QFormatsError) as err:
        decode(str(path), [Q], str(tmp_path / "out.safetensors"))
    assert (err.value.code, err.value.tensor) == ("bnb.absmax.length", f"{Q}.weight.absmax")


def test_skipped_modules_are_named():
    """BNB-7.2: the modules llm_int8_skip_modules leaves unquantized are named in an info finding."""
    report = validate(str(CHECKPOINTS / "nf4_dq"))
    assert [(f.code, f.severity, f.clause, f.tensor, f.count, f.message) for f in report.findings] == [
        ("bnb.module.skipped", "info", "BNB-7.2", "lm_head", 2, "2 modules left unquantized by llm_int8_skip_modules "
         "['lm_head', 'down_proj']: 'lm_head', 'model.layers.0.mlp.down_proj'; their weights are plain tensors (BNB-7.2)")]


def test_nested_blocksize_other_than_256(tmp_path):
    """BNB-4.1: double quantization is blockwise over 256 absmax codes."""
    path = _made(tmp_path, "nf4_dq", lambda t: set_state(t, Q, "nf4", nested_blocksize=128))
    assert _errors(path) == [("bnb.nested.invalid", "BNB-4.4", f"{Q}.weight.quant_state", "nested_blocksize 128, "
                              "nested_dtype 'float32'; double quantization is 256 and float32 (BNB-4.1)")]


def test_int8_scb_of_the_wrong_length(tmp_path):
    """BNB-6.1: SCB holds one float32 absmax per output row."""
    path = _made(tmp_path, "int8", lambda t: t.update({f"{Q}.SCB": ("F32", t[f"{Q}.SCB"][1][:19])}))
    assert _errors(path) == [("bnb.int8.invalid", "BNB-6.1", f"{Q}.SCB",
                              f"'{Q}.SCB' is [19] F32; it must be [20] F32")]


def _scb(items, row: int, value: float) -> None:
    scb = items[f"{Q}.SCB"][1].copy()
    scb[row] = value
    items[f"{Q}.SCB"] = ("F32", scb)


@pytest.mark.parametrize("value", [-0.5, float("nan")], ids=["negative", "nan"])
def test_int8_scb_negative_or_nonfinite(tmp_path, value):
    """BNB-6.1: SCB is a row's absmax, finite and not negative (bitsandbytes flips or NaNs the row silently)."""
    path = _made(tmp_path, "int8", lambda t: _scb(t, 3, value))
    assert _errors(path) == [("bnb.int8.invalid", "BNB-6.1", f"{Q}.SCB", f"'{Q}.SCB' holds {value} at [3]; "
                              "row scales must be finite and not negative (BNB-6.1)")]


def test_int8_scb_zero_is_valid(tmp_path):
    """BNB-6.1: SCB 0 is bitsandbytes' scale of an all-zero row: VALID, and the row decodes to zeros."""
    path = _made(tmp_path, "int8", lambda t: _scb(t, 3, 0.0))
    report = validate(str(path), deep=True, jobs=1)
    assert (report.verdict, report.summary["errors"]) == ("valid", 0)
    decode(str(path), [Q], str(tmp_path / "out.safetensors"))
    with open_checkpoint(str(tmp_path / "out.safetensors")) as out:
        w = np.asarray(out.tensor(f"{Q}.weight"))
    assert w.shape == (20, 20) and (w[3] == 0).all() and (w[2] != 0).any()


def test_config_quant_type_outside_its_domain(tmp_path):
    """BNB-7.1: bnb_4bit_quant_type is nf4 or fp4."""
    items = tensors("nf4")
    path = write(tmp_path / "nf4", items, config("nf4") | {"quantization_config": {
        **config("nf4")["quantization_config"], "bnb_4bit_quant_type": "int4"}})
    assert _errors(path) == [("bnb.config.invalid", "BNB-7.1", "bnb_4bit_quant_type",
                              "bnb_4bit_quant_type 'int4' must be 'nf4' or 'fp4' (BNB-7.1)")]
