"""GPTQ reference codec: pack/unpack/dequantize/convert/quantize (spec/gptq.md GPTQ-2, 3, 7, 9)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qformats.errors import QFormatsError
from qformats.formats import gptq

BITS = [2, 3, 4, 8]


def random_layer_inputs(rng, bits, k=64, n=64, group_size=32, zero_min=0):
    groups = 1 if group_size == -1 else -(-k // group_size)
    codes = rng.integers(0, 1 << bits, (k, n))
    zeros = rng.integers(zero_min, 1 << bits, (groups, n))
    # Powers of two: the reference value s * (q - z) is then exact in float32 by construction.
    scales = (2.0 ** -rng.integers(2, 10, (groups, n))).astype(np.float16)
    return codes, zeros, scales


def reference_decode(codes, zeros, scales, g_idx):
    """GPTQ-3.2 written out directly in float64 (exact here), then transposed to (out, in)."""
    w_t = scales.astype(np.float64)[g_idx] * (codes - zeros[g_idx])
    return w_t.T.astype(np.float32)


@pytest.mark.parametrize("bits", BITS, ids=lambda b: f"{b}bit")
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_dequantize_is_exact_scale_times_code_minus_zero(bits, version):
    """GPTQ-3.2: "W[n,k] = scales[g_idx[k], n] * (q[k,n] - Z[g_idx[k], n])", float32, (out, in)."""
    rng = np.random.default_rng(bits)
    codes, zeros, scales = random_layer_inputs(rng, bits, zero_min=1 if version == "v1" else 0)
    layer = gptq.pack(codes, zeros, scales, bits=bits, version=version)
    w = gptq.dequantize(layer, bits=bits, version=version)
    assert w.dtype == np.float32 and w.shape == (64, 64)
    np.testing.assert_array_equal(w, reference_decode(codes, zeros, scales, np.arange(64) // 32))


@pytest.mark.parametrize("bits", BITS, ids=lambda b: f"{b}bit")
def test_v1_stores_zero_minus_one_and_v2_stores_zero(bits):
    """GPTQ-3.3: v1 stores the field zero - 1, v2 stores zero itself."""
    rng = np.random.default_rng(7)
    codes, zeros, scales = random_layer_inputs(rng, bits, zero_min=1)
    from qformats import bits as bitpack

    v1 = gptq.pack(codes, zeros, scales, bits=bits, version="v1")
    v2 = gptq.pack(codes, zeros, scales, bits=bits, version="v2")
    np.testing.assert_array_equal(bitpack.unpack(v1.qzeros, bits, axis=1), zeros - 1)
    np.testing.assert_array_equal(bitpack.unpack(v2.qzeros, bits, axis=1), zeros)
    np.testing.assert_array_equal(v1.qweight, v2.qweight)


@settings(max_examples=40, deadline=None)
@given(bits=st.sampled_from(BITS), seed=st.integers(0, 2**32 - 1), groups=st.integers(1, 3),
       version=st.sampled_from(["v1", "v2"]))
def test_pack_unpack_identity(bits, seed, groups, version):
    """Pack then unpack returns the codes and zero points unchanged, for every width."""
    rng = np.random.default_rng(seed)
    codes, zeros, scales = random_layer_inputs(rng, bits, k=32 * groups, n=32, group_size=32,
                                               zero_min=1 if version == "v1" else 0)
    layer = gptq.pack(codes, zeros, scales, bits=bits, version=version)
    got_codes, got_zeros = gptq.unpack(layer, bits=bits, version=version)
    np.testing.assert_array_equal(got_codes, codes)
    np.testing.assert_array_equal(got_zeros, zeros)


@settings(max_examples=40, deadline=None)
@given(bits=st.sampled_from(BITS), seed=st.integers(0, 2**32 - 1))
def test_v2_to_v1_to_v2_is_identity_when_representable(bits, seed):
    """GPTQ-7.1, 7.2: per-field conversion v2 -> v1 -> v2 is the identity when every zero is >= 1."""
    rng = np.random.default_rng(seed)
    codes, zeros, scales = random_layer_inputs(rng, bits, zero_min=1)
    v2 = gptq.pack(codes, zeros, scales, bits=bits, version="v2")
    back = gptq.convert(gptq.convert(v2, bits=bits, to="v1"), bits=bits, to="v2")
    for name in ("qweight", "qzeros", "scales", "g_idx"):
        np.testing.assert_array_equal(getattr(back, name), getattr(v2, name))


def test_v2_to_v1_refuses_zero_point_zero_with_the_count():
    """GPTQ-7.2: v2 -> v1 "requires every zero >= 1, else refused with the count"."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(1), 4, zero_min=1)
    zeros[0, [3, 9]] = 0
    v2 = gptq.pack(codes, zeros, scales, bits=4, version="v2")
    with pytest.raises(QFormatsError) as info:
        gptq.convert(v2, bits=4, to="v1")
    assert info.value.code == "gptq.zero.v2_not_representable_in_v1"
    assert "2 zero points of 0, first at [0, 3]" in info.value.message


