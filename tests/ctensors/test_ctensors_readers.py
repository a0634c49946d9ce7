"""CT-7: the emulated real reader paths (compressed-tensors, vLLM 0.33.0's WNA16 kernels: Marlin, Machete,
Exllama, Triton W4A16).

Refusals at each limit and one past it, in the tool's own words; values on hand-worked layers where a path's
16-bit arithmetic differs from the exact reference; the table of ``qformats conformance checkpoint`` on the
compressed-tensors fixtures."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from conformance.checkpoint import STATUSES, check_checkpoint
from qformats.errors import QFormatsError, fail
from qformats.formats.ctensors import codec
from qformats.formats.ctensors.layers import READERS, Layer
from qformats.layers import NotEmulated, ReaderValues, judge_readers, round_to

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/third_party/compressed_tensors/checkpoints"


def _layer(**kw) -> Layer:
    base = {"k": 128, "n": 128, "num_bits": 4, "symmetric": True, "group_size": 128, "act": "float16"}
    return Layer(**(base | kw))


@pytest.mark.parametrize(("reader", "layer", "phrase"), [
    pytest.param("vllm_wna16_marlin", _layer(), None, id="marlin-uint4b8-gs128"),
    pytest.param("vllm_wna16_marlin", _layer(num_bits=8, symmetric=False), "Quant type (uint8) not supported by "
                 "Marlin, supported types are: ['uint4']", id="marlin-uint8-zero-points"),
    pytest.param("vllm_wna16_marlin", _layer(k=256, group_size=256), "Group size (256) not supported by Marlin, "
                 "supported group sizes are: [-1, 32, 64, 128]", id="marlin-gs256"),
    pytest.param("vllm_wna16_machete", _layer(k=64, group_size=64, symmetric=False), None, id="machete-at-limits"),
    pytest.param("vllm_wna16_machete", _layer(group_size=32), "Group size (32) not supported by Machete, "
                 "supported group sizes are: [-1, 64, 128]", id="machete-gs32"),
    pytest.param("vllm_wna16_machete", _layer(k=96, group_size=-1), "Input features size must be divisible by 64 "
                 "(in_features = 96)", id="machete-k96"),
    pytest.param("vllm_wna16_machete", _layer(n=136), "Output features size must be divisible by 128 "
                 "(out_features = 136)", id="machete-n136"),
    pytest.param("vllm_wna16_exllama", _layer(group_size=16), None, id="exllama-float16-gs16"),
    pytest.param("vllm_wna16_exllama", _layer(act="bfloat16"), "Exllama only supports float16 activations "
                 "(activations bfloat16)", id="exllama-bfloat16"),
    pytest.param("vllm_wna16_exllama", _layer(group_size=-1), "Group size (-1) must be positive, Exllama does "
                 "not support channelwise quantization", id="exllama-channelwise"),
    pytest.param("vllm_wna16_triton", _layer(n=8, group_size=256, k=256), None, id="triton-n8-gs-256"),
    pytest.param("vllm_wna16_triton", _layer(n=12), "Output features (12) must be divisible by 8 (8 int4 values "
                 "packed per int32)", id="triton-n12"),
    pytest.param("vllm_wna16_triton", _layer(k=1024, group_size=512), "Group size 512 not supported; supported: "
                 "[-1, 32, 64, 128, 256] or full K (1024)", id="triton-gs512"),
    pytest.param("vllm_wna16_triton", _layer(k=512, group_size=512), None, id="triton-gs-equals-k"),
    pytest.param("vllm_wna16_marlin", _layer(num_bits=2), "Quant type (uint2b2) not supported by Marlin, "
                 "supported types are: ['uint4b8', 'uint8b128']", id="wna16-2-bit-reaches-the-kernels"),
    pytest.param("vllm_wna16_triton", _layer(num_bits=1), "Unsupported num_bits = 1. Supported num_bits = "
                 "[2, 3, 4, 5, 6, 7, 8]", id="wna16-1-bit"),
    pytest.param("vllm_wna16_marlin", _layer(actorder="group"), "Compressed-tensors group/dynamic activation "
                 "ordering (actorder='group') is no longer supported.", id="wna16-actorder-group"),
    pytest.param("vllm_wna16_marlin", _layer(actorder="weight"), None, id="wna16-actorder-weight"),
    pytest.param("compressed_tensors", _layer(num_bits=1, actorder="group"), None, id="compressed-tensors-1-bit"),
])
def test_reader_refusal(reader, layer, phrase):
    """Each path refuses exactly what its source refuses, in its words, with the actual value (CT-7)."""
    assert READERS[reader].why_not(layer) == phrase


def _tensors(stored_code: int, stored_zero: int | None, scale: float, k: int, n: int, gs: int) -> dict:
    g = 1 if gs == -1 else k // gs
    codes = np.full((n, k), stored_code - 8)
    codes[:, 1:] = 0 if stored_zero is None else stored_zero - 8       # column 0 alone is non-zero
    zeros = None if stored_zero is None else np.full((n, g), stored_zero - 8)
    layer = codec.pack(codes, np.full((n, g), scale, np.float32), num_bits=4, group_size=gs, zero_points=zeros)
    raw = dict(layer.tensors) if hasattr(layer, "tensors") else dict(layer)
    return raw | codec.checked_tensors(raw, 4)


def test_machete_zero_folding_rounds_three_times():
    """Stored q = 1, zp = 3 (q - zp = -2), s = 1 + 2^-10, float16: exact -2 - 2^-9; Machete adds float16(q s) =
    1 + 2^-10 and float16(-zp s) = -3 - 2^-8 (tie to even) and rounds the sum to -2 - 2^-8 (tie to even)."""
    t = _tensors(1, 3, 1 + 2.0 ** -10, 64, 128, 64)
    layer = _layer(k=64, group_size=64, symmetric=False)
    got = READERS["vllm_wna16_machete"].decode(t, layer)
    assert set(got.values[:, 0]) == {-2.00390625} and not got.values[:, 1:].any()
    verdict = judge_readers({"m": lambda: got}, codec.dequantize(t, num_bits=4))
    assert verdict == {"m": {"status": "wrong", "wrong_weights": 128, "judged_at": "float16"}}


def test_marlin_rounds_groups_to_bfloat16_and_keeps_channelwise_exact():
    """Symmetric stored q = 11 (q = 3), s = 1 + 2^-7 (a bfloat16): exact 3 + 3 * 2^-7 is no bfloat16, grouped Marlin
    holds 3 + 2^-5 (tie to even); channelwise scales act on the float32 accumulator, so the weight stays exact."""
    s = 1 + 2.0 ** -7
    grouped, channel = _tensors(11, None, s, 128, 64, 128), _tensors(11, None, s, 128, 64, -1)
    got_g = READERS["vllm_wna16_marlin"].decode(grouped, _layer(n=64, act="bfloat16"))
    got_c = READERS["vllm_wna16_marlin"].decode(channel, _layer(n=64, group_size=-1, act="bfloat16"))
    assert (got_g.values[0, 0], got_g.precision) == (3.03125, "bfloat16")
    assert (got_c.values[0, 0], got_c.precision) == (3 + 3 * 2.0 ** -7, "float32")
    reference = codec.dequantize(grouped, num_bits=4)
    assert judge_readers({"g": lambda: got_g}, reference)["g"] == {"status": "correct", "wrong_weights": 0,
                                                                 "judged_at": "bfloat16"}


@pytest.mark.parametrize(("name", "verdicts"), [
    pytest.param("w3_asym_group16", {"compressed_tensors": "correct", "compressed_tensors_0_17": "cannot read",
                                     "vllm_wna16_marlin": "cannot read",
                                     "vllm_wna16_machete": "cannot read", "vllm_wna16_exllama": "cannot read",
                                     "vllm_wna16_triton": "cannot read"}, id="w3_asym_group16"),
    pytest.param("w4_sym_group32", {"compressed_tensors": "correct", "compressed_tensors_0_17": "correct",
                                    "vllm_wna16_marlin": "correct",
                                    "vllm_wna16_machete": "cannot read", "vllm_wna16_exllama": "cannot read",
                                    "vllm_wna16_triton": "not judged"}, id="w4_sym_group32"),
    pytest.param("w8_sym_channel", {"compressed_tensors": "correct", "compressed_tensors_0_17": "correct",
                                    "vllm_wna16_marlin": "correct",
                                    "vllm_wna16_machete": "cannot read", "vllm_wna16_exllama": "cannot read",
                                    "vllm_wna16_triton": "cannot read"}, id="w8_sym_channel"),
])
def test_conformance_checkpoint_lists_every_reader(name, verdicts):
    """`qformats conformance checkpoint` on compressed-tensors' own checkpoints (bfloat16 scales): every path has a
    verdict; 3-bit reaches no vLLM kernel, bfloat16 activations no Exllama, group 32 and K 96 no Machete; 0.17.1
    reads 4 and 8 bits as 0.20.0 does (CT-2.6) and runs short on 0.20.0's 3-bit zero points."""
    readers = check_checkpoint(str(FIXTURES / name))["readers"]
    assert list(readers) == list(READERS) and all(r["verdict"] in STATUSES for r in readers.values())
    assert {reader: r["verdict"] for reader, r in readers.items()} == verdicts


