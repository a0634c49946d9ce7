"""spec/bnb.md against checkpoints transformers 5.24.0 + bitsandbytes 0.50.2 wrote on CPU
(fixtures/third_party/bnb, PROVENANCE.md): they validate with every tensor checked and decode to
bitsandbytes' own dequantize_4bit / int8_vectorwise_dequant output, from Python and from the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from qformats.cli import main
from qformats.containers.checkpoint import open_checkpoint
from qformats.formats import bnb
from qformats.tools import decode
from qformats.validate import validate

from .helpers import CHECKPOINTS, EXPECTED, ROOT

NAMES = ("nf4", "nf4_dq", "fp4", "fp4_dq", "int8")


def _expected(name: str) -> dict[str, np.ndarray]:
    """bitsandbytes' decode as float32 values (BF16 widened exactly)."""
    with open_checkpoint(str(EXPECTED / f"{name}.safetensors")) as e:
        out = {}
        for t in e.tensor_names():
            raw = np.array(e.tensor(t))
            out[t] = (raw.astype(np.uint32) << 16).view(np.float32) if e.tensor_info(t).dtype == "BF16" \
                else raw.astype(np.float32)
        return out


def _bits_equal_but_fp4_zero_sign(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """Bit-identical, except that bitsandbytes' pure-torch CPU path writes +0 for FP4 code 8 where the C++ path
    and the reference write -0 (BNB-2.3): both zeros, and only there."""
    diff = ours.view(np.uint32) != theirs.view(np.uint32)
    return bool(np.all((ours[diff] == 0) & (theirs[diff] == 0)))


@pytest.mark.parametrize("name", NAMES)
def test_real_checkpoint_is_valid_with_every_tensor_checked(name):
    """BNB-1 .. BNB-7: a checkpoint transformers + bitsandbytes wrote is VALID, --deep reads every tensor."""
    report = validate(str(CHECKPOINTS / name), deep=True, jobs=1)
    assert (report.verdict, report.format, report.summary["errors"], report.summary["warnings"]) == \
        ("valid", "bnb", 0, 0)
    assert report.summary["tensors_checked"] == report.summary["tensors"]


@pytest.mark.parametrize("name", NAMES)
def test_python_decode_equals_bitsandbytes(name, tmp_path):
    """BNB-3.2 / BNB-6.2: qformats' decode of every module equals bitsandbytes' own, value for value."""
    decode(str(CHECKPOINTS / name), ["model.layers.0.*"], str(tmp_path / "out.safetensors"))
    expected = _expected(name)
    with open_checkpoint(str(tmp_path / "out.safetensors")) as got:
        assert len(expected) == (6 if name == "nf4_dq" else 7) and set(expected) <= set(got.tensor_names())
        for t, want in expected.items():
            ours = np.asarray(got.tensor(t)).astype(np.float32)
            assert ours.shape == want.shape and _bits_equal_but_fp4_zero_sign(ours, want), t


def test_cli_decode_is_bit_exact_for_nf4_bfloat16(tmp_path, capsys):
    """BNB-3.2: ``qformats decode`` writes bitsandbytes' NF4 values (bfloat16 held in float32), bit for bit."""
    out = tmp_path / "q.safetensors"
    assert main(["decode", str(CHECKPOINTS / "nf4"), "--tensor", "model.layers.0.mlp.down_proj", "-o", str(out)]) == 0
    with open_checkpoint(str(out)) as got:
        ours = np.asarray(got.tensor("model.layers.0.mlp.down_proj.weight"))
    want = _expected("nf4")["model.layers.0.mlp.down_proj.weight"]
    assert ours.dtype == np.float32 and np.array_equal(ours.view(np.uint32), want.view(np.uint32))


def test_fp4_code_8_sign_differs_between_bitsandbytes_cpu_paths():
    """BNB-2.3: bitsandbytes 0.50.2 decodes FP4 code 8 to +0 on its pure-torch path (odd in_features: down_proj)
    and to -0 on its C++ path (q_proj): the fixture holds both, measured."""
    e = _expected("fp4")
    with open_checkpoint(str(CHECKPOINTS / "fp4")) as c:
        signs = {}
        for m in ("mlp.down_proj", "self_attn.q_proj"):
            t = f"model.layers.0.{m}.weight"
            codes = bnb.codec.unpack_codes(c.tensor(t), e[t].size)
            signs[m] = sorted({float(np.copysign(1, v)) for v in e[t].reshape(-1)[codes == 8]})
    assert signs == {"mlp.down_proj": [1.0], "self_attn.q_proj": [-1.0]}


def _vectors() -> tuple[dict[str, np.ndarray], list[str]]:
    with open_checkpoint(str(ROOT / "vectors.safetensors")) as v:
        out = {}
        for t in v.tensor_names():
            raw = np.array(v.tensor(t))
            out[t] = (raw.astype(np.uint32) << 16).view(np.float32) if v.tensor_info(t).dtype == "BF16" else raw
    return out, sorted({t.split(".")[0] for t in out})


VECTORS, CASES = _vectors()


def _state(case: str) -> dict:
    import json
    return json.loads(VECTORS[f"{case}.state"].tobytes())


@pytest.mark.parametrize("case", CASES)
def test_quantize_4bit_is_byte_exact_with_bitsandbytes(case):
    """BNB-3.1, BNB-1.2: the reference quantizer writes bitsandbytes' packed bytes and absmax for every blocksize,
    partial last blocks and odd n (the padding nibble is 0's code)."""
    s = _state(case)
    packed, absmax = bnb.quantize_4bit(VECTORS[f"{case}.x"], quant_type=s["quant_type"], blocksize=s["blocksize"])
    if "nested_offset" in s:
        codes, nested, offset = bnb.quantize_absmax(absmax)
        assert (offset, nested.tolist()) == (np.float32(s["nested_offset"]), VECTORS[f"{case}.nested_absmax"].tolist())
        absmax = codes
    assert np.array_equal(packed, VECTORS[f"{case}.q"]) and np.array_equal(absmax, VECTORS[f"{case}.absmax"])


@pytest.mark.parametrize("case", CASES)
def test_dequantize_4bit_equals_bitsandbytes_for_every_blocksize(case):
    """BNB-3.2, BNB-4.3: decode of bitsandbytes' own bytes equals its dequantize_4bit in the state's dtype."""
    s = _state(case)
    absmax = VECTORS[f"{case}.absmax"]
    if "nested_offset" in s:
        absmax = bnb.scales(absmax, VECTORS[f"{case}.nested_absmax"], offset=s["nested_offset"])
    ours = bnb.dequantize_4bit(VECTORS[f"{case}.q"], absmax, quant_type=s["quant_type"], blocksize=s["blocksize"],
                               shape=tuple(s["shape"]), dtype=s["dtype"]).astype(np.float32)
    assert _bits_equal_but_fp4_zero_sign(ours, VECTORS[f"{case}.decoded"].astype(np.float32))


def test_dynamic_map_equals_the_stored_nested_quant_map():
    """BNB-4.2: the regenerated signed dynamic map is bitsandbytes' stored nested_quant_map, bit for bit."""
    with open_checkpoint(str(CHECKPOINTS / "nf4_dq")) as c:
        stored = np.asarray(c.tensor("model.layers.0.self_attn.q_proj.weight.nested_quant_map"))
    assert np.array_equal(bnb.dynamic_map().view(np.uint32), stored.view(np.uint32))


def test_stored_quant_maps_are_the_tables():
    """BNB-2.1, BNB-2.2: the NF4 and FP4 tables as bitsandbytes stores them (FP4 code 8 stored as +0)."""
    with open_checkpoint(str(CHECKPOINTS / "nf4")) as n, open_checkpoint(str(CHECKPOINTS / "fp4")) as f:
        nf4 = np.asarray(n.tensor("model.layers.0.self_attn.q_proj.weight.quant_map"))
        fp4 = np.asarray(f.tensor("model.layers.0.self_attn.q_proj.weight.quant_map"))
    assert np.array_equal(nf4.view(np.uint32), bnb.NF4.view(np.uint32))
    assert np.array_equal(fp4, bnb.FP4) and fp4[8] == 0 and not np.signbit(fp4[8]) and np.signbit(bnb.FP4[8])