@settings(max_examples=30, deadline=None)
@given(bits=st.sampled_from(BITS), sym=st.booleans(), seed=st.integers(0, 2**32 - 1),
       group_size=st.sampled_from([32, 64, -1]), act_order=st.booleans())
def test_quantize_error_is_at_most_half_a_scale_inside_the_clamp_range(bits, sym, seed, group_size, act_order):
    """GPTQ-9: round-to-nearest: |w - dequant(w)| <= scale / 2 wherever the code was not clamped."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(32, 128)).astype(np.float32) * rng.uniform(0.01, 3)
    importance = rng.random(128) if act_order else None
    layer = gptq.quantize(w, bits=bits, group_size=group_size, sym=sym, version="v2", act_order=importance)
    w_hat = gptq.dequantize(layer, bits=bits, version="v2")
    codes, zeros = gptq.unpack(layer, bits=bits, version="v2")
    g = layer.g_idx
    scale = layer.scales.astype(np.float32)[g].T
    unclamped = (np.rint(w / scale) + zeros[g].T >= 0) & (np.rint(w / scale) + zeros[g].T <= (1 << bits) - 1)
    # Slack: one float32 rounding of w / scale (relative 2^-24) scaled back by the scale.
    bound = scale / 2 * (1 + 2.0**-22) + np.abs(w) * 2.0**-23
    assert np.all(np.abs(w - w_hat)[unclamped] <= bound[unclamped])
    assert unclamped.mean() > 0.5  # the bound is not vacuous


def test_quantize_asymmetric_keeps_every_zero_in_range_and_zero_exact():
    """GPTQ-9: the range is widened to include 0, so 0.0 decodes exactly to 0 in asymmetric RTN."""
    w = np.abs(np.random.default_rng(3).normal(size=(8, 64))).astype(np.float32) + 1.0  # all positive
    w[:, 5] = 0.0
    layer = gptq.quantize(w, bits=4, group_size=32, sym=False, version="v2")
    assert np.all(gptq.dequantize(layer, bits=4, version="v2")[:, 5] == 0.0)


def test_act_order_g_idx_is_rank_divided_by_group_size():
    """GPTQ-5.3: with act-order "g_idx[k] = invperm[k] // gs" (rank of column k by importance)."""
    importance = np.array([0.1, 5.0, 3.0, 0.2, 4.0, 0.3, 2.0, 1.0] * 4)  # 32 columns, 4 groups of 8
    w = np.random.default_rng(0).normal(size=(32, 32)).astype(np.float32)
    layer = gptq.quantize(w, bits=4, group_size=8, sym=True, act_order=importance)
    rank = np.empty(32, int)
    rank[np.argsort(-importance, kind="stable")] = np.arange(32)
    np.testing.assert_array_equal(layer.g_idx, rank // 8)
    assert np.bincount(layer.g_idx).tolist() == [8, 8, 8, 8]


@pytest.mark.parametrize(
    ("kwargs", "code", "message"),
    [
        pytest.param({"bits": 5}, "bits.unsupported", "'bits' must be one of 2, 3, 4, 8 (got 5)",
                     id="bits-5"),
        pytest.param({"codes": np.full((64, 64), 16)}, "gptq.codes.range",
                     "'codes' must be in [0, 15] for 4-bit (got 16 at [0, 0])", id="code-16-in-4bit"),
        pytest.param({"zeros": np.full((2, 64), -1)}, "gptq.zero.range",
                     "'zeros' must be in [0, 15] for 4-bit (got -1 at [0, 0])", id="negative-zero"),
        pytest.param({"scales": np.ones((2, 64), np.float32)}, "tensor.dtype",
                     "'scales' must be float16 (got float32)", id="float32-scales"),
        pytest.param({"scales": np.ones((3, 64), np.float16)}, "tensor.shape",
                     "'scales' must be of shape (2, 64) (got (3, 64))", id="scales-wrong-groups"),
        pytest.param({"g_idx": np.full(64, 2, np.int32)}, "gptq.g_idx.range",
                     "'g_idx' must be in [0, 2) for 2 groups (got 2 at [0])", id="g_idx-out-of-range"),
        pytest.param({"g_idx": np.zeros(64, np.int32)}, "gptq.g_idx.group_sizes",
                     "'g_idx' must be 32 rows in group 0 (got 64 rows)", id="g_idx-uneven-groups"),
        pytest.param({"version": "v3"}, "argument.invalid", "'version' must be 'v1' or 'v2' (got v3)", id="version-v3"),
    ],
)
def test_pack_rejects_bad_input(kwargs, code, message):
    """Bad inputs raise the project error naming tensor, constraint and actual value."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(0), 4, zero_min=1)
    args = {"codes": codes, "zeros": zeros, "scales": scales, "bits": 4, "version": "v1"} | kwargs
    with pytest.raises(QFormatsError) as info:
        gptq.pack(args.pop("codes"), args.pop("zeros"), args.pop("scales"), **args)
    assert (info.value.code, info.value.message) == (code, message)