# -- round_to and judge_readers on hand-worked values (QF-4.3, CT-7); found by mutation testing (mutmut) ------

@pytest.mark.parametrize("precision", ["float16", "bfloat16", "float32"])
def test_round_to_returns_float32_at_every_precision(precision):
    """QF-4.3: the rounded values come back as float32, which holds every float16 and bfloat16 value."""
    assert round_to(np.array([1.0, -2.5]), precision).dtype == np.float32


def test_round_to_bfloat16_rounds_subnormals_to_multiples_of_two_to_the_minus_133():
    """bfloat16's subnormal spacing is 2^-133 (7 fraction bits below 2^-126): 2^-134 and 3 * 2^-134 are ties,
    rounded to even: 0 and 2^-132."""
    got = round_to(np.array([2.0 ** -134, 3 * 2.0 ** -134]), "bfloat16")
    np.testing.assert_array_equal(got, np.array([0.0, 2.0 ** -132], np.float32))


def test_round_to_bfloat16_rounds_a_float16_input_once():
    """float16 65504 = 2^16 - 32 is 32 from bfloat16's 65536 and 224 from 65280: 65536, which float16 itself
    cannot hold (the value is not rounded through float16 again)."""
    assert round_to(np.array([65504], np.float16), "bfloat16").tolist() == [65536.0]


