"""reference_kernels.awq and reference_kernels.ctensors against the NumPy reference (TRITON_INTERPRET=1 on the CPU).

Every entry point passes its whole conformance matrix (the runner, as any subject). Hypothesis properties
cover layouts beyond the matrix: dequantize is the reference's float32 bit for bit (AWQ-3.1, CT-3.1),
matmul stays within the QF-4.6 bound; each load-time check rejects with its exact error (KC-4.2).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.awq")   # before triton: it selects the interpreter without a GPU

from conformance import compare, run_kernel  # noqa: E402
from conformance.subject import SubjectDeclaration  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats import awq, ctensors  # noqa: E402
from reference_kernels import awq as kawq  # noqa: E402
from reference_kernels import ctensors as kct  # noqa: E402

ENTRIES = [
    ("reference_kernels.awq:dequantize", "awq_gemm", "dequantize"),
    ("reference_kernels.awq:matmul", "awq_gemm", "matmul"),
    ("reference_kernels.ctensors:dequantize", "ctensors_pack", "dequantize"),
    ("reference_kernels.ctensors:matmul", "ctensors_pack", "matmul"),
]


@pytest.mark.parametrize(("entry", "fmt", "op"), ENTRIES, ids=[e[0].split(".")[1] for e in ENTRIES])
def test_kernel_passes_its_whole_matrix(entry, fmt, op, public_cases):
    """AWQ-8.2, CT-8.2: the conformance runner passes both kernels on every case of their format, claiming
    the validating level (KC-4.2): every non-conforming case rejected, no clause unenforced."""
    result = run_kernel(entry, fmt=fmt, op=op, jobs=1, timeout=300, declaration=SubjectDeclaration(level="validating"),
                        pattern=public_cases(fmt, op))
    bad = [(c.id, c.status, c.detail[:200]) for c in result.cases if c.status != "pass"]
    assert not bad and result.cases, bad[:3]
    level = result.level()
    assert (level["reached"], level["unenforced"]) == ("validating", []) and level["validation_cases"] > 2


def _bitwise_equal(got: np.ndarray, ref: np.ndarray) -> bool:
    """Same dtype, shape and bits: the sign of zero counts (KC-2.4)."""
    return got.dtype == ref.dtype == np.float32 and got.shape == ref.shape and \
        np.array_equal(got.view(np.uint32), ref.view(np.uint32))


# -- AWQ GEMM ------------------------------------------------------------------------------------------

# (K, group size): vLLM's -1, 32, 64, 128 (AWQ-7), and 24, which no row tile divides (the per-row gather)
AWQ_LAYOUTS = [(64, -1), (64, 32), (128, 64), (256, 128), (72, 24)]


@st.composite
def awq_layers(draw):
    """A packed AWQ layer with random codes, zero points and signed float16 scales of any magnitude;
    ``big`` puts one scale past 65504 / 15, where W no longer fits float16 (the matmul's float32 path)."""
    k, gs = draw(st.sampled_from(AWQ_LAYOUTS))
    n = draw(st.sampled_from([8, 40, 72]))
    big = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    g = 1 if gs == -1 else k // gs
    scales = rng.choice([-1.0, 1.0], (g, n)) * 2.0 ** rng.uniform(-24, 8, (g, n))
    if big:
        scales[0, 0] = 8192.0
    layer = awq.pack(rng.integers(0, 16, (k, n)), rng.integers(0, 16, (g, n)), scales.astype(np.float16),
                     group_size=gs)
    t = {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales")}
    return t, gs, big, rng


@settings(max_examples=12, deadline=None)
@given(awq_layers())
def test_awq_dequantize_is_the_reference_bit_for_bit(layer):
    """AWQ-3.1: float32 s * (q - z), every column's field order and group layout."""
    t, gs, _, _ = layer
    assert _bitwise_equal(kawq.dequantize(**t, group_size=gs), awq.dequantize(t, group_size=gs))


@settings(max_examples=10, deadline=None)
@given(awq_layers(), st.sampled_from([1, 3, 17]))
def test_awq_matmul_is_within_the_forward_error_bound(layer, batch):
    """QF-4.6 for the GEMV (batch 1) and both tile heights (16, 64)."""
    t, gs, big, rng = layer
    w = awq.dequantize(t, group_size=gs)
    x = (rng.uniform(-1, 1, (batch, w.shape[1])) * (2.0 ** -12 if big else 1.0)).astype(np.float16)
    y = kawq.matmul(**t, group_size=gs, x=x)
    assert y.dtype == np.float16 and compare.within_bound(y, "float16", x, w, w_rounding=True).ok


@pytest.mark.parametrize("scale", [4364.0, 4368.0], ids=["fp16_w_at_limit", "fp16_w_one_step_past"])
def test_awq_matmul_keeps_w_finite_at_the_float16_limit(scale):
    """W = 15 s: 4364 * 15 = 65460 still fits float16 (tensor-core path); 4368, the next float16, gives
    65520, which rounds to inf, so the kernel must multiply float32 operands instead (QF-4.6)."""
    layer = awq.pack(np.full((32, 64), 15), np.zeros((1, 64), int), np.full((1, 64), scale, np.float16),
                     group_size=-1)
    t = {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales")}
    x = np.full((2, 32), 2.0 ** -10, np.float16)
    y = kawq.matmul(**t, group_size=-1, x=x)
    assert np.all(np.isfinite(y))
    assert compare.within_bound(y, "float16", x, awq.dequantize(t, group_size=-1), w_rounding=True).ok


def _awq_layer(k=64, n=16, group_size=32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    g = 1 if group_size == -1 else k // group_size
    layer = awq.pack(rng.integers(0, 16, (k, n)), rng.integers(0, 16, (g, n)),
                     rng.uniform(0.01, 1.0, (g, n)).astype(np.float16), group_size=group_size)
    return {name: np.array(layer.tensors[name]) for name in ("qweight", "qzeros", "scales")}


def _awq_with(**changes):
    return _awq_layer() | changes


def _nan_scale():
    t = _awq_layer()
    t["scales"][1, 5] = np.nan
    return t


AWQ_REJECTIONS = {     # id: (tensors, group_size, (code, tensor, actual))
    "group_size_zero": (_awq_layer(), 0, ("argument.invalid", "group_size", 0)),
    "group_size_bool": (_awq_layer(), True, ("argument.invalid", "group_size", True)),
    "group_size_k_plus_1": (_awq_layer(), 65, ("awq.group.shape", "group_size", 65)),
    "group_size_disagrees_with_scales": (_awq_layer(), 16, ("tensor.shape", "scales", (2, 16))),
    "qweight_int64": (_awq_with(qweight=_awq_layer()["qweight"].astype(np.int64)), 32,
                      ("tensor.dtype", "qweight", "int64")),
    "qweight_missing": (_awq_with(qweight=None), 32, ("tensor.missing", "qweight", "absent")),
    "scales_float32": (_awq_with(scales=_awq_layer()["scales"].astype(np.float32)), 32,
                       ("tensor.dtype", "scales", "float32")),
    "qzeros_one_row_short": (_awq_with(qzeros=_awq_layer()["qzeros"][:1]), 32, ("tensor.shape", "qzeros", (1, 2))),
    "scales_nan": (_nan_scale(), 32, ("awq.scales.nonfinite", "scales", "NaN at [1, 5]")),
}


@pytest.mark.parametrize("op", ["dequantize", "matmul"])
@pytest.mark.parametrize("case", list(AWQ_REJECTIONS))
def test_awq_kernel_rejects_before_launch(case, op):
    """KC-4.2: AWQ-2.1, AWQ-2.2, AWQ-3.3 and the group_size keyword (KC-1.8), the reference's error exactly."""
    t, gs, want = AWQ_REJECTIONS[case]
    extra = {"x": np.zeros((1, 64), np.float16)} if op == "matmul" else {}
    with pytest.raises(QFormatsError) as exc:
        getattr(kawq, op)(**t, group_size=gs, **extra)
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == want


def test_awq_group_size_k_is_one_group():
    """The limit of AWQ-2.2: gs = K divides K (one group), decoded like gs = -1."""
    t = _awq_layer(group_size=-1)
    assert _bitwise_equal(kawq.dequantize(**t, group_size=64), awq.dequantize(t, group_size=-1))


def test_awq_matmul_rejects_x_of_another_width():
    with pytest.raises(QFormatsError) as exc:
        kawq.matmul(**_awq_layer(), group_size=32, x=np.zeros((2, 63), np.float16))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("tensor.shape", "x", (2, 63))


# -- compressed-tensors pack-quantized -----------------------------------------------------------------

# (K, group size): -1 is the channel strategy. 37 and 100 straddle words at every width but 1, 2, 4, 8
# (CT-2.3); 80 at odd widths leaves padding bits; 24 is a group size no row tile divides.
CT_LAYOUTS = [(37, -1), (100, -1), (96, 32), (80, 16), (72, 24)]


@st.composite
def ct_layers(draw, bits):
    """A packed layer: signed codes and zero points over their whole range, float16 or float32 scales of
    any sign and magnitude; N = 5 and 33 make the zero-point streams straddle words too."""
    k, gs = draw(st.sampled_from(CT_LAYOUTS))
    n = draw(st.sampled_from([1, 5, 24, 33]))
    sym = draw(st.booleans())
    dtype = draw(st.sampled_from([np.float16, np.float32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    g = 1 if gs == -1 else k // gs
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    scales = (rng.choice([-1.0, 1.0], (n, g)) * 2.0 ** rng.uniform(-20, 6, (n, g))).astype(dtype)
    zp = None if sym else rng.integers(low, high + 1, (n, g))
    layer = ctensors.pack(rng.integers(low, high + 1, (n, k)), scales, num_bits=bits,
                          group_size=None if gs == -1 else gs, zero_points=zp)
    return {name: np.asarray(v) for name, v in layer.tensors.items()}, gs, rng


@pytest.mark.parametrize("bits", range(1, 9), ids=lambda b: f"b{b}")
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_ctensors_dequantize_is_the_reference_bit_for_bit(bits, data):
    """CT-3.1 at every width 1..8: float32 s * (q - zp), straddling values and zero points included."""
    t, gs, _ = data.draw(ct_layers(bits))
    got = kct.dequantize(**t, num_bits=bits, group_size=gs)
    assert _bitwise_equal(got, ctensors.dequantize(t, num_bits=bits))


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 8).flatmap(lambda b: st.tuples(st.just(b), ct_layers(b))), st.sampled_from([1, 3, 17]))
def test_ctensors_matmul_is_within_the_forward_error_bound(layer, batch):
    """QF-4.6 for the GEMV (batch 1) and both tile heights (16, 64)."""
    bits, (t, gs, rng) = layer
    w = ctensors.dequantize(t, num_bits=bits)
    x = rng.uniform(-1, 1, (batch, w.shape[1])).astype(np.float16)
    y = kct.matmul(**t, num_bits=bits, group_size=gs, x=x)
    assert y.dtype == np.float16 and compare.within_bound(y, "float16", x, w, w_rounding=True).ok


def test_ctensors_torch_bfloat16_scales_decode_like_their_float32_widening():
    """CT-2.1: bfloat16 scales (what most checkpoints hold) are exact in float32; torch in, torch out."""
    rng = np.random.default_rng(3)
    scales = torch.from_numpy(rng.uniform(-1, 1, (24, 3)).astype(np.float32)).bfloat16()
    layer = ctensors.pack(rng.integers(-4, 4, (24, 96)), scales.float().numpy(), num_bits=3, group_size=32,
                          zero_points=rng.integers(-4, 4, (24, 3)))
    t = {name: torch.from_numpy(np.array(v)) for name, v in layer.tensors.items()}
    got = kct.dequantize(**(t | {"weight_scale": scales}), num_bits=3, group_size=32)
    assert isinstance(got, torch.Tensor) and _bitwise_equal(got.numpy(), ctensors.dequantize(layer, num_bits=3))


def _ct_layer(bits=3, k=80, gs=16, n=5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    g = 1 if gs == -1 else k // gs
    layer = ctensors.pack(rng.integers(low, high + 1, (n, k)), rng.uniform(0.01, 1, (n, g)).astype(np.float16),
                          num_bits=bits, group_size=None if gs == -1 else gs,
                          zero_points=rng.integers(low, high + 1, (n, g)))
    return {name: np.array(v) for name, v in layer.tensors.items()}


def _ct_with(**changes):
    return _ct_layer() | changes


def _ct_nan_scale():
    t = _ct_layer()
    t["weight_scale"][4, 2] = np.inf
    return t


CT_REJECTIONS = {      # id: (tensors, num_bits, group_size, (code, tensor, actual))
    "num_bits_0": (_ct_layer(), 0, 16, ("bits.unsupported", "num_bits", 0)),
    "num_bits_9": (_ct_layer(), 9, 16, ("bits.unsupported", "num_bits", 9)),
    "num_bits_disagrees_with_words": (_ct_layer(), 4, 16, ("tensor.shape", "weight_packed", (5, 8))),
    "group_size_zero": (_ct_layer(), 3, 0, ("argument.invalid", "group_size", 0)),
    "group_size_k_plus_1": (_ct_layer(), 3, 81, ("ctensors.group.shape", "group_size", 81)),
    "group_size_disagrees_with_scales": (_ct_layer(), 3, 20, ("tensor.shape", "weight_scale", (5, 5))),
    "channel_with_group_scales": (_ct_layer(), 3, -1, ("tensor.shape", "weight_scale", (5, 5))),
    "group_size_none": (_ct_layer(), 3, None, ("argument.invalid", "group_size", None)),
    "packed_one_word_long": (_ct_with(weight_packed=np.zeros((5, 9), np.int32)), 3, 16,
                             ("tensor.shape", "weight_packed", (5, 9))),
    "packed_missing": (_ct_with(weight_packed=None), 3, 16, ("tensor.missing", "weight_packed", "absent")),
    "scale_float64": (_ct_with(weight_scale=_ct_layer()["weight_scale"].astype(np.float64)), 3, 16,
                      ("tensor.dtype", "weight_scale", "float64")),
    "scale_inf": (_ct_nan_scale(), 3, 16, ("ctensors.scales.nonfinite", "weight_scale", "inf at [4, 2]")),
    "shape_zero_rows": (_ct_with(weight_shape=np.array([0, 80], np.int64)), 3, 16,
                        ("tensor.shape", "weight_shape", [0, 80])),
    "zero_point_one_column_short": (_ct_with(weight_zero_point=_ct_layer()["weight_zero_point"][:, :4]), 3, 16,
                                    ("tensor.shape", "weight_zero_point", (1, 4))),
}


@pytest.mark.parametrize("op", ["dequantize", "matmul"])
@pytest.mark.parametrize("case", list(CT_REJECTIONS))
def test_ctensors_kernel_rejects_before_launch(case, op):
    """KC-4.2: CT-2.1, CT-2.2, CT-2.3 (widths), CT-3.3 and the group_size keyword (KC-1.9), exactly."""
    t, bits, gs, want = CT_REJECTIONS[case]
    extra = {"x": np.zeros((1, 80), np.float16)} if op == "matmul" else {}
    with pytest.raises(QFormatsError) as exc:
        getattr(kct, op)(**t, num_bits=bits, group_size=gs, **extra)
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == want


def test_ctensors_matmul_rejects_x_of_another_width():
    with pytest.raises(QFormatsError) as exc:
        kct.matmul(**_ct_layer(), num_bits=3, group_size=16, x=np.zeros((2, 81), np.float16))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("tensor.shape", "x", (2, 81))
