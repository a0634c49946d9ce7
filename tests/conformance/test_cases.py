"""The case matrix (DESIGN.md §5): what the generators promise, pinned bytes, and expectations computed
by an independent route (the logical arrays, gguf-py, the real tools' shipped vectors)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import third_party_builder as tpb
from conformance.catalog import THIRD_PARTY, pinned_digests, third_party_cases
from qformats.cases import case_digest
from qformats.formats.gptq import cases as gptq_cases
from qformats.formats.q4_k import cases as q4k_cases
from qformats.formats.registry import FACES, all_cases


def _read(fmt: str) -> list:
    """The reader matrix: conforming layers with a g_idx mode (not the no-g_idx and signed-zero extras)."""
    return [c for c in FACES["gptq"].cases() if c.format == fmt and "dequantize" in c.ops and c.expect == "values"
            and c.feature("g_idx")[0] in gptq_cases.G_IDX_MODES and "zeros:signed" not in c.features]


@pytest.mark.parametrize("fmt", ["gptq_v1", "gptq_v2"])
def test_gptq_matrix_covers_the_issue_product(fmt):
    """bits 2/3/4/8 x sym/asym x group size -1, 32, 128, short last group x trivial/act-order/static groups."""
    seen = {(c.feature("bits")[0], c.feature("sym")[0], c.feature("group_size")[0], "group:short_last" in c.features,
             c.feature("g_idx")[0]) for c in _read(fmt)}
    layouts = [("-1", False, ["trivial"]), ("32", False, gptq_cases.G_IDX_MODES), ("128", False, gptq_cases.G_IDX_MODES),
               ("128", True, gptq_cases.G_IDX_MODES)]
    want = {(b, s, gs, short, mode) for b, s in itertools.product("2348", ("true", "false"))
            for gs, short, modes in layouts for mode in modes}
    assert seen == want


def test_gptq_cases_hold_codes_and_zero_points_at_their_extremes():
    """Codes 0 and maxq, zero points 1 and maxq (and 0 in v2) appear in every asym layer."""
    for case in _read("gptq_v2"):
        maxq = (1 << case.params["bits"]) - 1
        assert {0, maxq} <= set(np.unique(case.aux["codes"]).tolist())
        if case.feature("sym") == ["false"]:
            assert {0, 1, maxq} <= set(np.unique(case.aux["zeros"]).tolist())


@pytest.mark.parametrize(("bits", "field"), gptq_cases.ZERO0_FIELDS)
def test_zero0_cases_store_an_all_ones_field_where_named(bits, field):
    """GPTQ-3.4: the v1 layer's field ``field`` of qzeros row 0 is all ones; read by hand, bit by bit."""
    case = next(c for c in FACES["gptq"].cases() if c.id == f"gptq_v1/read/b{bits}_asym_g32_zero0_field{field}")
    words = [int(w) & 0xFFFFFFFF for w in case.inputs["qzeros"][0]]
    stream = sum(w << (32 * i) for i, w in enumerate(words))       # little-endian word stream
    assert (stream >> (bits * field)) & ((1 << bits) - 1) == (1 << bits) - 1
    assert case.expect == "reject"


def test_gptq_reference_equals_the_logical_layer():
    """Every GPTQ reader case: the spec decode of the packed tensors equals s * (q - z) of the logical arrays."""
    for case in _read("gptq_v1") + _read("gptq_v2"):
        t = case.aux
        assert np.array_equal(gptq_cases.reference(case),
                              gptq_cases.logical_weight(t["codes"], t["zeros"], t["scales"], t["g_idx"])), case.id


