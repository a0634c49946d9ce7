"""KC-7.4: the shared int4 planes of GPTQ, AWQ and compressed-tensors (reference_kernels/_int4.py) against the
NumPy reference codecs, in Triton's interpreter: every candidate plan the GPU tuner may pick (per-step sums and
reduce-once GEMV, split-K batch on tensor cores), ragged columns, act-order, widths 2/4/8, v1 zeros.

Spec sentence checked (QF-4.6): "products and sums are evaluated in float32 in any order (split-K, atomics, FMA
and tensor-core dot products included), and the result is rounded once to the output dtype".
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.gptq")   # before triton: it selects the interpreter without a GPU

from conformance import compare  # noqa: E402
from qformats.formats import awq, ctensors, gptq  # noqa: E402
from reference_kernels import _int4  # noqa: E402
from reference_kernels import awq as kawq  # noqa: E402
from reference_kernels import ctensors as kct  # noqa: E402
from reference_kernels import gptq as kgptq  # noqa: E402


def _gptq(n, k, gs, bits=4, act=False, version="v2", sym=False, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    layer = gptq.quantize(w, bits=bits, group_size=gs, sym=sym, version="v2",
                          act_order=rng.random(k) if act else None)
    if version == "v1":
        layer = gptq.convert(layer, bits=bits, to="v1", group_size=gs)
    t = {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales", "g_idx")}
    return t, gptq.dequantize(t, bits=bits, version=version, group_size=gs)


def _check_matmul(p, ref, kernels, batches=(1, 5, 16, 20), seed=1, x_range=1.0):
    rng = np.random.default_rng(seed)
    for batch in batches:
        x = torch.from_numpy(rng.uniform(-x_range, x_range, (batch, ref.shape[1])).astype(np.float16))
        y = kernels.matmul_prepared(p, x).numpy()
        verdict = compare.within_bound(y, "float16", x.numpy(), ref, w_rounding=True)
        assert verdict.ok, (batch, verdict.detail)


CANDIDATES = [*_int4.GEMV_CANDIDATES]


@pytest.mark.parametrize("candidate", CANDIDATES, ids=[repr(c) for c in CANDIDATES])
def test_every_gemv_plan_is_within_the_bound_and_reproducible(candidate):
    """Each GEMV candidate at a ragged N (40 columns: no BN divides it) with act-order, K split into slices."""
    t, ref = _gptq(40, 512, 64, act=True)
    p = kgptq.prepare(**t, bits=4, group_size=64, version="v2")
    p.planes.gemv = _int4.make_plan(candidate, p.k, p.n, p.planes.block_k, sms=8)
    assert p.planes.gemv.split > 1
    x = torch.from_numpy(np.random.default_rng(3).uniform(-1, 1, (1, 512)).astype(np.float16))
    y = kgptq.matmul_prepared(p, x)
    assert compare.within_bound(y.numpy(), "float16", x.numpy(), ref, w_rounding=True).ok
    assert torch.equal(y, kgptq.matmul_prepared(p, x))        # slices added in a fixed order: the same bits


@pytest.mark.parametrize("candidate", _int4.BATCH_CANDIDATES, ids=[repr(c) for c in _int4.BATCH_CANDIDATES])
def test_every_batch_plan_is_within_the_bound(candidate):
    t, ref = _gptq(40, 256, 128)
    p = kgptq.prepare(**t, bits=4, group_size=128, version="v2")
    p.planes.batch = _int4.make_plan(candidate, p.k, p.n, p.planes.block_k, sms=8)
    _check_matmul(p, ref, kgptq, batches=(2, 16))


@pytest.mark.parametrize(("bits", "gs", "act", "version"),
                         [(4, 128, False, "v2"), (4, 32, True, "v1"), (2, 64, False, "v2"), (8, 32, True, "v2"),
                          (4, -1, False, "v1")])
def test_gptq_layers_on_the_planes_decode_bit_for_bit(bits, gs, act, version):
    t, ref = _gptq(48, 256, gs, bits=bits, act=act, version=version)
    p = kgptq.prepare(**t, bits=bits, group_size=gs, version=version)
    assert p.planes is not None and (p.planes.perm is not None) == act
    assert np.array_equal(kgptq.dequantize_prepared(p).numpy(), ref.astype(np.float16))
    _check_matmul(p, ref, kgptq)


@pytest.mark.parametrize(("bits", "gs"), [(3, 32), (4, 40)], ids=["3-bit", "group_40"])
def test_layers_the_planes_cannot_hold_keep_their_format_kernel(bits, gs):
    """3-bit fields straddle words; a group of 40 rows has no 16..128 row tile: both stay on gptq.py's kernels."""
    t, ref = _gptq(32, 160 if gs == 40 else 128, gs, bits=bits)
    p = kgptq.prepare(**t, bits=bits, group_size=gs, version="v2")
    assert p.planes is None
    assert np.array_equal(kgptq.dequantize_prepared(p).numpy(), ref.astype(np.float16))


