"""KC-7.5: the ggml block types (q4_K, q5_K, q6_K, q8_0) on aligned planes (reference_kernels/_superblock.py)
against the NumPy reference codecs, in Triton's interpreter: every scale class of the GGUF cases, every candidate
plan the GPU tuner may pick (split-K GEMV with per-step and reduce-once sums, split-K batch on tensor cores),
several K slices, output rows that no column tile divides, a masked last K step (q8_0).

Spec sentences checked: GGML-2.2 "bit-identical to ggml's dequantize_row_*" (dequantize, float16 rounded once);
QF-4.6 "products and sums are evaluated in float32 in any order (split-K, atomics, FMA and tensor-core dot
products included), and the result is rounded once to the output dtype"; KC-7.4 "a result is the same bits on
every run".
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.q4_k")   # before triton: it selects the interpreter without a GPU

from conformance import compare  # noqa: E402
from qformats.formats import ggml, q4_k  # noqa: E402
from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks  # noqa: E402
from qformats.formats.q4_k.codec import pack_scales, unpack_scales  # noqa: E402
from reference_kernels import _splitk, _superblock  # noqa: E402
from reference_kernels import q4_k as kq4k  # noqa: E402
from reference_kernels import q5_k as kq5k  # noqa: E402
from reference_kernels import q6_k as kq6k  # noqa: E402
from reference_kernels import q8_0 as kq80  # noqa: E402

KERNELS = {"q4_k": kq4k, "q5_k": kq5k, "q6_k": kq6k, "q8_0": kq80}
# 40 output rows: no column tile (32, 64, 128) divides them. K: two super-blocks; q8_0 nine 32-weight blocks,
# so every K step of 64, 128 or 256 rows ends in a masked one.
LENGTH = {"q4_k": 512, "q5_k": 512, "q6_k": 512, "q8_0": 288}
ROWS = 40
ZERO_SC = "zero_scale_codes"                    # q4_K's own scale class (qformats.formats.q4_k.cases), q5_K's too


def _layer(fmt: str, scale_class: str = "random_bits", rows: int = ROWS, seed: int = 0):
    """Random blocks of one GGUF scale class (qformats.formats.ggml.cases, and q4_K's ``zero_scale_codes``),
    and their float32 reference W."""
    n, rng = LENGTH[fmt], np.random.default_rng(seed)
    blocks = random_blocks(ggml.TYPES[fmt], rng, rows, n, "random_bits" if scale_class == ZERO_SC else scale_class)
    if scale_class == ZERO_SC:                  # Q4K-5.5: sub-blocks 0 and 5 scaled by 0, their codes random
        b = blocks.reshape(-1, ggml.TYPES[fmt].type_size)
        sc = rng.integers(1, 64, (b.shape[0], 8))
        sc[:, [0, 5]] = 0
        b[:, 4:16] = pack_scales(sc, rng.integers(0, 64, (b.shape[0], 8)))
    with np.errstate(invalid="ignore", over="ignore"):
        ref = q4_k.dequantize(blocks) if fmt == "q4_k" else ggml.dequantize(fmt, blocks)
    return KERNELS[fmt].prepare(blocks=blocks, rows=rows, n=n), ref


def _x(batch: int, k: int, seed: int = 1, scale: float = 1.0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).uniform(-scale, scale, (batch, k)).astype(np.float16))


def _judge(y: torch.Tensor, x: torch.Tensor, ref: np.ndarray) -> compare.Judgement:
    """QF-4.6 where W is finite; where the reference holds inf/NaN (non-conforming scales, GGML-3.1), the
    non-finite pattern of the float64 product, as the conformance runner judges those cases."""
    if np.isfinite(ref).all():
        return compare.within_bound(y.numpy(), "float16", x.numpy(), ref, w_rounding=True)
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.numpy().astype(np.float64) @ ref.astype(np.float64).T
    return compare.nonfinite_pattern(y.numpy(), want)


CLASSES = [(fmt, c) for fmt in KERNELS for c in SCALE_CLASSES] + [("q4_k", ZERO_SC), ("q5_k", ZERO_SC)]


@pytest.mark.parametrize(("fmt", "scale_class"), CLASSES, ids=[f"{f}-{c}" for f, c in CLASSES])
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")   # the interpreter's float16 inf
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")      # its NaN products
def test_planes_decode_every_scale_class_bit_for_bit(fmt, scale_class):
    """GGML-2.2: dequantize from the planes is ggml's float32 value rounded once to float16, bit for bit (-0.0
    and the inf of |W| past 65504 included; NaN where ggml's is NaN); the GEMV and batch 16 on the same planes
    are within QF-4.6 (the non-finite pattern of the product for non-finite scales)."""
    p, ref = _layer(fmt, scale_class, rows=3)
    got = KERNELS[fmt].dequantize_prepared(p).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref.astype(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    x_scale = 2.0 ** -12 if scale_class == "max" else 1.0      # y itself within float16 for the max class
    for batch in (1, 16):
        x = _x(batch, p.n, scale=x_scale)
        judgement = _judge(KERNELS[fmt].matmul_prepared(p, x), x, ref)
        assert judgement.ok, (batch, judgement.detail)


def _forced(fmt: str, attr: str, candidate: tuple):
    """A 40-row layer with its ``attr`` plan forced to ``candidate`` as the tuner would make it on 8 SMs."""
    p, ref = _layer(fmt)
    plan = _splitk.make_plan(candidate, p.planes.k, p.planes.n, p.planes.block_k, sms=8)
    setattr(p.planes, attr, plan)
    return p, ref, plan


GEMV = [(fmt, c) for fmt in KERNELS for c in _superblock.GEMV_CANDIDATES]


@pytest.mark.parametrize(("fmt", "candidate"), GEMV, ids=[f"{f}-{c}" for f, c in GEMV])
def test_every_gemv_plan_is_within_the_bound_and_reproducible(fmt, candidate):
    """QF-4.6 for each GEMV candidate with K split into slices; KC-7.4: slices added in a fixed order, so two
    calls give the same bits."""
    p, ref, plan = _forced(fmt, "gemv", candidate)
    assert plan.split > 1
    x = _x(1, p.n, seed=3)
    y = KERNELS[fmt].matmul_prepared(p, x)
    judgement = compare.within_bound(y.numpy(), "float16", x.numpy(), ref, w_rounding=True)
    assert judgement.ok, judgement.detail
    assert torch.equal(y, KERNELS[fmt].matmul_prepared(p, x))


BATCH = [(fmt, c) for fmt in KERNELS for c in _superblock.BATCH_CANDIDATES]


@pytest.mark.parametrize(("fmt", "candidate"), BATCH, ids=[f"{f}-{c}" for f, c in BATCH])
def test_every_batch_plan_is_within_the_bound_and_reproducible(fmt, candidate):
    """QF-4.6 for each batch candidate (W rounded once to float16 on tensor cores) at batch 5 and 16, K split
    into slices; the same bits on a second call (KC-7.4)."""
    p, ref, plan = _forced(fmt, "batch", candidate)
    assert plan.split > 1 and p.planes.fp16_safe
    for batch in (5, 16):
        x = _x(batch, p.n, seed=batch)
        y = KERNELS[fmt].matmul_prepared(p, x)
        judgement = compare.within_bound(y.numpy(), "float16", x.numpy(), ref, w_rounding=True)
        assert judgement.ok, (batch, judgement.detail)
    assert torch.equal(y, KERNELS[fmt].matmul_prepared(p, x))


@pytest.mark.parametrize("fmt", list(KERNELS))
def test_the_chosen_plans_serve_batches_1_5_16_and_20(fmt):
    """QF-4.6 at batch 1 (split-K GEMV), 5 and 16 (split-K batch) and 20 (one slice, tiles of 64) with the plans
    prepare chose (the interpreter's: whole super-block steps, one program per SM), two slices at batch 1."""
    p, ref = _layer(fmt, seed=7)
    assert p.planes.gemv.split > 1
    for batch in (1, 5, 16, 20):
        x = _x(batch, p.n, seed=batch)
        judgement = compare.within_bound(KERNELS[fmt].matmul_prepared(p, x).numpy(), "float16", x.numpy(), ref,
                                         w_rounding=True)
        assert judgement.ok, (batch, judgement.detail)


@pytest.mark.parametrize("fmt", list(KERNELS))
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")   # the interpreter's float16 inf
def test_w_past_float16_keeps_float32_operands_on_the_planes(fmt):
    """QF-4.6: with a super-scale of 65504, |W| passes float16's range, so prepare marks the layer not
    float16-safe (the same bound the format module computed before the planes) and batch 16 multiplies
    float32 operands; x small enough that y fits float16."""
    p, ref = _layer(fmt, "max", rows=3)
    assert np.abs(ref).max() > 65504 and not p.fp16_safe and not p.planes.fp16_safe
    x = _x(16, p.n, scale=2.0 ** -12)
    judgement = compare.within_bound(KERNELS[fmt].matmul_prepared(p, x).numpy(), "float16", x.numpy(), ref,
                                     w_rounding=True)
    assert judgement.ok, judgement.detail


@pytest.mark.parametrize("fmt", list(KERNELS))
def test_a_layer_of_no_rows_launches_nothing(fmt):
    """GGML-1.1: ``(rows, n / block_size * type_size)`` holds for rows = 0 (the kernels accepted it before the
    planes); the planes are empty and the calls return empty outputs."""
    p = KERNELS[fmt].prepare(blocks=np.zeros((0, LENGTH[fmt] // ggml.TYPES[fmt].block_size *
                                                ggml.TYPES[fmt].type_size), np.uint8), rows=0, n=LENGTH[fmt])
    assert tuple(KERNELS[fmt].dequantize_prepared(p).shape) == (0, LENGTH[fmt])
    assert tuple(KERNELS[fmt].matmul_prepared(p, _x(3, LENGTH[fmt])).shape) == (3, 0)


def test_q4k_scale_planes_hold_the_codec_s_six_bit_unpacking():
    """Q4K-1.4: the sub-block scale and min planes made at prepare are the q4_K codec's 6-bit unpacking of the
    12 scale bytes (qformats.formats.q4_k.layout.unpack_scales), one byte per sub-block."""
    blocks = random_blocks(ggml.TYPES["q4_k"], np.random.default_rng(11), 2, 512)
    p = kq4k.prepare(blocks=blocks, rows=2, n=512)
    sc, m = unpack_scales(blocks.reshape(4, 144)[:, 4:16])
    assert np.array_equal(p.planes.arrays[1].numpy().T.reshape(4, 8), sc)
    assert np.array_equal(p.planes.arrays[2].numpy().T.reshape(4, 8), m)


def test_plans_split_k_into_whole_super_block_steps():
    """11008 output rows, K = 4096: the first GEMV candidate (BN 64, BK 128, 8 programs per SM) on 132 SMs gives
    172 column tiles and 7 slices of 640 rows; a step never straddles a 256-weight super-block."""
    plan = _splitk.make_plan(_superblock.GEMV_CANDIDATES[0], 4096, 11008, _superblock.STEP_CAP, sms=132)
    assert (plan.bk, plan.split, plan.k_per_split) == (128, 7, 640) and 256 % plan.bk == 0
