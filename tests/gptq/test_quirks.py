"""Real-tool writer and reader emulation: the worked examples of GPTQ-4 and its properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qformats import bits
from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.formats.gptq.quirks import LEGACY_INT3, READERS, WRITERS, get_reader, get_writer

EXAMPLE = np.array([[0, 5, 3, 0, 0, 9, 15, 1]])  # GPTQ-4.1 eight-column example, one qzeros word


def words(a: np.ndarray) -> list[int]:
    return [int(w) for w in np.asarray(a).view(np.uint32).ravel()]


# -- GPTQ-8.1 symmetric words, GPTQ-4.4 and GPTQ-4.5 -----------------------------------------

SYM_V1 = {2: [0x55555555], 3: [0xDB6DB6DB, 0xB6DB6DB6, 0x6DB6DB6D], 4: [0x77777777], 8: [0x7F7F7F7F]}


@pytest.mark.parametrize("writer", ["autogptq", "gptqmodel", "masked"])
@pytest.mark.parametrize("b", [2, 3, 4, 8])
def test_symmetric_v1_words(writer, b):
    """GPTQ-8.1: symmetric zero 2^(b-1) is written as the table's v1 words by every writer."""
    qzeros = WRITERS[writer](np.full((2, 32), 1 << (b - 1)), b)
    assert words(qzeros) == (SYM_V1[b] * b)[:b] * 2  # 32 columns fill b words, in each of 2 groups


@pytest.mark.parametrize("reader", ["autogptq_cuda_old", "autogptq_cuda", "vllm_gptq_gemm", "gptqmodel"])
def test_eight_bit_symmetric_read_correctly(reader):
    """GPTQ-4.2: the torch readers take stored 0x7f7f7f7f as zero 128."""
    qzeros = np.array([[0x7F7F7F7F]], np.uint32).view(np.int32)
    assert READERS[reader].effective_zeros(qzeros, 8, 4, "v1").tolist() == [[128] * 4]


def test_autogptq_cuda_kernel_eight_bit_bug():
    """GPTQ-4.4: AutoGPTQ's CUDA kernel masks ``+1`` with 0x0F, so 8-bit sym zero 128 reads as 0."""
    qzeros = np.array([[0x7F7F7F7F]], np.uint32).view(np.int32)
    assert READERS["autogptq_cuda_kernel"].effective_zeros(qzeros, 8, 4, "v1").tolist() == [[0] * 4]


def test_legacy_int3_constants_add_uneven_fields():
    """GPTQ-4.5: the legacy constants add [4]*10, 0, [1]*10, 3, [2]*10 to the 32 fields, not [1]*32."""
    c = np.array([LEGACY_INT3], np.uint32).view(np.int32)
    assert bits.unpack(c, 3, axis=1).tolist() == [[4] * 10 + [0] + [1] * 10 + [3] + [2] * 10]


def test_legacy_int3_symmetric_words():
    """GPTQ-4.5: GPTQModel v0.9-v6.x writes sym 3-bit v1 as 0x00000000, 0xb6db6db7, 0x49249249."""
    qzeros = WRITERS["gptqmodel_legacy_int3"](np.full((1, 64), 4), 3)
    assert words(qzeros) == [0x00000000, 0xB6DB6DB7, 0x49249249] * 2


def test_legacy_int3_misread_by_canonical_readers():
    """GPTQ-4.5: a per-field ``(f+1) & 7`` reader sees zeros [1]*10, 5, [4]*11, [3]*10 in those words."""
    qzeros = WRITERS["gptqmodel_legacy_int3"](np.full((1, 32), 4), 3)
    want = [[1] * 10 + [5] + [4] * 11 + [3] * 10]
    for reader in ("autogptq_cuda_old", "gptqmodel"):
        assert READERS[reader].effective_zeros(qzeros, 3, 32, "v1").tolist() == want, reader
    assert READERS["gptqmodel_legacy_int3"].effective_zeros(qzeros, 3, 32, "v1").tolist() == [[4] * 32]


