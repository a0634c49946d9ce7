"""Statistics of the GPTQ decode from the codes (spec/gptq.md GPTQ-3.7)."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.formats.gptq.moments import _PackedCells, _unpacked_cells, _word_rows_per_group, decode_moments
from qformats.stats import Moments


def layer_with(rng, *, bits, k, n, group_size, version, act_order=False, code_range=None):
    groups = 1 if group_size == -1 else k // group_size
    lo, hi = code_range or (0, (1 << bits) - 1)
    codes = rng.integers(lo, hi + 1, (k, n))
    zeros = rng.integers(1 if version == "v1" else 0, 1 << bits, (groups, n))
    scales = rng.uniform(-3, 3, (groups, n)).astype(np.float16)
    g_idx = np.arange(k) // (k if group_size == -1 else group_size)
    if act_order:
        g_idx = rng.permutation(g_idx)
    return gptq.pack(codes, zeros, scales, bits=bits, g_idx=g_idx, version=version, group_size=group_size)


def assert_same_moments(ours: Moments, decoded: Moments, w: np.ndarray) -> None:
    """Sums equal up to float64 summation order (bounded by the sum of magnitudes); max exactly."""
    scale = float(np.abs(w.astype(np.float64)).sum()) + 1.0
    assert ours.count == decoded.count
    assert ours.max_abs == decoded.max_abs
    assert abs(ours.total - decoded.total) <= 1e-12 * scale
    assert abs(ours.squares - decoded.squares) <= 1e-12 * float((w.astype(np.float64) ** 2).sum() + 1.0)
    assert ours.nonfinite == 0


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from([2, 3, 4, 8]), words=st.integers(1, 4), n_words=st.integers(1, 3),
       group_words=st.sampled_from([1, 2, -1]), version=st.sampled_from(["v1", "v2"]),
       act_order=st.booleans(), narrow=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_moments_equal_those_of_the_reference_decode(bits, words, n_words, group_words, version, act_order,
                                                     narrow, seed):
    """GPTQ-3.7: "the count, sum, sum of squares and maximum magnitude of the decoded weights" equal
    those of dequantize(), for every width, group layout and code range."""
    rng = np.random.default_rng(seed)
    k = 32 * words * (2 if group_words == 2 else 1)
    n = 32 * n_words
    group_size = -1 if group_words == -1 else k // (2 if group_words == 2 else 1)
    maxq = (1 << bits) - 1
    code_range = (maxq // 3, maxq // 2) if narrow else None  # extremes absent: max |W| is not the bound
    layer = layer_with(rng, bits=bits, k=k, n=n, group_size=group_size, version=version, act_order=act_order,
                       code_range=code_range)
    w = gptq.dequantize(layer, bits=bits, version=version, group_size=group_size)
    assert_same_moments(decode_moments(layer, bits=bits, version=version, group_size=group_size), Moments.of(w), w)


@pytest.mark.parametrize("bits,group_size", [(2, 32), (4, 32), (4, 128), (8, 32), (8, -1)],
                         ids=lambda v: str(v))
def test_fast_path_cells_equal_the_general_path(bits, group_size):
    """GPTQ-3.7: the packed-byte fast path and the unpacking path give identical integer cell statistics."""
    rng = np.random.default_rng(bits * 1000 + group_size)
    k, n = 256, 96
    layer = layer_with(rng, bits=bits, k=k, n=n, group_size=group_size, version="v2")
    groups = layer.scales.shape[0]
    g_idx = layer.g_idx.astype(np.intp)
    rows = _word_rows_per_group(g_idx, bits, groups)
    assert rows is not None
    fast = _PackedCells(layer.qweight, bits, groups, rows).run()
    slow = _unpacked_cells(layer.qweight, g_idx, bits, groups)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.astype(np.int64), b)


def test_wide_lanes_hold_a_whole_8bit_column():
    """GPTQ-3.7: 8-bit, one group of 4096 rows: sums of squares need 32-bit lanes and stay exact."""
    k, n = 4096, 32
    codes = np.full((k, n), 255)
    layer = gptq.pack(codes, np.zeros((1, n), np.int64), np.ones((1, n), np.float16), bits=8, version="v2",
                      group_size=-1)
    m = decode_moments(layer, bits=8, version="v2", group_size=-1)
    assert m.total == 255 * k * n
    assert m.squares == 255 ** 2 * k * n
    assert m.max_abs == 255.0


def test_hand_worked_example_of_the_spec():
    """GPTQ-3.7 worked example: the GPTQ-3.2 layer (b = 4, K = N = 32, gs = 16, v1)."""
    word = np.int32(np.uint32(0x9C3A5F07).view(np.int32))
    qweight = np.full((4, 32), word, np.int32)
    qzeros = np.array([[0x76543210] * 4, [0x77777777] * 4], np.int32)
    scales = np.array([[0.5] * 32, [np.float16(0.1)] * 32], np.float16)
    layer = {"qweight": qweight, "qzeros": qzeros, "scales": scales}
    m = decode_moments(layer, bits=4, version="v1", group_size=16)
    s1 = Fraction(819, 8192)  # float16 0x2e66
    # Per column: sum q = 2 * 61 = 122, sum q^2 = 2 * 633 = 1266 over the 16 rows of a group.
    # Group 0: Z = n mod 8 + 1, so over 32 columns sum (q - Z) = 32*122 - 16*4*36 = 1600,
    # sum (q - Z)^2 = 4 * sum_{Z=1..8} (1266 - 244 Z + 16 Z^2) = 18432. Group 1: Z = 8:
    # 32 * (122 - 128) = -192 and 32 * (1266 - 1952 + 1024) = 10816.
    assert m.count == 1024
    assert Fraction(m.total) == Fraction(1, 2) * 1600 + s1 * -192 == Fraction(780.8046875)
    assert abs(Fraction(m.squares) - (Fraction(1, 4) * 18432 + s1 * s1 * 10816)) < Fraction(1, 10**9)
    assert m.max_abs == 7.0  # 0.5 * (15 - 1) in group 0, column 0


@pytest.mark.parametrize("layer_change,code", [
    ({"scales": np.full((2, 32), np.nan, np.float16)}, "gptq.scales.nonfinite"),
    ({"qzeros": np.full((2, 4), -1, np.int32)}, "gptq.zero.v1_unrepresentable"),
    ({"g_idx": np.full(64, 7, np.int32)}, "gptq.g_idx.range"),
], ids=["nan-scales", "all-ones-v1-zeros", "g_idx-out-of-range"])
def test_bad_layers_fail_as_dequantize_does(layer_change, code):
    """GPTQ-3.7: the statistics read the layer with the spec reader's checks, and fail the same way."""
    rng = np.random.default_rng(0)
    layer = dict(layer_with(rng, bits=4, k=64, n=32, group_size=32, version="v1").tensors, **layer_change)
    with pytest.raises(QFormatsError) as decoded:
        gptq.dequantize(layer, bits=4, version="v1", group_size=32)
    with pytest.raises(QFormatsError) as ours:
        decode_moments(layer, bits=4, version="v1", group_size=32)
    assert ours.value.code == decoded.value.code == code
