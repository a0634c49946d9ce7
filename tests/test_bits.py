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


# Tests with teeth (issue 33): each refusal asserted whole, each limit at the limit and one past.

def whole_error(call):
    """Everything a refusal carries: code, tensor, constraint, actual value and the rendered message."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return e.code, e.tensor, e.constraint, e.actual, e.message


def spec_unpack(words, b):
    """QF-3's one-line rule applied run by run (b words per run of 32 values; a short last run reads 0 past its end)."""
    w = [int(x) for x in np.asarray(words).view(np.uint32)]
    field = lambda run, k: (((run + [0])[b * k // 32] | (run + [0])[b * k // 32 + 1] << 32) >> (b * k % 32)) & ((1 << b) - 1)  # noqa: E731
    return [field(w[j // 32 * b:(j // 32 + 1) * b], j % 32) for j in range(len(w) * 32 // b)]


@pytest.mark.parametrize(("call", "tensor"), [
    pytest.param(lambda: bits.pack(np.int64(3), 4), "values", id="pack"),
    pytest.param(lambda: bits.unpack(np.int32(0), 4), "words", id="unpack"),
])
def test_scalar_refusal_names_the_argument(call, tensor):
    """QF-2.6: a scalar has no axis to pack along; the refusal names the argument and says why."""
    assert whole_error(call) == ("argument.invalid", tensor, "an array of at least one dimension", "a scalar",
                                 f"'{tensor}' must be an array of at least one dimension (got a scalar)")


def test_pack_axis_minus_ndim_is_the_first_axis():
    """QF-3 along axis -ndim: each column of a (32, 2) array of k mod 16 packs to the upstream 4-bit vector."""
    v = np.repeat((np.arange(32) % 16)[:, None], 2, axis=1)
    packed = bits.pack(v, 4, axis=-2)
    assert packed.shape == (4, 2)
    assert [words_hex(packed[:, c]) for c in range(2)] == [["0x76543210", "0xfedcba98"] * 2] * 2


def test_unpack_axis_minus_ndim_is_the_first_axis():
    """QF-3 along axis -ndim: the upstream 4-bit vector in both columns unpacks to k mod 16 down each column."""
    words = np.array([[0x76543210] * 2, [0xFEDCBA98] * 2] * 2, np.uint32)
    assert bits.unpack(words, 4, axis=-2).tolist() == [[k % 16] * 2 for k in range(32)]


@pytest.mark.parametrize("axis", [pytest.param(-3, id="minus-ndim-minus-1"), pytest.param(2, id="ndim")])
@pytest.mark.parametrize("call", [
    pytest.param(lambda axis: bits.pack(np.zeros((32, 2), int), 4, axis=axis), id="pack"),
    pytest.param(lambda axis: bits.unpack(np.zeros((4, 2), np.int32), 4, axis=axis), id="unpack"),
])
def test_axis_one_past_either_end_is_refused_whole(call, axis):
    """QF-2.6: for a 2-d array the axis domain is [-2, 2); -3 and 2 are refused with that domain stated."""
    assert whole_error(lambda: call(axis)) == ("argument.invalid", "axis", "an integer in [-2, 2)", axis,
                                               f"'axis' must be an integer in [-2, 2) (got {axis})")


@pytest.mark.parametrize(("values", "bad"), [
    pytest.param([-1, 3], -1, id="negative-beside-in-range"),
    pytest.param([0, 16], 16, id="too-large-beside-zero"),
    pytest.param([-2, 99], -2, id="both-ends-out:the-negative"),
])
def test_value_range_names_the_value_that_does_not_fit(values, bad):
    """QF-3.2: the refusal reports the value outside [0, 15], not an in-range neighbour."""
    assert whole_error(lambda: bits.pack(np.array(values * 16), 4)) == (
        "bits.value_range", "values", "in [0, 15]", bad, f"'values' must be in [0, 15] (got {bad})")


@pytest.mark.parametrize(("width", "n", "multiple"), [
    pytest.param(3, 16, 32, id="3bit-16-values"),   # gcd(3, 32) = 1: only whole runs fill words
    pytest.param(4, 4, 8, id="4bit-4-values"),      # 8 fields of 4 bits per word
    pytest.param(4, 8, None, id="4bit-8-values-fits"),
])
def test_pack_length_refusal_states_the_multiple(width, n, multiple):
    """QF-3.3: n * b must be a multiple of 32; the refusal names the axis and the multiple n must be."""
    if multiple is None:
        assert bits.pack(np.zeros(n, int), width).shape == (n * width // 32,)
        return
    constraint = f"a length whose {width}-bit fields fill whole 32-bit words (a multiple of {multiple})"
    assert whole_error(lambda: bits.pack(np.zeros(n, int), width)) == (
        "bits.length", "axis", constraint, n, f"'axis' must be {constraint} (got {n})")


@pytest.mark.parametrize("dtype", [pytest.param(np.int64, id="int64"), pytest.param(np.uint8, id="uint8")])
def test_unpack_refuses_words_of_another_dtype(dtype):
    """QF-2.2: packed words are int32 (or their uint32 view); any other dtype is refused, never reinterpreted."""
    name = np.dtype(dtype).name
    assert whole_error(lambda: bits.unpack(np.zeros(4, dtype), 4)) == (
        "tensor.dtype", "words", "int32 or uint32", name, f"'words' must be int32 or uint32 (got {name})")


@pytest.mark.parametrize(("count", "expected"), [
    pytest.param(0, [], id="count-0"),
    pytest.param(5, [0, 1, 2, 3, 4], id="count-5"),
    pytest.param(16, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], id="count-at-the-limit"),
])
def test_unpack_count_truncates(count, expected):
    """count keeps the first count fields: two 4-bit words of k mod 16 hold 16 fields, and 0..16 are all valid."""
    out = bits.unpack(np.array([0x76543210, 0xFEDCBA98], np.uint32), 4, count=count)
    assert out.dtype == np.uint8 and out.tolist() == expected


@pytest.mark.parametrize("count", [pytest.param(-1, id="minus-1"), pytest.param(17, id="one-past-the-limit")])
def test_unpack_count_outside_the_fields_is_refused_whole(count):
    """QF-3.3: two 4-bit words hold 16 fields; a count outside [0, 16] is refused with that domain stated."""
    constraint = "in [0, 16] for 2 words"
    assert whole_error(lambda: bits.unpack(np.zeros(2, np.int32), 4, count=count)) == (
        "bits.length", "count", constraint, count, f"'count' must be {constraint} (got {count})")


def test_unpack_short_final_run():
    """QF-3.3: a final run shorter than 32 values (b even) fills the first n_last * b / 32 words: one 4-bit word is 8 values."""
    assert bits.unpack(np.array([0x76543210], np.uint32), 4).tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


@settings(max_examples=40, deadline=None)
@given(width=st.integers(1, 8), words=hnp.arrays(np.uint32, st.integers(1, 12)))
def test_unpack_matches_the_spec_formula_on_any_word_count(width, words):
    """QF-3: unpack yields every whole field the words hold, each equal to the spec's one-line rule."""
    assert bits.unpack(words, width).tolist() == spec_unpack(words, width)