def test_marlin_ignores_qzeros():
    """GPTQ-4.2: Marlin never reads qzeros; the zero is 2^(b-1) whatever the words hold."""
    qzeros = np.array([[0, -1, 12345]], np.int32)
    assert READERS["marlin"].effective_zeros(qzeros, 4, 24, "v2").tolist() == [[8] * 24]


def test_vllm_reads_v2_without_offset():
    """GPTQ-4.2: vLLM gptq_gemm adds 1 for gptq and 0 for gptq_v2, without wrapping."""
    qzeros = bits.pack(np.array([[15, 0, 7, 1, 2, 3, 4, 5]]), 4, axis=1)
    r = READERS["vllm_gptq_gemm"]
    assert r.effective_zeros(qzeros, 4, 8, "v2").tolist() == [[15, 0, 7, 1, 2, 3, 4, 5]]
    assert r.effective_zeros(qzeros, 4, 8, "v1").tolist() == [[16, 1, 8, 2, 3, 4, 5, 6]]


# -- unsupported and unknown --------------------------------------------------------------------


@pytest.mark.parametrize(("reader", "b", "version"), [
    pytest.param("exllama", 3, "v1", id="exllama-3bit"),
    pytest.param("exllama", 8, "v1", id="exllama-8bit"),
    pytest.param("marlin", 2, "v1", id="marlin-2bit"),
    pytest.param("marlin", 3, "v2", id="marlin-3bit"),
])
def test_unsupported_combination(reader, b, version):
    """GPTQ-4.2: a width or label the real reader cannot read is ``gptq.quirk.unsupported``."""
    qzeros = np.zeros((1, b), np.int32)
    with pytest.raises(QFormatsError) as info:
        READERS[reader].effective_zeros(qzeros, b, 32, version)
    assert info.value.code == "gptq.quirk.unsupported"
    assert reader in str(info.value)


def test_group_ignoring_reader_needs_whole_groups():
    """GPTQ-5.3: autogptq_cuda_old assumes k // group_size and fails when K % group_size != 0."""
    r = READERS["autogptq_cuda_old"]
    assert r.groups(None, 96, 32).tolist() == [0] * 32 + [1] * 32 + [2] * 32
    assert r.groups(None, 64, -1).tolist() == [0] * 64
    with pytest.raises(QFormatsError) as info:
        r.groups(None, 160, 128)
    assert info.value.code == "gptq.quirk.unsupported"


@pytest.mark.parametrize("getter", [get_writer, get_reader], ids=["writer", "reader"])
def test_unknown_name(getter):
    """GPTQ-4.1: a writer or reader name qformats does not emulate is ``gptq.quirk.unknown``."""
    with pytest.raises(QFormatsError) as info:
        getter("gptq-for-llama")
    assert info.value.code == "gptq.quirk.unknown"


def test_unknown_reader_through_codec():
    """GPTQ-4.2: ``gptq.dequantize(reader=<unknown>)`` is ``gptq.quirk.unknown``."""
    layer = gptq.pack(np.zeros((32, 8), np.int64), np.ones((1, 8), np.int64), np.ones((1, 8), np.float16),
                      bits=4, version="v1")
    with pytest.raises(QFormatsError) as info:
        gptq.dequantize(layer, bits=4, version="v1", reader="exllama_v3")
    assert info.value.code == "gptq.quirk.unknown"


@pytest.mark.parametrize(("zeros", "b", "code"), [
    pytest.param(np.array([[16] * 8]), 4, "gptq.zero.range", id="zero-above-maxq"),
    pytest.param(np.array([[-1] * 8]), 4, "gptq.zero.range", id="negative-zero"),
    pytest.param(np.ones((1, 8)), 4, "tensor.dtype", id="float-zeros"),
    pytest.param(np.ones(8, np.int64), 4, "tensor.shape", id="1d-zeros"),
    pytest.param(np.ones((1, 6), np.int64), 4, "bits.length", id="n-not-word-multiple"),
    pytest.param(np.ones((1, 32), np.int64), 5, "bits.unsupported", id="5-bit"),
])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_writer_rejects_bad_zeros(writer, zeros, b, code):
    """GPTQ-3.3: writers reject zeros outside [0, 2^b - 1] or of the wrong dtype/shape with a code."""
    with pytest.raises(QFormatsError) as info:
        WRITERS[writer](zeros, b)
    assert info.value.code == code


