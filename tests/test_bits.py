"""QF-3: one packing rule for every width -- 32 values become b words, one little-endian stream."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from qformats import bits
from qformats.errors import QFormatsError


def words_hex(words):
    return [f"0x{w:08x}" for w in np.asarray(words).view(np.uint32).ravel()]


@pytest.mark.parametrize(
    ("width", "values", "expected"),
    [
        # Vectors from ../shared/notes/gptq.md §2, checked there against AutoGPTQ 0.7.1 and GPTQModel 7.7.0.
        pytest.param(4, np.arange(32) % 16, ["0x76543210", "0xfedcba98", "0x76543210", "0xfedcba98"], id="4bit-k-mod-16"),
        pytest.param(3, np.arange(32) % 8, ["0x88fac688", "0xc688fac6", "0xfac688fa"], id="3bit-k-mod-8"),
        pytest.param(2, np.arange(32) % 4, ["0xe4e4e4e4", "0xe4e4e4e4"], id="2bit-k-mod-4"),
        pytest.param(8, np.arange(32), [f"0x{4*i+3:02x}{4*i+2:02x}{4*i+1:02x}{4*i:02x}" for i in range(8)], id="8bit-k"),
    ],
)
def test_packing_vectors(width, values, expected):
    """QF-3: "value k occupies stream bits [b*k, b*k + b)" reproduces the upstream test vectors."""
    assert words_hex(bits.pack(values, width)) == expected


def test_3bit_straddling_fields():
    """QF-3: in the 3-bit layout v10 and v21 straddle word boundaries (10|1|10|1|10)."""
    v = np.zeros(32, np.int64)
    v[[10, 21]] = 7
    assert words_hex(bits.pack(v, 3)) == ["0xc0000000", "0x80000001", "0x00000003"]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), width=st.integers(1, 8))
def test_pack_unpack_identity(data, width):
    """unpack(pack(v)) == v for every width, shape and packed axis."""
    ndim = data.draw(st.integers(1, 3))
    axis = data.draw(st.integers(0, ndim - 1))
    shape = list(data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, max_side=5)))
    shape[axis] = 32 * data.draw(st.integers(1, 3))
    v = data.draw(hnp.arrays(np.int32, tuple(shape), elements=st.integers(0, (1 << width) - 1)))
    packed = bits.pack(v, width, axis)
    assert packed.dtype == np.int32
    assert packed.shape[axis] == shape[axis] * width // 32
    np.testing.assert_array_equal(bits.unpack(packed, width, axis), v)


@settings(max_examples=60, deadline=None)
@given(words=hnp.arrays(np.uint32, st.integers(1, 12).map(lambda n: (3 * n,))))
def test_unpack_pack_identity_on_any_words(words):
    """Every 3-bit word stream is canonical: pack(unpack(w)) == w bit for bit."""
    np.testing.assert_array_equal(bits.pack(bits.unpack(words, 3), 3).view(np.uint32), words)


@pytest.mark.parametrize(
    ("width", "values", "code", "message"),
    [
        pytest.param(9, np.zeros(32, int), "bits.unsupported", "'bits' must be an integer in 1..8 (got 9)", id="bits-9"),
        pytest.param(4, np.full(8, 16), "bits.value_range", "'values' must be in [0, 15] (got 16)", id="value-16-in-4bit"),
        pytest.param(4, np.full(8, -1), "bits.value_range", "'values' must be in [0, 15] (got -1)", id="negative"),
        pytest.param(3, np.zeros(16, int), "bits.length", None, id="3bit-16-values"),
        pytest.param(4, np.zeros(8, np.float32), "bits.value_range", "'values' must be an integer array (got float32)", id="float-values"),
    ],
)
def test_pack_rejects(width, values, code, message):
    """QF-3.1..3.3: out-of-domain inputs raise the project error with its code."""
    with pytest.raises(QFormatsError) as info:
        bits.pack(values, width)
    assert info.value.code == code
    if message:
        assert info.value.message == message


@pytest.mark.parametrize(
    ("call", "code"),
    [
        pytest.param(lambda: bits.pack(np.int64(3), 4), "argument.invalid", id="scalar-values"),
        pytest.param(lambda: bits.pack(np.zeros((8, 2), int), 4, axis=2), "argument.invalid", id="axis-out-of-range"),
        pytest.param(lambda: bits.pack(np.zeros(8, int), 4.0), "bits.unsupported", id="float-bits"),
        pytest.param(lambda: bits.pack(np.zeros(32, int), True), "bits.unsupported", id="bool-bits"),
        pytest.param(lambda: bits.unpack(np.zeros(4, np.int32), 4, count=-1), "bits.length", id="negative-count"),
        pytest.param(lambda: bits.unpack(np.int32(0), 4), "argument.invalid", id="scalar-words"),
    ],
)
def test_bad_arguments_are_refused_not_reinterpreted(call, code):
    """QF-2.6: an axis, width or count outside its domain is an error, never silently wrapped."""
    with pytest.raises(QFormatsError) as info:
        call()
    assert info.value.code == code