def test_q4k_reference_equals_gguf_py():
    """Every generated q4_K decoder case: the reference equals gguf-py's dequantize bit for bit (NaN included)."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    for case in [c for c in FACES["q4_k"].cases() if "quantize" not in c.ops and "input:nonconforming" not in c.features]:
        ours = q4k_cases.reference(case)
        with np.errstate(invalid="ignore", over="ignore"):
            theirs = dequantize(case.inputs["blocks"], GGMLQuantizationType.Q4_K)
        assert np.array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32)) or \
            np.array_equal(ours, theirs, equal_nan=True), case.id


def test_every_generated_case_matches_its_pinned_sha256():
    """fixtures-check: regenerated cases are the bytes the manifest pinned (the runner refuses others)."""
    pinned = pinned_digests()
    made = {c.id: case_digest(c) for c in all_cases()}
    assert made == pinned


def test_case_ids_are_unique_across_generated_and_shipped_cases():
    ids = [c.id for c in all_cases()] + [c.id for name in FACES for c in third_party_cases(name)]
    assert len(ids) == len(set(ids))


def test_third_party_pack_regenerates_byte_identically():
    """conformance/data/third_party/ is exactly what the builder makes from fixtures/third_party/."""
    for name, blob in tpb.files().items():
        assert (THIRD_PARTY / name).read_bytes() == blob, name


def test_shipped_vectors_are_the_real_tools_output():
    """Each shipped GPTQ case's expected values equal the golden layer's truth; q4_K's llama.cpp's output."""
    gptq = third_party_cases("gptq")
    assert len(gptq) == 36 and {c.provenance["source"].split()[0] for c in gptq} == {"AutoGPTQ", "GPTQModel"}
    q4k = third_party_cases("q4_k")
    assert sum("dequantize" in c.ops for c in q4k) == 64 and sum(c.expect == "informative" for c in q4k) == 6
    assert len(third_party_cases("spqr")) == 6


def test_case_params_are_the_kernel_keywords_of_the_contract():
    """DESIGN.md §6, spec/kernels.md KC-1: reader cases carry exactly the scalar keywords the format's kernel
    call takes, plus ``None`` for an array keyword the layer lacks (``g_idx=None``, KC-1.3)."""
    for face in FACES.values():
        for case in face.cases():
            if "dequantize" in case.ops or "matmul" in case.ops:
                scalars = tuple(k for k, v in case.params.items() if v is not None)
                absent = [k for k, v in case.params.items() if v is None]
                assert scalars == face.kernel_keywords, case.id
                assert all(k not in case.inputs for k in absent) and set(absent) <= {"g_idx"}, case.id


def test_no_g_idx_cases_pass_none_and_decode_with_the_trivial_map():
    """GPTQ-2.1, KC-1.3: the kernel gets g_idx=None; the reference equals the layer with k // group_size."""
    cases = [c for c in FACES["gptq"].cases() if c.id.endswith("_no_g_idx")]
    assert len(cases) == 4
    for case in cases:
        assert case.params["g_idx"] is None and "g_idx" not in case.inputs
        t = case.aux
        assert np.array_equal(gptq_cases.reference(case), gptq_cases.logical_weight(t["codes"], t["zeros"], t["scales"], t["g_idx"]))


@pytest.mark.parametrize("face", ["gptq", "spqr", "q4_k"])
def test_signed_zero_cases_hold_negative_zeros(face):
    """KC-2.4: every case named signed_zeros decodes to some -0.0 (by an independent route for
    GPTQ: s * (q - z) of the logical arrays)."""
    cases = [c for c in FACES[face].cases() if "signed_zeros" in c.id]
    assert len(cases) >= 1
    for case in cases:
        w = FACES[face].reference(case)
        if face == "gptq":
            t = case.aux
            w = gptq_cases.logical_weight(t["codes"], t["zeros"], t["scales"], t["g_idx"])
        zero = w == 0
        assert (zero & np.signbit(w)).any(), case.id