def test_reader_rejects_wrong_qzeros_shape():
    """GPTQ-2.2: qzeros must be (G, N*b/32) for the N given."""
    with pytest.raises(QFormatsError) as info:
        READERS["gptqmodel"].effective_zeros(np.zeros((1, 2), np.int32), 4, 8, "v1")
    assert info.value.code == "tensor.shape"


def test_writers_leave_input_untouched():
    """Hygiene: emulations never write to their input."""
    z = EXAMPLE.copy()
    z.setflags(write=False)
    for writer in WRITERS.values():
        writer(z, 4)
    assert z.tolist() == EXAMPLE.tolist()


# -- properties -------------------------------------------------------------------------------

WIDTHS = st.sampled_from([2, 3, 4, 8])


@st.composite
def zero_grids(draw, low: int):
    b = draw(WIDTHS)
    g = draw(st.integers(1, 3))
    n = 32 * draw(st.integers(1, 2))
    flat = draw(st.lists(st.integers(low, (1 << b) - 1), min_size=g * n, max_size=g * n))
    return b, np.array(flat, np.int64).reshape(g, n)


@settings(deadline=None, max_examples=60)
@given(zero_grids(low=1))
def test_writers_agree_when_no_zero_is_0(case):
    """GPTQ-4.3: with every zero in [1, 2^b - 1] all writers store the same v1 words, zero - 1."""
    b, z = case
    want = bits.pack(z - 1, b, axis=1)
    names = [w for w in WRITERS if not (b == 3 and w == "gptqmodel_legacy_int3")]
    for name in names:
        assert np.array_equal(WRITERS[name](z, b), want), name


@settings(deadline=None, max_examples=60)
@given(zero_grids(low=1))
def test_readers_recover_zeros_at_least_1(case):
    """GPTQ-4.3: every reader that reads the width recovers zeros in [1, 2^b - 1] from v1 words."""
    b, z = case
    qzeros = WRITERS["masked"](z, b)
    for name, reader in READERS.items():
        if not reader.supports(b, "v1") or reader.fixed_zero or (name == "autogptq_cuda_kernel" and b == 8):
            continue
        if name == "gptqmodel_legacy_int3" and b == 3:
            continue
        assert np.array_equal(reader.effective_zeros(qzeros, b, z.shape[1], "v1"), z), name


@settings(deadline=None, max_examples=60)
@given(zero_grids(low=0))
def test_gptqmodel_reader_inverts_its_writer(case):
    """GPTQ-7.3: GPTQModel's v1 load undoes its v1 save for any zeros, 0 included (legacy too)."""
    b, z = case
    for name in ("gptqmodel", "gptqmodel_legacy_int3"):
        qzeros = WRITERS[name](z, b)
        assert np.array_equal(READERS[name].effective_zeros(qzeros, b, z.shape[1], "v1"), z), name


@settings(deadline=None, max_examples=60)
@given(zero_grids(low=0))
def test_autogptq_bleed_shape(case):
    """GPTQ-4.1: AutoGPTQ turns a zero 0 and every higher bit of its word to ones; other words hold zero - 1."""
    b, z = case
    f = bits.unpack(WRITERS["autogptq"](z, b), b, axis=1).astype(np.int64)
    blocks = z.shape[1] // 32
    pos = bits.field_positions(b)
    word_of = np.array([w for w, _ in pos] * blocks) + np.repeat(np.arange(blocks) * b, 32)
    low_bits = np.array([min(b, 32 - s) for _, s in pos] * blocks)  # a straddling field's bits in its first word
    col = np.arange(z.shape[1])
    for g, j in zip(*np.nonzero(z == 0)):
        above = (word_of == word_of[j]) & (col >= j)
        mask = (1 << low_bits[above]) - 1
        assert (f[g, above] & mask == mask).all()
    untouched = np.ones_like(z, bool)
    for g, j in zip(*np.nonzero(z == 0)):
        untouched[g, word_of == word_of[j]] = False
    assert np.array_equal(f[untouched], (z - 1)[untouched])