def test_nonfinite_scale_is_named_with_its_position():
    """GPTQ-3.5: scales must be finite; the error names the first offending index."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(0), 4, zero_min=1)
    scales[1, 17] = np.nan
    with pytest.raises(QFormatsError) as info:
        gptq.pack(codes, zeros, scales, bits=4)
    assert info.value.code == "gptq.scales.nonfinite"
    assert info.value.message == "'scales' must be finite float16 (got NaN at [1, 17])"


def test_strict_v1_writer_refuses_zero_point_zero():
    """GPTQ-3.4: "a conforming writer MUST NOT write" a v1 field of all ones (zero 0)."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(0), 4, zero_min=1)
    zeros[1, 2] = 0
    with pytest.raises(QFormatsError) as info:
        gptq.pack(codes, zeros, scales, bits=4, version="v1")
    assert info.value.code == "gptq.zero.v1_unrepresentable"
    assert "0 at [1, 2]" in info.value.message


@pytest.mark.parametrize("bits", BITS, ids=lambda b: f"{b}bit")
def test_spec_reader_rejects_all_ones_v1_field(bits):
    """GPTQ-3.4: the spec reader rejects an all-ones v1 field unless a real-tool reader is chosen."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(0), bits, zero_min=0)
    zeros[0, 5] = 0
    layer = gptq.pack(codes, zeros, scales, bits=bits, version="v2")  # v2 fields, read as v1 below
    from qformats import bits as bitpack

    fields = bitpack.unpack(layer.qzeros, bits, axis=1).astype(np.int64)
    fields[0, 5] = (1 << bits) - 1
    tampered = dict(layer.tensors, qzeros=bitpack.pack(fields, bits, axis=1))
    with pytest.raises(QFormatsError) as info:
        gptq.dequantize(tampered, bits=bits, version="v1")
    assert info.value.code == "gptq.zero.v1_unrepresentable"
    assert info.value.tensor == "qzeros"


def test_dequantize_takes_a_plain_mapping_and_infers_the_trivial_g_idx():
    """DESIGN §3: functions taking a layer also take a mapping of on-disk names; g_idx may be absent."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 3, zero_min=1)
    layer = gptq.pack(codes, zeros, scales, bits=3)
    mapping = {k: v for k, v in layer.tensors.items() if k != "g_idx"}
    np.testing.assert_array_equal(gptq.dequantize(mapping, bits=3, version="v1"),
                                  gptq.dequantize(layer, bits=3, version="v1"))


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        pytest.param(lambda t: t.pop("qzeros"), "tensor.missing", id="missing-qzeros"),
        pytest.param(lambda t: t.update(qweight=t["qweight"].astype(np.int64)), "tensor.dtype", id="int64-qweight"),
        pytest.param(lambda t: t.update(qzeros=t["qzeros"][:, :4]), "tensor.shape", id="narrow-qzeros"),
        pytest.param(lambda t: t.update(g_idx=np.full(64, 7, np.int32)), "gptq.g_idx.range", id="g_idx-7"),
        pytest.param(lambda t: t.update(scales=np.full((2, 64), np.inf, np.float16)), "gptq.scales.nonfinite",
                     id="inf-scales"),
    ],
)
def test_dequantize_rejects_malformed_layers(mutate, code):
    """QF-2 and GPTQ-2.2: the reader checks every tensor before decoding."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 4, zero_min=1)
    tensors = dict(gptq.pack(codes, zeros, scales, bits=4).tensors)
    mutate(tensors)
    with pytest.raises(QFormatsError) as info:
        gptq.dequantize(tensors, bits=4, version="v1")
    assert info.value.code == code


def test_layer_is_frozen():
    """A packed layer cannot be changed after its checks ran."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 4, zero_min=1)
    layer = gptq.pack(codes, zeros, scales, bits=4)
    with pytest.raises(AttributeError):
        layer.qweight = None
    with pytest.raises(ValueError):
        layer.qweight[0, 0] = 1