def test_every_nonconforming_case_is_rejected_by_the_reference_with_its_clause():
    """KC-4.2: each */read/invalid/* case violates the rule it cites: the reference decoder rejects it with
    an error of that clause (or, for shapes and dtypes, the general tensor rule it specialises)."""
    from conformance import reference
    from qformats.errors import QFormatsError

    decoders = {"gptq_v1": reference.gptq_dequantize_v1, "gptq_v2": reference.gptq_dequantize_v2,
                "spqr": reference.spqr_dequantize, "q4_k": reference.q4_k_dequantize}
    general = {"QF-2.2", "QF-2.3", "QF-3.1", "QF-2.6", "GPTQ-2.2", "SPQR-2.1", "Q4K-5.2", "GGML-1.1", "GGML-1.2"}
    for name in ("gptq", "spqr", "q4_k"):
        for case in [c for c in FACES[name].cases() if "/invalid/" in c.id]:
            with pytest.raises(QFormatsError) as err:
                decoders[case.format](**case.inputs, **case.params)
            clause = err.value.clause
            assert clause == case.clauses[0] or {clause, case.clauses[0]} <= general, (case.id, clause)


# -- judge_packed: one judge for every packer (GPTQ-3, AWQ-3.2, CT-3.2) ------------------------------------

def _awq_pack_case():
    from qformats.formats.awq import cases as awq_cases
    return next(c for c in awq_cases.cases() if c.id == "awq_gemm/pack/g32")


def _awq_reference_packed(case):
    from qformats.formats import awq
    return {k: np.asarray(v) for k, v in awq.pack(case.inputs["codes"], case.inputs["zeros"], case.inputs["scales"],
                                                    group_size=32).tensors.items()}


def test_judge_packed_calls_the_reference_packers_bytes_identical():
    from qformats.formats.awq import cases as awq_cases
    case = _awq_pack_case()
    assert awq_cases.judge_pack(case, "pack", _awq_reference_packed(case), "mapping") == \
        ("pass", "decodes to the reference values; bytes identical to the reference packer")


def test_judge_packed_names_a_tensor_of_another_dtype_never_byte_identical():
    """GPTQ readers take g_idx in any integer dtype: int64 holds the same values, not the same bytes."""
    case = next(c for c in gptq_cases.cases() if c.id == "gptq_v2/pack/b4_asym_g32_trivial")
    arrays = gptq_cases._packed(dict(case.inputs), 4, 32, "v2")
    arrays["g_idx"] = arrays["g_idx"].astype(np.int64)
    assert gptq_cases.judge_pack(case, "pack", arrays, "mapping") == \
        ("pass", "decodes to the reference values; the reference packer's values in another dtype "
                 "(g_idx int64, reference int32)")


def test_judge_packed_reports_a_missing_tensor_as_an_error():
    from qformats.formats.awq import cases as awq_cases
    case = _awq_pack_case()
    arrays = _awq_reference_packed(case)
    del arrays["qzeros"]
    assert awq_cases.judge_pack(case, "pack", arrays, "mapping") == \
        ("error", "returned a mapping without qzeros; expected a mapping of qweight, qzeros, scales")


def test_judge_packed_reports_the_first_weight_that_decodes_differently():
    from qformats.formats.awq import cases as awq_cases
    from qformats.formats.awq.codec import pack_words, unpack_words
    case = _awq_pack_case()
    arrays = _awq_reference_packed(case)
    codes = unpack_words(arrays["qweight"])
    codes[0, 1] ^= 1                                      # one code of input row 0, output column 1
    arrays["qweight"] = pack_words(codes)
    status, detail = awq_cases.judge_pack(case, "pack", arrays, "mapping")
    assert status == "fail" and detail.startswith("1 / 4096 weights decode differently; first at [1, 0]: ")


def test_judge_packed_fails_a_layer_the_reader_rejects():
    from qformats.formats.awq import cases as awq_cases
    case = _awq_pack_case()
    arrays = _awq_reference_packed(case)
    arrays["scales"] = arrays["scales"].copy()
    arrays["scales"][0, 0] = np.nan
    status, detail = awq_cases.judge_pack(case, "pack", arrays, "mapping")
    assert status == "fail" and detail.startswith("wrote a non-conforming layer: ") and "NaN" in detail


