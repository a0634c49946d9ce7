"""AWQ-7: the emulated real reader paths (AutoAWQ, vLLM 0.33.0's Marlin, Machete, CUDA and Triton paths).

Refusals are asserted at each limit and one past it, in the tool's own words; values on hand-worked layers
where a path's float16 arithmetic differs from the exact reference; and the table of
``qformats conformance checkpoint`` on the AutoAWQ fixture."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conformance.checkpoint import STATUSES, check_checkpoint
from qformats import QFormatsError
from qformats.formats import awq
from qformats.formats.awq.codec import checked_tensors
from qformats.formats.awq.layers import READERS
from qformats.layers import judge_readers

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures/third_party/autoawq/checkpoints/gemm_w4_g32"
S = 1 + 2.0 ** -10          # a float16 scale with its last significand bit set


@pytest.mark.parametrize(("reader", "k", "n", "gs", "phrase"), [
    pytest.param("vllm_awq_marlin", 128, 64, 128, None, id="marlin-gs128"),
    pytest.param("vllm_awq_marlin", 256, 64, 256, "Marlin does not support group_size = 256. Only group_sizes = "
                 "[-1, 32, 64, 128] are supported.", id="marlin-gs256"),
    pytest.param("vllm_awq_machete", 64, 128, 64, None, id="machete-at-limits"),
    pytest.param("vllm_awq_machete", 64, 128, 32, "Group size (32) not supported by Machete, supported group "
                 "sizes are: [-1, 64, 128]", id="machete-gs32"),
    pytest.param("vllm_awq_machete", 128, 128, 128, None, id="machete-k128"),
    pytest.param("vllm_awq_machete", 96, 128, -1, "Input features size must be divisible by 64 (in_features = 96)",
                 id="machete-k96"),
    pytest.param("vllm_awq_machete", 64, 136, 64, "Output features size must be divisible by 128 "
                 "(out_features = 136)", id="machete-n136"),
    pytest.param("vllm_awq_cuda", 64, 64, 32, None, id="cuda-at-limits"),
    pytest.param("vllm_awq_cuda", 64, 72, 32, "OC is not multiple of cta_N = 64 (OC = 72)", id="cuda-n72"),
    pytest.param("vllm_awq_cuda", 64, 64, 16, "Group size should be a multiple of 32 (group size = 16)",
                 id="cuda-gs16"),
    pytest.param("vllm_awq_cuda", 64, 64, -1, None, id="cuda-channelwise-k-divides-n"),
    pytest.param("vllm_awq_cuda", 128, 64, -1, "OC is not multiple of Group size (OC = 64, group size = 128)",
                 id="cuda-channelwise-k-exceeds-n"),
    pytest.param("vllm_awq_triton", 512, 64, 128, None, id="triton-gs128"),
    pytest.param("vllm_awq_triton", 512, 64, 256, "group_size in AWQ_TRITON_SUPPORTED_GROUP_SIZES [-1, 32, 64, 128] "
                 "or group_size == K fails (group_size = 256, K = 512)", id="triton-gs256"),
    pytest.param("vllm_awq_triton", 256, 64, 256, None, id="triton-gs-equals-k"),
    pytest.param("autoawq_gemm", 64, 8, 16, None, id="autoawq-reads-every-layout"),
])
def test_reader_refusal(reader, k, n, gs, phrase):
    """Each path refuses exactly what its source refuses, in its words, with the actual value (AWQ-7)."""
    assert READERS[reader].why_not(k, n, gs) == phrase


def _layer(codes: np.ndarray, zero: int, gs: int) -> dict[str, np.ndarray]:
    k, n = codes.shape
    g = 1 if gs == -1 else k // gs
    layer = awq.pack(codes, np.full((g, n), zero), np.full((g, n), S, np.float16), group_size=gs)
    return checked_tensors(layer, gs)[1]


def test_machete_zero_folding_rounds_three_times():
    """Machete: q = 1, z = 3, s = 1 + 2^-10. Exact -2 - 2^-9 is a float16. Machete adds float16(q s) = 1 + 2^-10
    and float16(-z s) = -(3 + 1.5 * 2^-9) -> -3 - 2^-8 (tie to even), and rounds -2 - 1.5 * 2^-9 to -2 - 2^-8."""
    codes = np.full((64, 128), 3)
    codes[0] = 1                                            # row 0: q - z = -2; every other weight is 0
    t = _layer(codes, 3, 64)
    got = READERS["vllm_awq_machete"].decode(t, 64)
    assert got.precision == "float16"
    assert set(got.values[:, 0]) == {-2.00390625} and not got.values[:, 1:].any()
    verdict = judge_readers({"vllm_awq_machete": lambda: got}, awq.dequantize(t, group_size=64))
    assert verdict == {"vllm_awq_machete": {"status": "wrong", "wrong_weights": 128, "judged_at": "float16"}}


def test_float16_paths_round_once_and_are_judged_at_float16():
    """(q - z) * s with q = 15, z = 0: exact 15 + 15 * 2^-10 is no float16; the CUDA path holds 15 + 2^-6 (the
    nearest), which is correct at its precision; Marlin channelwise keeps the exact weight (float32)."""
    t = _layer(np.full((64, 64), 15), 0, -1)
    reference = awq.dequantize(t, group_size=-1)
    assert reference[0, 0] == np.float32(15 + 15 * 2.0 ** -10)
    cuda, marlin = READERS["vllm_awq_cuda"].decode(t, -1), READERS["vllm_awq_marlin"].decode(t, -1)
    assert cuda.values[0, 0] == 15.015625 and marlin.values[0, 0] == 15 + 15 * 2.0 ** -10
    verdict = judge_readers({"cuda": lambda: cuda, "marlin": lambda: marlin}, reference)
    assert verdict == {"cuda": {"status": "correct", "wrong_weights": 0, "judged_at": "float16"},
                       "marlin": {"status": "correct", "wrong_weights": 0, "judged_at": "float32"}}


def test_refused_layer_is_cannot_read_with_the_phrase():
    """A refusing path is 'cannot read' with its phrase, and decode raises argument.invalid naming it."""
    t = _layer(np.zeros((64, 64), int), 0, 32)
    with pytest.raises(QFormatsError) as err:
        READERS["vllm_awq_machete"].decode(t, 32)
    assert (err.value.code, err.value.tensor) == ("argument.invalid", "layer")
    assert err.value.actual == "Group size (32) not supported by Machete, supported group sizes are: [-1, 64, 128]"


def test_conformance_checkpoint_lists_every_reader_on_the_autoawq_fixture():
    """`qformats conformance checkpoint` on AutoAWQ's checkpoint (K 64/128, N 64/128, group 32): every path has a
    verdict; Machete refuses group 32, the float16 paths give the reference rounded once."""
    readers = check_checkpoint(str(FIXTURE))["readers"]
    assert list(readers) == list(READERS) and all(r["verdict"] in STATUSES for r in readers.values())
    assert {name: r["verdict"] for name, r in readers.items()} == {
        "autoawq_gemm": "correct", "vllm_awq_marlin": "correct", "vllm_awq_machete": "cannot read",
        "vllm_awq_cuda": "correct", "vllm_awq_triton": "correct"}
    assert readers["vllm_awq_machete"]["unreadable_because"].startswith("Group size (32) not supported by Machete")