def test_caller_arrays_are_not_written():
    """Packing never writes to its inputs."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 4, zero_min=1)
    before = codes.copy(), zeros.copy(), scales.copy()
    gptq.pack(codes, zeros, scales, bits=4)
    for a, b in zip((codes, zeros, scales), before):
        np.testing.assert_array_equal(a, b)


def test_big_endian_scales_are_refused():
    """QF-2.2: '>f2' is named float16 too, but every view of it would be misread; refused."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 4, zero_min=1)
    with pytest.raises(QFormatsError) as info:
        gptq.pack(codes, zeros, scales.astype(">f2"), bits=4)
    assert (info.value.code, info.value.tensor) == ("tensor.dtype", "scales")


def test_layer_keeps_its_own_copy_of_writeable_inputs():
    """A layer is frozen: changing the caller's scales afterwards does not change it."""
    codes, zeros, scales = random_layer_inputs(np.random.default_rng(5), 4, zero_min=1)
    layer = gptq.pack(codes, zeros, scales, bits=4)
    before = np.array(layer.scales)
    scales[0, 0] = np.nan
    np.testing.assert_array_equal(layer.scales, before)


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("act_order", [False, True], ids=["trivial", "act-order"])
def test_pack_infers_a_short_last_group_from_g_idx(bits, act_order):
    """GPTQ-5.2: K = 160, group size 128 (groups of 128 and 32), as AutoGPTQ and GPTQModel write it:
    pack without group_size infers 128 from g_idx, and pack/unpack/dequantize/convert round-trip."""
    rng = np.random.default_rng(bits)
    k, n, maxq = 160, 32, (1 << bits) - 1
    order = rng.permutation(k) if act_order else np.arange(k)
    g_idx = np.empty(k, np.int32)
    g_idx[order] = np.arange(k) // 128
    codes = rng.integers(0, maxq + 1, (k, n))
    zeros = rng.integers(1, maxq + 1, (2, n))
    scales = rng.uniform(0.01, 0.1, (2, n)).astype(np.float16)
    layer = gptq.pack(codes, zeros, scales, bits=bits, g_idx=g_idx, version="v1")
    assert layer.group_size == 128
    q, z = gptq.unpack(layer, bits=bits, version="v1", group_size=128)
    assert np.array_equal(q, codes) and np.array_equal(z, zeros)
    truth = (scales.astype(np.float32)[g_idx] * (codes - zeros[g_idx]).astype(np.float32)).T
    assert np.array_equal(gptq.dequantize(layer, bits=bits, version="v1", group_size=128), truth)
    v2 = gptq.convert(layer, bits=bits, to="v2", group_size=128)
    assert np.array_equal(gptq.dequantize(v2, bits=bits, version="v2", group_size=128), truth)