def test_awq_repacked_to_the_planes_is_the_reference_bit_for_bit():
    """AWQ-2.3's output-axis order 0 2 4 6 1 3 5 7 undone at prepare: float32 W equal to the codec's."""
    layer = gptq.quantize(np.random.default_rng(5).normal(0, 1, (40, 256)).astype(np.float32), bits=4,
                          group_size=64, sym=False, version="v2")
    a = {k: np.array(v) for k, v in awq.from_gptq(layer, bits=4, version="v2", group_size=64).tensors.items()}
    ref = awq.dequantize(a, group_size=64)
    p = kawq.prepare(**a, group_size=64)
    assert p.planes is not None
    assert np.array_equal(kawq.dequantize_prepared(p).numpy(), ref)
    _check_matmul(p, ref, kawq)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("zero_point", [True, False], ids=["asym", "sym"])
def test_ctensors_transposed_to_the_planes_is_the_reference_bit_for_bit(bits, zero_point):
    layer = gptq.quantize(np.random.default_rng(bits).normal(0, 1, (48, 256)).astype(np.float32), bits=bits,
                          group_size=64, sym=not zero_point, version="v2")
    c = {k: np.array(v) for k, v in ctensors.from_gptq(layer, bits=bits, version="v2", group_size=64).tensors.items()}
    assert ("weight_zero_point" in c) == zero_point
    ref = ctensors.dequantize(c, num_bits=bits, group_size=64)
    p = kct.prepare(**c, num_bits=bits, group_size=64)
    assert p.planes is not None
    assert np.array_equal(kct.dequantize_prepared(p).numpy(), ref)
    _check_matmul(p, ref, kct)


def test_w_past_float16_multiplies_float32_operands_on_the_planes():
    """max|s| * 15 one float16 step past 65504 (4368 * 15 = 65520 rounds to inf): the batch kernel keeps W in
    float32 (QF-4.6) instead of overflowing it; x small enough that y itself fits float16."""
    t, _ = _gptq(32, 128, 128)
    t["scales"] = np.full_like(t["scales"], 4368.0)
    t["qzeros"] = np.zeros_like(t["qzeros"])              # v2 zero point 0: q = 15 gives W = 65520
    ref = gptq.dequantize(t, bits=4, version="v2", group_size=128)
    assert np.abs(ref).max() >= 65520                      # some W really is past float16
    p = kgptq.prepare(**t, bits=4, group_size=128, version="v2")
    assert not p.planes.fp16_safe
    _check_matmul(p, ref, kgptq, batches=(16,), x_range=1 / 256)


def test_pack_along_k_inverts_unpack():
    codes = torch.from_numpy(np.random.default_rng(0).integers(0, 16, (64, 24)))
    assert torch.equal(_int4.unpack_along_k(_int4.pack_along_k(codes, 4), 4), codes)


def test_plans_split_k_into_whole_group_aligned_steps():
    """4096 rows, row tile 128, 172 column tiles of 64 on 132 SMs at 8 programs each: 7 slices of 640 rows."""
    plan = _int4.make_plan((64, 128, 8, 4, 3), 4096, 11008, 128, sms=132)
    assert (plan.bk, plan.split, plan.k_per_split) == (128, 7, 640)