def test_judge_packed_lists_every_missing_tensor():
    from qformats.formats.awq import cases as awq_cases
    case = _awq_pack_case()
    arrays = _awq_reference_packed(case)
    del arrays["qzeros"], arrays["scales"]
    assert awq_cases.judge_pack(case, "pack", arrays, "mapping") == \
        ("error", "returned a mapping without qzeros, scales; expected a mapping of qweight, qzeros, scales")


def _ct_pack(case_id):
    from qformats.formats.ctensors import cases as ct_cases
    case = next(c for c in ct_cases.cases() if c.id == case_id)
    return ct_cases, case, ct_cases._packed(dict(case.inputs), case.params["num_bits"], case.params["group_size"])


def test_judge_packed_names_every_tensor_of_another_dtype():
    """CT-2.1: float32 scales holding the float16 values and an int32 weight_shape decode the same."""
    ct_cases, case, arrays = _ct_pack("ctensors_pack/pack/b4_sym_g32")
    arrays["weight_scale"] = arrays["weight_scale"].astype(np.float32)
    arrays["weight_shape"] = arrays["weight_shape"].astype(np.int32)
    assert ct_cases.judge_pack(case, "pack", arrays, "mapping") == \
        ("pass", "decodes to the reference values; the reference packer's values in another dtype "
                 "(weight_scale float32, reference float16; weight_shape int32, reference int64)")


def _ct_pack_case(case_id: str):
    from qformats.formats.ctensors import cases as ct_cases
    return ct_cases, next(c for c in ct_cases.cases() if c.id == case_id)


def test_ct_judge_pack_fails_a_writer_setting_the_first_padding_bit():
    """CT-2.3 "a writer MUST write zeros" after a row's last value: 3 bits x 80 values use 240 of 256 bits,
    so bit 240 (bit 16 of the row's last word) is the first padding bit; a packer that sets it fails."""
    ct_cases, case = _ct_pack_case("ctensors_pack/pack/b3_sym_g16_k80")
    arrays = ct_cases._packed(dict(case.inputs), 3, 16)
    arrays["weight_packed"] = arrays["weight_packed"].copy()
    arrays["weight_packed"][5, -1] |= np.int32(1 << 16)
    assert ct_cases.judge_pack(case, "pack", arrays, "mapping") == (
        "fail", "wrote a non-conforming layer: 'weight_packed' must be zero bits after the last value of each "
                "packed row (CT-2.3: a writer MUST write zeros) (got 1 rows with bits set) "
                "[ctensors.padding.nonzero, CT-2.3]")


def test_ct_judge_pack_holds_the_last_values_top_bit_to_the_values_not_the_padding():
    """One bit below: bit 239 is the top bit of value 79, so setting it changes a weight (a value failure)."""
    ct_cases, case = _ct_pack_case("ctensors_pack/pack/b3_sym_g16_k80")
    arrays = ct_cases._packed(dict(case.inputs), 3, 16)
    arrays["weight_packed"] = arrays["weight_packed"].copy()
    arrays["weight_packed"][5, -1] ^= np.int32(1 << 15)
    status, detail = ct_cases.judge_pack(case, "pack", arrays, "mapping")
    assert status == "fail" and detail.startswith("1 / 1920 weights decode differently; first at [5, 79]: ")


def test_ct_judge_pack_fails_padding_bits_in_zero_points():
    """CT-2.5: zero points are packed along the output axis, 24 rows x 3 bits = 72 of 96 bits: bit 72 of a
    column's stream (bit 8 of its last word) is padding."""
    ct_cases, case = _ct_pack_case("ctensors_pack/pack/b3_asym_g16_k80")
    arrays = ct_cases._packed(dict(case.inputs), 3, 16)
    arrays["weight_zero_point"] = arrays["weight_zero_point"].copy()
    arrays["weight_zero_point"][-1, 2] |= np.int32(1 << 8)
    status, detail = ct_cases.judge_pack(case, "pack", arrays, "mapping")
    assert status == "fail" and "'weight_zero_point' must be zero bits after the last value" in detail