def test_round_to_float16_overflows_to_infinity_without_a_warning():
    """70000 is past float16's largest finite value (65504; the rounding bound 65520): inf, as the path holds it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = round_to(np.array([70000.0, -70000.0]), "float16")
    assert got.tolist() == [np.inf, -np.inf]


def test_judge_readers_reports_a_not_emulated_path_and_judges_the_rest():
    def unemulated():
        raise NotEmulated("values not emulated (Triton W4A16)")

    reference = np.array([[1.0, 2.0]], np.float32)
    verdict = judge_readers({"triton": unemulated, "exact": lambda: ReaderValues(reference.copy())}, reference)
    assert verdict == {"triton": {"status": "not judged", "detail": "values not emulated (Triton W4A16)"},
                       "exact": {"status": "correct", "wrong_weights": 0, "judged_at": "float32"}}


def test_judge_readers_cannot_read_names_the_constraint_when_the_actual_is_no_phrase():
    """A refusal whose ``actual`` is a value, not the path's phrase: the detail is the constraint it broke."""
    def refuses():
        raise fail("argument.invalid", "group_size", "a multiple of 32", 48)

    assert judge_readers({"cuda": refuses}, np.zeros((1, 1), np.float32)) == \
        {"cuda": {"status": "cannot read", "detail": "a multiple of 32"}}


def test_judge_readers_cannot_read_falls_back_to_the_message_without_a_constraint():
    err = QFormatsError("argument.invalid", "layer refused", actual=48)

    def refuses():
        raise err

    assert judge_readers({"cuda": refuses}, np.zeros((1, 1), np.float32)) == \
        {"cuda": {"status": "cannot read", "detail": str(err)}}
