"""Every worked example of spec/gptq.md, executed: each test quotes the example and its clause.

Expected values are the ones printed in the chapter, worked out by hand there (or measured from
AutoGPTQ 0.7.1 / GPTQModel 7.7.0 where the chapter says [run]); none is computed by the code
under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qformats import bits as bitpack
from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.formats.gptq import checks
from qformats.formats.gptq.evidence import label_evidence


def words_hex(words) -> list[str]:
    return [f"0x{w:08x}" for w in np.asarray(words).view(np.uint32).ravel()]


def int32_words(*hex_words: int) -> np.ndarray:
    return np.array(hex_words, np.uint64).astype(np.uint32).view(np.int32)


def tile_words(row_words: list[int], rows: int = 1) -> np.ndarray:
    return np.tile(int32_words(*row_words), (rows, 1))


def ones_fp16(shape) -> np.ndarray:
    return np.ones(shape, np.float16)


# -- GPTQ-2.3 test vectors ---------------------------------------------------------------------

VECTORS = [
    pytest.param(4, np.arange(32) % 16, ["0x76543210", "0xfedcba98", "0x76543210", "0xfedcba98"], id="4bit-k-mod-16"),
    pytest.param(3, np.arange(32) % 8, ["0x88fac688", "0xc688fac6", "0xfac688fa"], id="3bit-k-mod-8"),
    pytest.param(3, np.where(np.isin(np.arange(32), [10, 21]), 7, 0), ["0xc0000000", "0x80000001", "0x00000003"],
                 id="3bit-straddling-v10-v21"),
    pytest.param(2, np.arange(32) % 4, ["0xe4e4e4e4", "0xe4e4e4e4"], id="2bit-k-mod-4"),
    pytest.param(8, np.arange(32) % 256, [f"0x{4*i+3:02x}{4*i+2:02x}{4*i+1:02x}{4*i:02x}" for i in range(8)],
                 id="8bit-k-mod-256"),
]


@pytest.mark.parametrize(("bits", "column", "expected"), VECTORS)
def test_qweight_test_vectors(bits, column, expected):
    """GPTQ-2.3 test vectors: "codes k mod 16 ... 0x76543210, 0xfedcba98, ..." packed along K in qweight."""
    codes = np.tile(column[:, None], (1, 32))
    layer = gptq.pack(codes, np.ones((1, 32), int), ones_fp16((1, 32)), bits=bits, version="v1")
    assert layer.qweight.dtype == np.int32 and layer.qweight.shape == (bits, 32)
    for n in (0, 17, 31):
        assert words_hex(layer.qweight[:, n]) == expected


@pytest.mark.parametrize(("bits", "column", "expected"), VECTORS)
def test_qzeros_row_uses_the_same_vectors_along_n(bits, column, expected):
    """GPTQ-2.3: "The same vectors apply to one qzeros row when the 32 values are the fields of columns n = 0..31"."""
    layer = gptq.pack(np.zeros((32, 32), int), column[None, :], ones_fp16((1, 32)), bits=bits, version="v2")
    assert layer.qzeros.shape == (1, bits)
    assert words_hex(layer.qzeros[0]) == expected


@pytest.mark.parametrize(("bits", "column", "expected"), VECTORS)
def test_test_vectors_unpack_to_their_codes(bits, column, expected):
    """QF-3 / GPTQ-2.3: the test-vector words unpack to the 32 codes they were made from."""
    words = int32_words(*(int(w, 16) for w in expected))
    np.testing.assert_array_equal(bitpack.unpack(words, bits), column)
    assert words_hex(bitpack.pack(column, bits)) == expected


# -- GPTQ-3.2 hand decode ----------------------------------------------------------------------

HAND_Q = np.array([7, 0, 15, 5, 10, 3, 12, 9])
S0, S1 = 0.5, 0.0999755859375  # float16 0x3800 and 0x2e66


def hand_layer() -> dict[str, np.ndarray]:
    """The GPTQ-3.2 worked example, built from its words: b=4, K=N=32, gs=16, v1."""
    scales = np.empty((2, 32), np.float16)
    scales[0] = np.array([0x3800], np.uint16).view(np.float16)[0]
    scales[1] = np.array([0x2E66], np.uint16).view(np.float16)[0]
    return {
        "qweight": tile_words([0x9C3A5F07] * 32, rows=4),
        "qzeros": np.concatenate([tile_words([0x76543210] * 4), tile_words([0x77777777] * 4)]),
        "scales": scales,
        "g_idx": (np.arange(32) // 16).astype(np.int32),
    }


def test_hand_decode_word_fields():
    """GPTQ-3.2: "every qweight word is 0x9c3a5f07 (int32 -1673896185); its fields ... are 7, 0, 15, 5, 10, 3, 12, 9"."""
    assert int(int32_words(0x9C3A5F07)[0]) == -1673896185
    codes, zeros = gptq.unpack(hand_layer(), bits=4, version="v1")
    np.testing.assert_array_equal(codes, np.tile(HAND_Q[np.arange(32) % 8, None], (1, 32)))
    np.testing.assert_array_equal(zeros, np.stack([np.arange(32) % 8 + 1, np.full(32, 8)]))


def test_hand_decode_v1_values():
    """GPTQ-3.2: "W[0, 0:8] = [3, -0.5, 7, 2, 4.5, 1, 5.5, 4]", "W[3, 0:8] = [1.5, -2, 5.5, 0.5, 3, -0.5, 4, 2.5]", "W[5, 2] = 4.5"."""
    w = gptq.dequantize(hand_layer(), bits=4, version="v1")
    assert w.dtype == np.float32 and w.shape == (32, 32)
    assert w[0, 0:8].tolist() == [3, -0.5, 7, 2, 4.5, 1, 5.5, 4]
    assert w[3, 0:8].tolist() == [1.5, -2, 5.5, 0.5, 3, -0.5, 4, 2.5]
    assert w[5, 2] == 4.5


def test_hand_decode_second_group_is_exact():
    """GPTQ-3.2: "for every n, W[n, 16:24] = [-0.0999755859375, -0.7998046875, 0.6998291015625, ...], all exact in float32"."""
    expected = [-0.0999755859375, -0.7998046875, 0.6998291015625, -0.2999267578125, 0.199951171875,
                -0.4998779296875, 0.39990234375, 0.0999755859375]
    w = gptq.dequantize(hand_layer(), bits=4, version="v1")
    for n in range(32):
        assert w[n, 16:24].tolist() == expected


def test_hand_decode_whole_matrix():
    """GPTQ-3.2: the hand rule W[n, k] = s[k // 16] * (q[k mod 8] - Z) holds for all 32 x 32 weights."""
    k, n = np.meshgrid(np.arange(32), np.arange(32))
    z = np.where(k < 16, n % 8 + 1, 8)
    s = np.where(k < 16, S0, S1)
    np.testing.assert_array_equal(gptq.dequantize(hand_layer(), bits=4, version="v1"), s * (HAND_Q[k % 8] - z))


def test_hand_decode_read_as_v2():
    """GPTQ-3.2: "Read as v2 ... W[0, 0:8] = [3.5, 0, 7.5, 2.5, 5, 1.5, 6, 4.5] and W[n, 16:24] = 0.0999755859375 * [0, -7, 8, -2, 3, -4, 5, 2]"."""
    w = gptq.dequantize(hand_layer(), bits=4, version="v2")
    assert w[0, 0:8].tolist() == [3.5, 0, 7.5, 2.5, 5, 1.5, 6, 4.5]
    assert w[9, 16:24].tolist() == [S1 * m for m in [0, -7, 8, -2, 3, -4, 5, 2]]


def test_hand_decode_writer_produces_the_words():
    """GPTQ-3.2: "Packing the codes and zero points above with a conforming v1 writer gives exactly these words"."""
    codes = np.tile(HAND_Q[np.arange(32) % 8, None], (1, 32))
    zeros = np.stack([np.arange(32) % 8 + 1, np.full(32, 8)])
    ref = hand_layer()
    layer = gptq.pack(codes, zeros, ref["scales"], bits=4, version="v1")
    for name in ("qweight", "qzeros", "scales", "g_idx"):
        np.testing.assert_array_equal(getattr(layer, name), ref[name], err_msg=name)


# -- GPTQ-3.4 the v1 all-ones field ------------------------------------------------------------


def test_strict_v1_writer_refuses_zero_point_0():
    """GPTQ-3.4: "a v1 writer refuses a zero point of 0 (use v2 instead)"."""
    zeros = np.tile([0, 5, 3, 0, 0, 9, 15, 1], (1, 4))
    with pytest.raises(QFormatsError) as exc:
        gptq.pack(np.zeros((32, 32), int), zeros, ones_fp16((1, 32)), bits=4, version="v1")
    assert exc.value.code == "gptq.zero.v1_unrepresentable"


@pytest.mark.parametrize("word", [pytest.param(0xFFFFFFFF, id="autogptq"), pytest.param(0x0E7EF23F, id="gptqmodel"),
                                  pytest.param(0x0E8FF24F, id="masked")])
def test_spec_reader_rejects_every_v1_writers_zero_0_word(word):
    """GPTQ-4.1: "No v1 word conforms: each has an all-ones field (GPTQ-3.4)", so the spec reader rejects it."""
    layer = {"qweight": np.zeros((4, 32), np.int32), "qzeros": tile_words([word] * 4),
             "scales": ones_fp16((1, 32)), "g_idx": np.zeros(32, np.int32)}
    with pytest.raises(QFormatsError) as exc:
        gptq.dequantize(layer, bits=4, version="v1")
    assert exc.value.code == "gptq.zero.v1_unrepresentable"


# -- GPTQ-4.1 / 4.2 the eight-column word ------------------------------------------------------

EIGHT = [0, 5, 3, 0, 0, 9, 15, 1]


def eight_column_layer(*, writer=None, version="v1"):
    return gptq.pack(np.zeros((32, 32), int), np.tile(EIGHT, (1, 4)), ones_fp16((1, 32)), bits=4,
                     version=version, writer=writer)


@pytest.mark.parametrize(("writer", "word"), [
    pytest.param("autogptq", "0xffffffff", id="autogptq-or-bleed"),
    pytest.param("gptqmodel", "0x0e7ef23f", id="gptqmodel-borrow"),
    pytest.param("gptqmodel_legacy_int3", "0x0e7ef23f", id="gptqmodel-legacy-at-4-bits"),
    pytest.param("masked", "0x0e8ff24f", id="masked"),
])
def test_eight_column_writer_words(writer, word):
    """GPTQ-4.1 worked example: zero points [0, 5, 3, 0, 0, 9, 15, 1] under each v1 writer ("0xffffffff", "0x0e7ef23f", "0x0e8ff24f")."""
    assert words_hex(eight_column_layer(writer=writer).qzeros) == [word] * 4


def test_eight_column_v2_word():
    """GPTQ-4.1 worked example: "v2 (conforming, f = Z) | 0x1f900350"."""
    assert words_hex(eight_column_layer(version="v2").qzeros) == ["0x1f900350"] * 4


WRAP = {"autogptq": [0] * 8, "gptqmodel": [0, 4, 3, 0, 15, 8, 15, 1], "masked": EIGHT}
PLUS_ONE = {"autogptq": [16] * 8, "gptqmodel": [16, 4, 3, 16, 15, 8, 15, 1], "masked": [16, 5, 3, 16, 16, 9, 15, 1]}
WORD_ADD = {"autogptq": [0, 1, 1, 1, 1, 1, 1, 1], "gptqmodel": EIGHT, "masked": [0, 6, 3, 0, 1, 10, 15, 1]}
READER_TABLE = [
    pytest.param(reader, writer, table[writer], id=f"{reader}-reads-{writer}")
    for reader, table in [("autogptq_cuda_old", WRAP), ("autogptq_cuda_kernel", WRAP), ("exllama", WRAP),
                          ("autogptq_cuda", PLUS_ONE), ("vllm_gptq_gemm", PLUS_ONE), ("gptqmodel", WORD_ADD),
                          ("gptqmodel_legacy_int3", WORD_ADD)]
    for writer in ("autogptq", "gptqmodel", "masked")
]


@pytest.mark.parametrize(("reader", "writer", "zeros"), READER_TABLE)
def test_eight_column_reader_table(reader, writer, zeros):
    """GPTQ-4.1 worked example: the zero points each reader rule recovers from each v1 word (codes 0, scale 1, so W = -Z)."""
    w = gptq.dequantize(eight_column_layer(writer=writer), bits=4, version="v1", reader=reader)
    assert (-w[:8, 0]).tolist() == zeros
    assert (-w[:, 5]).tolist() == zeros * 4  # every row of the layer, every column block


def test_gptqmodel_word_add_of_masked_word():
    """GPTQ-7.3: "the masked word 0x0e8ff24f + 0x11111111 = 0x1fa10360, fields 0, 6, 3, 0, 1, 10, 15, 1"."""
    assert (0x0E8FF24F + 0x11111111) & 0xFFFFFFFF == 0x1FA10360
    assert bitpack.unpack(int32_words(0x1FA10360), 4).tolist() == [0, 6, 3, 0, 1, 10, 15, 1]
    assert (0x76543210 + 0x11111111) & 0xFFFFFFFF == 0x87654321


@settings(deadline=None, max_examples=25)
@given(bits=st.sampled_from([2, 3, 4, 8]), seed=st.integers(0, 2**32 - 1))
def test_all_v1_writers_conform_when_every_zero_is_at_least_1(bits, seed):
    """GPTQ-4.3: "When every zero point is in 1..maxq, the autogptq, gptqmodel and masked writers all produce exactly the conforming v1 words"."""
    rng = np.random.default_rng(seed)
    zeros = rng.integers(1, 1 << bits, (2, 64))
    args = (np.zeros((64, 64), int), zeros, ones_fp16((2, 64)))
    spec = gptq.pack(*args, bits=bits, version="v1").qzeros
    writers = ["autogptq", "gptqmodel", "masked"] + (["gptqmodel_legacy_int3"] if bits != 3 else [])
    for writer in writers:
        np.testing.assert_array_equal(gptq.pack(*args, bits=bits, version="v1", writer=writer).qzeros, spec,
                                      err_msg=writer)


def test_autogptq_cuda_kernel_reads_8bit_symmetric_zero_as_0():
    """GPTQ-4.4: "a symmetric zero point 128 is stored as 127 and read as (127 + 1) & 0x0f = 0"."""
    layer = gptq.pack(np.full((32, 32), 128), np.full((1, 32), 128), ones_fp16((1, 32)), bits=8, version="v1")
    assert words_hex(layer.qzeros[0]) == ["0x7f7f7f7f"] * 8
    assert not gptq.dequantize(layer, bits=8, version="v1").any()  # spec: 1 * (128 - 128)
    assert (gptq.dequantize(layer, bits=8, version="v1", reader="autogptq_cuda_kernel") == 128).all()


def test_gptqmodel_legacy_int3_symmetric_words():
    """GPTQ-4.5: a legacy sym 3-bit v1 export "stores 0x00000000, 0xb6db6db7, 0x49249249" and a per-field reader sees "[1 x 10, 5, 4 x 11, 3 x 10]"."""
    layer = gptq.pack(np.zeros((32, 32), int), np.full((1, 32), 4), ones_fp16((1, 32)), bits=3, version="v1",
                      writer="gptqmodel_legacy_int3")
    assert words_hex(layer.qzeros[0]) == ["0x00000000", "0xb6db6db7", "0x49249249"]
    seen = -gptq.dequantize(layer, bits=3, version="v1", reader="gptqmodel")[:, 0]
    assert seen.tolist() == [1] * 10 + [5] + [4] * 11 + [3] * 10
    assert (gptq.dequantize(layer, bits=3, version="v1", reader="gptqmodel_legacy_int3") == -4).all()


def test_gptqmodel_legacy_int3_signature():
    """GPTQ-8.5: "the word pattern 0x00000000, 0xb6db6db7, 0x49249249 identifies GPTQModel v0.9.0 - v6.x"."""
    qzeros = tile_words([0x00000000, 0xB6DB6DB7, 0x49249249])
    ev = label_evidence(qzeros, 3, sym=True)
    assert ev.verdict == "v1"
    assert "gptqmodel-legacy-int3" in ev.signatures


def test_autogptq_bleed_signature():
    """GPTQ-8.5: "all-ones fields that run up to the top field of their word identify an AutoGPTQ-family writer"."""
    ev = label_evidence(eight_column_layer(writer="autogptq").qzeros, 4)
    assert "autogptq-or-bleed" in ev.signatures


# -- GPTQ-5 g_idx ------------------------------------------------------------------------------

DIAG_H = np.array([0.5, 2.0, 0.1, 3.0, 1.0, 0.7, 0.2, 1.5])
ACT_G_IDX = [1, 0, 2, 0, 1, 1, 2, 0]


def act_order_inputs():
    codes = np.tile(np.arange(8)[:, None] + 8, (1, 32))
    scales = np.tile(np.array([1, 2, 4], np.float16)[:, None], (1, 32))
    return codes, np.full((3, 32), 8), scales


def test_act_order_g_idx_from_diag_h():
    """GPTQ-5.3 worked example: diag(H) = [0.5, 2.0, 0.1, 3.0, 1.0, 0.7, 0.2, 1.5], gs = 3 gives "g_idx = [1, 0, 2, 0, 1, 1, 2, 0]"."""
    weight = np.linspace(-1, 1, 32 * 8, dtype=np.float32).reshape(32, 8)
    layer = gptq.quantize(weight, bits=4, group_size=3, sym=True, version="v1", act_order=DIAG_H)
    assert layer.g_idx.tolist() == ACT_G_IDX
    assert layer.scales.shape == (3, 32)


def test_act_order_decode_uses_g_idx():
    """GPTQ-5.3 worked example: codes k + 8, zero 8, scales [1, 2, 4] give "W[n, :] = [0, 1, 8, 3, 8, 10, 24, 7]"."""
    codes, zeros, scales = act_order_inputs()
    layer = gptq.pack(codes, zeros, scales, bits=4, g_idx=np.array(ACT_G_IDX, np.int32), version="v1")
    w = gptq.dequantize(layer, bits=4, version="v1")
    assert w.shape == (32, 8)
    for n in (0, 31):
        assert w[n].tolist() == [0, 1, 8, 3, 8, 10, 24, 7]


def test_reader_ignoring_g_idx_refuses_uneven_groups():
    """GPTQ-4.2: autogptq_cuda_old "assumes k // gs, fails unless K % gs == 0" (K = 8, gs = 3 in the GPTQ-5.3 example)."""
    codes, zeros, scales = act_order_inputs()
    layer = gptq.pack(codes, zeros, scales, bits=4, g_idx=np.array(ACT_G_IDX, np.int32), version="v1")
    with pytest.raises(QFormatsError) as exc:
        gptq.dequantize(layer, bits=4, version="v1", reader="autogptq_cuda_old", group_size=3)
    assert exc.value.code == "gptq.quirk.unsupported"


@pytest.mark.parametrize(("g_idx", "code"), [
    pytest.param([0, 0, 0, 0, 1, 1, 2, 2], "gptq.g_idx.group_sizes", id="group-0-holds-4-rows"),
    pytest.param([1, 0, 3, 0, 1, 1, 2, 0], "gptq.g_idx.range", id="group-3-of-3"),
])
def test_writer_rejects_bad_g_idx(g_idx, code):
    """GPTQ-5.3 worked example: "[0, 0, 0, 0, 1, 1, 2, 2] violates GPTQ-5.2"; "[1, 0, 3, 0, 1, 1, 2, 0] violates GPTQ-5.1"."""
    codes, zeros, scales = act_order_inputs()
    with pytest.raises(QFormatsError) as exc:
        gptq.pack(codes, zeros, scales, bits=4, g_idx=np.array(g_idx, np.int32), version="v1")
    assert exc.value.code == code


@pytest.mark.parametrize(("g_idx", "code"), [
    pytest.param([0, 0, 0, 0, 1, 1, 2, 2], "gptq.g_idx.group_sizes", id="group-0-holds-4-rows"),
    pytest.param([1, 0, 3, 0, 1, 1, 2, 0], "gptq.g_idx.range", id="group-3-of-3"),
])
def test_reader_rejects_bad_g_idx(g_idx, code):
    """GPTQ-5.1/5.2 and README "a conforming reader rejects every non-conforming input": a stored bad g_idx is refused on decode."""
    codes, zeros, scales = act_order_inputs()
    layer = dict(gptq.pack(codes, zeros, scales, bits=4, g_idx=np.array(ACT_G_IDX, np.int32), version="v1").tensors)
    layer["g_idx"] = np.array(g_idx, np.int32)
    with pytest.raises(QFormatsError) as exc:
        gptq.dequantize(layer, bits=4, version="v1", group_size=3)
    assert exc.value.code == code


def test_non_trivial_g_idx_without_desc_act_is_a_warning():
    """GPTQ-5.4: "A validator MUST report it as a warning"; desc_act=true with the same g_idx is normal."""
    g_idx = np.array(ACT_G_IDX, np.int32)
    found = checks.g_idx_findings(g_idx, 3, desc_act=False)
    assert [(f.code, f.severity, f.clause) for f in found] == [("gptq.g_idx.ignored_without_desc_act", "warning", "GPTQ-5.4")]
    assert checks.g_idx_findings(g_idx, 3, desc_act=True) == []
    assert checks.g_idx_findings(np.arange(8, dtype=np.int32) // 3, 3, desc_act=False) == []


def test_group_size_minus_one_is_one_group():
    """GPTQ-5.5: "group_size = -1 means one group of K rows: G = 1, g_idx all zeros, scales and qzeros have one row"."""
    weight = np.linspace(-1, 1, 32 * 64, dtype=np.float32).reshape(32, 64)
    layer = gptq.quantize(weight, bits=4, group_size=-1, sym=True, version="v1")
    assert layer.g_idx.tolist() == [0] * 64
    assert layer.scales.shape == (1, 32) and layer.qzeros.shape == (1, 4)


# -- GPTQ-7 conversion -------------------------------------------------------------------------


def test_v1_to_v2_conversion_example():
    """GPTQ-7.1 worked example: "row 0 0x76543210 ... becomes 0x87654321 (int32 -2023406815), row 1 0x77777777 becomes 0x88888888"."""
    v2 = gptq.convert(hand_layer(), bits=4, to="v2")
    assert words_hex(v2.qzeros[0]) == ["0x87654321"] * 4 and words_hex(v2.qzeros[1]) == ["0x88888888"] * 4
    assert int(v2.qzeros[0, 0]) == -2023406815
    for name in ("qweight", "scales", "g_idx"):
        np.testing.assert_array_equal(getattr(v2, name), hand_layer()[name], err_msg=name)
    np.testing.assert_array_equal(gptq.dequantize(v2, bits=4, version="v2"),
                                  gptq.dequantize(hand_layer(), bits=4, version="v1"))
    back = gptq.convert(v2, bits=4, to="v1")
    np.testing.assert_array_equal(back.qzeros, hand_layer()["qzeros"])


def test_v2_to_v1_refuses_zero_point_0_with_count():
    """GPTQ-7.2 worked example: a v2 row of four words 0x1f900350 "has 12 zero points of 0 and is refused"."""
    with pytest.raises(QFormatsError) as exc:
        gptq.convert(eight_column_layer(version="v2"), bits=4, to="v1")
    assert exc.value.code == "gptq.zero.v2_not_representable_in_v1"
    assert "12 zero points of 0" in exc.value.message


def test_v1_to_v2_refuses_all_ones_field():
    """GPTQ-7.1: "an all-ones v1 field is refused (GPTQ-3.4, gptq.zero.v1_unrepresentable)"."""
    with pytest.raises(QFormatsError) as exc:
        gptq.convert(eight_column_layer(writer="masked"), bits=4, to="v2")
    assert exc.value.code == "gptq.zero.v1_unrepresentable"


# -- GPTQ-8 label evidence ---------------------------------------------------------------------

SYM_TABLE = [
    (2, "v1", ["0x55555555"] * 2, [1431655765] * 2),
    (2, "v2", ["0xaaaaaaaa"] * 2, [-1431655766] * 2),
    (3, "v1", ["0xdb6db6db", "0xb6db6db6", "0x6db6db6d"], [-613566757, -1227133514, 1840700269]),
    (3, "v2", ["0x24924924", "0x49249249", "0x92492492"], [613566756, 1227133513, -1840700270]),
    (4, "v1", ["0x77777777"] * 4, [2004318071] * 4),
    (4, "v2", ["0x88888888"] * 4, [-2004318072] * 4),
    (8, "v1", ["0x7f7f7f7f"] * 8, [2139062143] * 8),
    (8, "v2", ["0x80808080"] * 8, [-2139062144] * 8),
]


def sym_layer(bits, version):
    return gptq.pack(np.zeros((32, 32), int), np.full((1, 32), 1 << (bits - 1)), ones_fp16((1, 32)), bits=bits,
                     version=version)


@pytest.mark.parametrize(("bits", "version", "hex_words", "int_words"),
                         [pytest.param(*row, id=f"{row[0]}bit-{row[1]}") for row in SYM_TABLE])
def test_symmetric_word_table(bits, version, hex_words, int_words):
    """GPTQ-8.1 table: symmetric zero 2^(b-1) packs to the listed words (hex and int32) for one 32-column block."""
    qzeros = sym_layer(bits, version).qzeros
    assert words_hex(qzeros[0]) == hex_words
    assert qzeros[0].tolist() == int_words


@pytest.mark.parametrize(("bits", "version"), [pytest.param(r[0], r[1], id=f"{r[0]}bit-{r[1]}") for r in SYM_TABLE])
@pytest.mark.parametrize("sym", [True, None], ids=["sym-declared", "sym-unknown"])
def test_symmetric_words_decide_the_label_exactly(bits, version, sym):
    """GPTQ-8.1: "If every field equals the v1 value the zeros are v1; if every field equals the v2 value they are v2; the verdict is certain"."""
    ev = label_evidence(sym_layer(bits, version).qzeros, bits, sym=sym)
    assert ev.verdict == version
    assert ev.method == "symmetric-exact"


def test_v2_symmetric_zeros_labelled_v1_read_one_too_high():
    """GPTQ-8.3: "A v2 checkpoint labelled gptq is decoded by every v1 reader with every zero point one too high"; Marlin ignores qzeros."""
    layer = gptq.pack(np.full((32, 32), 8), np.full((1, 32), 8), ones_fp16((1, 32)), bits=4, version="v2")
    assert (gptq.dequantize(layer, bits=4, version="v1") == -1).all()  # 1 * (8 - 9)
    for reader in ("autogptq_cuda_old", "autogptq_cuda", "exllama", "vllm_gptq_gemm", "gptqmodel"):
        assert (gptq.dequantize(layer, bits=4, version="v1", reader=reader) == -1).all(), reader
    assert not gptq.dequantize(layer, bits=4, version="v1", reader="marlin").any()
    assert label_evidence(layer.qzeros, 4, sym=True).verdict == "v2"


def statistical_layer(version):
    """GPTQ-8.2 worked example: each column holds codes Z - 1, Z, Z + 1 equally often (K = 96, one group)."""
    z = 1 + np.arange(32) % 14
    codes = z[None, :] + (np.arange(96) % 3)[:, None] - 1
    return gptq.pack(codes, z[None, :], ones_fp16((1, 32)), bits=4, version=version, group_size=-1)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_asymmetric_statistical_example(version):
    """GPTQ-8.2 worked example: "Stored as v2, d = 0: v2. Stored as v1, d = 1: v1"."""
    layer = statistical_layer(version)
    ev = label_evidence(layer.qzeros, 4, qweight=layer.qweight, g_idx=layer.g_idx, sym=False)
    assert ev.method == "asymmetric-statistical"
    assert ev.statistic == (1.0 if version == "v1" else 0.0)
    assert ev.verdict == version


def test_8bit_asymmetric_is_undetermined():
    """GPTQ-8.4: "Without sym=true the verdict for 8-bit zeros is undetermined"."""
    z = 1 + np.arange(32) % 200
    codes = z[None, :] + (np.arange(96) % 3)[:, None] - 1
    layer = gptq.pack(codes, z[None, :], ones_fp16((1, 32)), bits=8, version="v2", group_size=-1)
    ev = label_evidence(layer.qzeros, 8, qweight=layer.qweight, g_idx=layer.g_idx, sym=False)
    assert ev.verdict == "undetermined"


# -- GPTQ-9 reference quantizer ----------------------------------------------------------------


def test_quantizer_seed_example():
    """GPTQ-9 worked example: 4-bit, weights -1.5 .. 3.0 give "scale = 4.5 / 15 ... stored as float16 0.300048828125, zero point 5", codes 0 and 15."""
    weight = np.zeros((32, 8), np.float32)
    weight[:, 0], weight[:, 1] = -1.5, 3.0
    layer = gptq.quantize(weight, bits=4, group_size=-1, sym=False, version="v1")
    codes, zeros = gptq.unpack(layer, bits=4, version="v1")
    assert float(layer.scales[0, 0]) == 0.300048828125
    assert zeros[0].tolist() == [5] * 32
    assert codes[:, 0].tolist() == [0, 15, 5, 5, 5, 5, 5, 5]
    assert gptq.dequantize(layer, bits=4, version="v1")[0, :2].tolist() == [-1.500244140625, 3.00048828125]


def test_quantizer_degenerate_group():
    """GPTQ-9 step 3: "where xmin == 0 and xmax == 0 (all weights zero), xmin = -1, xmax = +1" (sym 4-bit: scale 2/15, zero 8)."""
    layer = gptq.quantize(np.zeros((32, 8), np.float32), bits=4, group_size=-1, sym=True, version="v1")
    codes, zeros = gptq.unpack(layer, bits=4, version="v1")
    assert float(layer.scales[0, 0]) == 0.13330078125  # float16 nearest to float32(2) / 15
    assert (zeros == 8).all() and (codes == 8).all()
    assert not gptq.dequantize(layer, bits=4, version="v1").any()


def test_quantizer_symmetric_group_without_negatives_keeps_xmin_0():
    """GPTQ-9 step 2: "A symmetric group with no negative weight keeps xmin = 0" (weights 0 .. 1.5: scale 1.5/15, zero 8)."""
    weight = np.zeros((32, 8), np.float32)
    weight[:, 1] = 1.5
    layer = gptq.quantize(weight, bits=4, group_size=-1, sym=True, version="v1")
    assert float(layer.scales[0, 0]) == float(np.float16(0.1))  # 1.5 / 15, not 2 * 1.5 / 15
    codes, _ = gptq.unpack(layer, bits=4, version="v1")
    assert codes[1, 0] == 15  # round(1.5 / 0.0999755859375) + 8 = 23, clamped to maxq
