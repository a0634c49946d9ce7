"""The SpQR codec's refusals asserted whole, its limits at the limit and one past, and the behaviours the golden
layers leave unpinned (issue 33: tests with teeth; `make mutation MODULE=qformats/formats/spqr/codec.py`).

Expected values come from spqr_quant 0.2.0's own bytes (fixtures/third_party/spqr_quant, and the worked tile of
spec/spqr.md §2.6, which that tool produced), from the words of spec/spqr.md (field layout SPQR-2.2, SO byte order
SPQR-2.3, binary32 accumulation SPQR-5.2, float16 bit patterns 0x3c00 = 1.0 and so on), or are properties; none
comes from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats.formats import spqr
from qformats.formats.spqr import codec
from whole_error import refusal, whole

LAYERS = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "spqr_quant" / "layers"
CSR = LAYERS / "p01_csr_actorder_64x128_1pct.safetensors"           # CSR, 64 x 128, 83 outliers
EMPTY_CSR = LAYERS / "p03_csr_identity_32x64_nooutliers.safetensors"  # col_vals float32[0] (SPQR-7.2)
RELEASE = ("dense_weights", "row_offsets", "col_vals", "in_perm")
DIMS = "of shape (m, n) with m, n positive multiples of 16 and n <= 65536"
STATS = ("quant_layer_scale_qq_scale", "quant_layer_scale_qq_zero", "quant_layer_zero_qq_scale",
         "quant_layer_zero_qq_zero")


def golden(path: Path = CSR) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(release tensors, legacy dict) of one spqr_quant golden layer."""
    t = load_file(path)
    return ({k: t[k].copy() for k in RELEASE},
            {k[len("legacy."):]: v.copy() for k, v in t.items() if k.startswith("legacy.")})


def tile_legacy() -> dict[str, np.ndarray]:
    """The worked tile of spec/spqr.md §2.6 (m = 16, n = 32), as the SpQR quantizer saves it."""
    m, n = 16, 32
    r, c = np.arange(m)[:, None], np.arange(n)[None, :]
    return {
        "quant_weights": ((32 * r + c) % 8).astype(np.int8),
        "quant_layer_scale": ((r.T + np.arange(2)[:, None]) % 8).astype(np.int8).reshape(2, 1, 16),
        "quant_layer_zeros": ((3 * r.T + np.arange(2)[:, None]) % 8).astype(np.int8).reshape(2, 1, 16),
        "quant_layer_scale_qq_scale": np.array([0.001, 0.002], np.float16).reshape(2, 1, 1),
        "quant_layer_scale_qq_zero": np.array([-1.5, -0.5], np.float16).reshape(2, 1, 1),
        "quant_layer_zero_qq_scale": np.array([0.75, 0.5], np.float16).reshape(2, 1, 1),
        "quant_layer_zero_qq_zero": np.array([-2.25, 1.0], np.float16).reshape(2, 1, 1),
        "outliers_matrix.indices": np.array([[0, 5, 5], [3, 20, 31]]),
        "outliers_matrix.values": np.array([1.0, -0.125, 2.5], np.float16),
        "perm": np.arange(n)[::-1].astype(np.int32),
    }


TILE_CV = [0x3C000003, 0xB0000014, 0x4100001F]     # spec §2.6: spqr_quant's col_vals of the worked tile


def pack_args(m=16, n=32):
    """Zero codes and statistics for pack_dense: q, s_code, z_code, then the four float16 statistics."""
    codes = [np.zeros((m, n), np.int8), np.zeros((m, n // 16), np.int8), np.zeros((m, n // 16), np.int8)]
    return codes + [np.zeros((m // 16, n // 16), np.float16) for _ in range(4)]


# -- pack_dense, unpack_dense, second_order (SPQR-2.2, SPQR-2.3) -----------------------------------------------------


def test_pack_refuses_a_code_one_past_seven_naming_it():
    """SPQR-2 (pack_dense): a code of 8 would spill into the next 3-bit field; the largest bad code is named."""
    args = pack_args()
    args[0][3, 4] = 8
    assert whole(lambda: codec.pack_dense(*args)) == refusal("bits.value_range", "q", "3-bit codes in [0, 7]", 8)


def test_pack_refuses_a_negative_code_naming_it():
    """SPQR-2 (pack_dense): codes below 0 are refused, the smallest is named."""
    args = pack_args()
    args[1][2, 1] = -1
    assert whole(lambda: codec.pack_dense(*args)) == refusal("bits.value_range", "s_code", "3-bit codes in [0, 7]", -1)


def test_pack_keeps_code_seven_in_its_field():
    """SPQR-2.2: code 7 (the limit) is stored whole: q_0 at bits 6..8, z_code at bits 3..5, s_code at bits 0..2."""
    q, s, z, *stats = pack_args()
    q[0, 0], s[0, 0], z[0, 0] = 7, 7, 7
    word = int(codec.pack_dense(q, s, z, *stats).view(np.uint64)[0])
    assert word == 0b111_111_111


def test_pack_refuses_float_codes():
    """SPQR-2 (pack_dense): codes are integers; a float array is refused by dtype."""
    q, *rest = pack_args()
    assert whole(lambda: codec.pack_dense(q.astype(np.float32), *rest)) == refusal(
        "bits.value_range", "q", "an integer array", "float32")


def test_pack_refuses_one_dimensional_codes():
    """SPQR-2.1: q is the (m, n) code matrix."""
    q, *rest = pack_args()
    assert whole(lambda: codec.pack_dense(q.reshape(-1), *rest)) == refusal(
        "tensor.shape", "q", "a 2-D code matrix (m, n)", (512,))


def test_pack_refuses_rows_not_a_multiple_of_sixteen():
    """SPQR-2.1: m and n MUST be positive multiples of 16."""
    q, *rest = pack_args()
    assert whole(lambda: codec.pack_dense(np.zeros((24, 32), np.int8), *rest)) == refusal(
        "spqr.dims", "q", DIMS, (24, 32))


def test_pack_refuses_ragged_codes():
    """QF-2 (pack_dense): a value that is no array is refused by name."""
    _, *rest = pack_args()
    assert whole(lambda: codec.pack_dense([[0], [0, 1]], *rest)) == refusal("tensor.dtype", "q", "an array", "list")


@pytest.mark.parametrize(("index", "name", "shape", "bad"), [
    (1, "s_code", (16, 2), (16, 3)), (2, "z_code", (16, 2), (16, 3)),
    (3, "w_s_s", (1, 2), (1, 3)), (4, "w_s_z", (1, 2), (1, 3)),
    (5, "w_z_s", (1, 2), (1, 3)), (6, "w_z_z", (1, 2), (1, 3)),
])
def test_pack_names_the_field_of_the_wrong_shape(index, name, shape, bad):
    """SPQR-2.2: codes per (row, column group), statistics per tile; a field of another shape is named."""
    args = pack_args()
    args[index] = np.zeros(bad, args[index].dtype)
    assert whole(lambda: codec.pack_dense(*args)) == refusal("tensor.shape", name, f"of shape {shape}", bad)


def test_pack_refuses_a_ragged_field_by_name():
    """QF-2 (pack_dense): a field that is no array is refused by its name."""
    args = pack_args()
    args[2] = [[0], [0, 1]]
    assert whole(lambda: codec.pack_dense(*args)) == refusal("tensor.dtype", "z_code", "an array", "list")


def test_unpack_gives_uint8_codes():
    """SPQR-2.2: the unpacked codes are uint8 (3-bit fields), whatever the stored word's dtype."""
    release, _ = golden()
    f = codec.unpack_dense(release["dense_weights"], 64, 128)
    assert (f.q.dtype, f.s_code.dtype, f.z_code.dtype) == (np.uint8, np.uint8, np.uint8)


def test_second_order_reads_the_even_row_copies():
    """SPQR-2.3: byte p of SO sits in rows 2p and 2p+1; the decoder reads the even rows."""
    so = np.full(16, 0xFF, np.uint8)
    so[0::2] = [0x00, 0x3C, 0x00, 0x40, 0x00, 0xC0, 0x00, 0x38]     # 1.0, 2.0, -2.0, 0.5 little-endian
    assert codec.second_order(so).tolist() == [1.0, 2.0, -2.0, 0.5]


def test_tile_words_refuses_a_ragged_dense_weights():
    """QF-2: a dense_weights that is no array is refused by name."""
    assert whole(lambda: codec.tile_words([[0], [0, 1]], 16, 16)) == refusal(
        "tensor.dtype", "dense_weights", "an array", "list")


# -- merge_col_vals, split_col_vals (SPQR-3.3) -----------------------------------------------------------------------


def test_merge_refuses_values_of_another_length():
    """SPQR-3.3: one value per column."""
    assert whole(lambda: codec.merge_col_vals(np.array([1, 2]), np.zeros(3, np.float16))) == refusal(
        "tensor.shape", "values", "1-D and as long as cols (2,)", (3,))


def test_merge_refuses_two_dimensional_columns():
    """SPQR-3.3: cols and values are 1-D, even when their shapes agree."""
    assert whole(lambda: codec.merge_col_vals(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.float16))) == refusal(
        "tensor.shape", "values", "1-D and as long as cols (2, 2)", (2, 2))


def test_merge_refuses_float_columns():
    """SPQR-3.3: columns are integers."""
    assert whole(lambda: codec.merge_col_vals(np.array([1.0]), np.zeros(1, np.float16))) == refusal(
        "bits.value_range", "cols", "an integer array", "float64")


def test_merge_refuses_column_65536_naming_it():
    """SPQR-3.3: a column is the low 16 bits; 65536 (one past) would spill into the value."""
    assert whole(lambda: codec.merge_col_vals(np.array([0, 65536]), np.zeros(2, np.float16))) == refusal(
        "bits.value_range", "cols", "16-bit columns in [0, 65535]", 65536)


def test_merge_refuses_a_negative_column_naming_it():
    """SPQR-3.3: columns are unsigned."""
    assert whole(lambda: codec.merge_col_vals(np.array([-1, 5]), np.zeros(2, np.float16))) == refusal(
        "bits.value_range", "cols", "16-bit columns in [0, 65535]", -1)


def test_merge_stores_column_65535_and_the_value_bits():
    """SPQR-3.3: entry = fp16_bits(value) << 16 | column; 65535 (the limit) fills the low half."""
    got = codec.merge_col_vals(np.array([65535]), np.array([1.0], np.float16))
    assert got.view(np.uint32).tolist() == [0x3C00FFFF]


@pytest.mark.parametrize(("cols", "values", "name"), [
    ([[0], [0, 1]], [1.0], "cols"), ([0], [[0.0], [1.0, 2.0]], "values")])
def test_merge_refuses_ragged_input_by_name(cols, values, name):
    """QF-2: an argument that is no array is refused by its name."""
    assert whole(lambda: codec.merge_col_vals(cols, values)) == refusal("tensor.dtype", name, "an array", "list")


def test_split_of_an_empty_set_gives_typed_empties():
    """SPQR-7.2: the float32[0] empty set splits into int64 columns and float16 values, both empty."""
    cols, vals = codec.split_col_vals(np.zeros(0, np.float32))
    assert (cols.dtype, cols.shape, vals.dtype, vals.shape) == (np.int64, (0,), np.float16, (0,))


# -- check_perm (SPQR-4.2) -------------------------------------------------------------------------------------------


def test_perm_of_floats_is_refused():
    """SPQR-4.2: the permutation holds integer indices."""
    assert whole(lambda: codec.check_perm(np.arange(4.0), 4, "perm", "spqr.in_perm.not_permutation")) == refusal(
        "spqr.in_perm.not_permutation", "perm", "a permutation of 0..3", "dtype float64")


def test_perm_of_another_length_is_refused():
    """SPQR-4.2: exactly n indices."""
    assert whole(lambda: codec.check_perm(np.arange(3), 4, "perm", "spqr.in_perm.not_permutation")) == refusal(
        "spqr.in_perm.not_permutation", "perm", "a permutation of 0..3", "length 3")


def test_perm_index_n_is_refused_at_its_first_position():
    """SPQR-4.2: indices lie in 0..n-1; n (one past) is named with the first position holding one."""
    p = np.array([0, 4, 4, 1])
    assert whole(lambda: codec.check_perm(p, 4, "perm", "spqr.in_perm.not_permutation")) == refusal(
        "spqr.in_perm.not_permutation", "perm", "a permutation of 0..3", "index 4 at position 1")


def test_perm_negative_index_is_refused():
    """SPQR-4.2: indices lie in 0..n-1; -1 is named."""
    p = np.array([0, 1, -1, 3])
    assert whole(lambda: codec.check_perm(p, 4, "perm", "spqr.in_perm.not_permutation")) == refusal(
        "spqr.in_perm.not_permutation", "perm", "a permutation of 0..3", "index -1 at position 2")


def test_perm_repeated_index_is_refused():
    """SPQR-4.2: each index once; the first index not seen exactly once is named with its count."""
    p = np.array([0, 2, 2, 3])
    assert whole(lambda: codec.check_perm(p, 4, "in_perm", "spqr.in_perm.not_permutation")) == refusal(
        "spqr.in_perm.not_permutation", "in_perm", "a permutation of 0..3", "index 1 appears 0 times")


def test_perm_with_index_n_minus_one_is_accepted_flat():
    """SPQR-4.2: n-1 (the limit) is an index; a 2-D perm is read flat, as int64 [n]."""
    got = codec.check_perm(np.array([[3, 0], [2, 1]], np.int32), 4, "perm", "spqr.in_perm.not_permutation")
    assert (got.dtype, got.tolist()) == (np.int64, [3, 0, 2, 1])


# -- outlier_mask, ptcsr_to_csr, to_csr (SPQR-3) ---------------------------------------------------------------------


def test_every_csr_entry_is_an_outlier_even_the_zero_entry():
    """SPQR-3.8: every CSR entry counts; only PTCSR slots of entry 0 are padding."""
    assert codec.outlier_mask(np.array([0, 5], np.int32), "csr").tolist() == [True, True]


def test_a_lone_ptcsr_padding_slot_is_no_outlier():
    """SPQR-3.6, 3.8: a PTCSR slot holding entry 0 is padding, also when it is the only slot."""
    assert codec.outlier_mask(np.zeros(1, np.int32), "ptcsr").tolist() == [False]


def test_ptcsr_to_csr_of_no_entries_gives_int32():
    """SPQR-3.3: col_vals is int32, also when empty."""
    ro, cv = codec.ptcsr_to_csr(np.zeros(2, np.int32), np.zeros(0, np.float32), 16)
    assert (ro.dtype, ro.tolist(), cv.dtype, cv.shape) == (np.int32, [0] * 17, np.int32, (0,))


def test_to_csr_of_the_float32_empty_set_gives_int32():
    """SPQR-7.2: to_csr turns spqr_quant's float32[0] empty set into int32[0]."""
    release, _ = golden(EMPTY_CSR)
    ro, cv = codec.to_csr(release)
    assert (ro.dtype, ro.tolist(), cv.dtype, cv.shape) == (np.int32, [0] * 33, np.int32, (0,))


def test_to_csr_keeps_a_csr_entry_of_zero():
    """SPQR-3.8: a CSR entry of column 0, value +0.0 is an outlier, not padding."""
    legacy = tile_legacy()
    legacy["outliers_matrix.indices"] = np.array([[0, 5, 5, 7], [3, 20, 31, 0]])
    legacy["outliers_matrix.values"] = np.array([1.0, -0.125, 2.5, 0.0], np.float16)
    ro, cv = codec.to_csr(spqr.from_legacy(legacy))
    assert ro.tolist() == [0, 1, 1, 1, 1, 1, 3, 3, 4] + [4] * 8
    assert cv.view(np.uint32).tolist() == [*TILE_CV, 0]


def test_to_csr_checks_the_given_rows():
    """SPQR-2.1: given m MUST agree with the tensors (64 x 128 has m*n/16 = 512 words, not 48*128/16)."""
    release, _ = golden()
    assert whole(lambda: codec.to_csr(release, m=48)) == refusal(
        "tensor.shape", "dense_weights", "of shape (384,) = m*n/16", (512,))


def test_to_csr_checks_the_given_columns():
    """SPQR-2.1: given n MUST agree with the tensors (in_perm holds n/2 words)."""
    release, _ = golden()
    assert whole(lambda: codec.to_csr(release, n=64)) == refusal(
        "tensor.shape", "in_perm", "of shape (32,) for n = 64", (64,))


# -- as_layer (SPQR-2.1) ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["m", "n"])
def test_as_layer_refuses_a_float_dimension_by_name(name):
    """SPQR-2.1: given dimensions MUST be integers."""
    release, _ = golden()
    assert whole(lambda: codec.as_layer(release, **{name: 64.0})) == refusal(
        "argument.invalid", name, "an integer or None", 64.0)


def test_as_layer_returns_a_built_layer_itself():
    """SPQR-2.1: a built layer with no dimensions given (or its own) is not checked again."""
    layer = spqr.SpQRLayer(golden()[0])
    assert codec.as_layer(layer) is layer and codec.as_layer(layer, m=64, n=128) is layer


def test_as_layer_checks_a_mapping_against_the_given_columns():
    """SPQR-2.1: a plain mapping is checked against the given n."""
    release, _ = golden()
    assert whole(lambda: codec.as_layer(release, m=64, n=64)) == refusal(
        "tensor.shape", "in_perm", "of shape (32,) for n = 64", (64,))


# -- dequantize (SPQR-5, SPQR-7.3) -----------------------------------------------------------------------------------


def test_int64_in_perm_is_refused_without_legacy():
    """SPQR-7.3: spqr_quant refuses the int64 in_perm of SpQR PR #47; the reference decoder reads it only on request."""
    release, _ = golden()
    release["in_perm"] = np.arange(128, dtype=np.int64)
    assert whole(lambda: codec.dequantize(release)) == refusal(
        "spqr.in_perm.int64", "in_perm",
        "int32[64] uint16 pairs (pass legacy=True to read the int64 variant of SpQR PR #47)", "int64[128]")


def test_outliers_accumulate_in_binary32():
    """SPQR-5.2: entries add in binary32, storage order, then round once to float16.

    Three entries at one position over a dense 0: 1.0, 2^-11, 2^-24. In binary32, 1 + 2^-11 + 2^-24 is a tie
    (2^-24 is half an ulp of 1) that rounds to even, 1 + 2^-11; that is halfway between float16 1.0 and 1 + 2^-10 and
    rounds to even, 1.0. (The exact sum would round up to 1 + 2^-10.)
    """
    dense = codec.pack_dense(*pack_args())                                  # every statistic 0: every weight 0
    cv = codec.merge_col_vals(np.array([0, 0, 0]), np.array([1.0, 2.0 ** -11, 2.0 ** -24], np.float16))
    layer = {"dense_weights": dense, "row_offsets": np.array([0, 3] + [3] * 15, np.int32), "col_vals": cv,
             "in_perm": codec.pack_perm(np.arange(32))}
    assert codec.dequantize(layer, permuted=True)[0, 0] == 1.0


# -- from_legacy (SPQR-8) --------------------------------------------------------------------------------------------


def test_from_legacy_refuses_an_unknown_sparse_layout():
    """SPQR-8.2: the release layout is CSR or PTCSR."""
    assert whole(lambda: codec.from_legacy(tile_legacy(), sparse="coo")) == refusal(
        "argument.invalid", "sparse", "'csr' or 'ptcsr'", "coo")


@pytest.mark.parametrize(("key", "want", "bad"), [
    ("groupsize", 16, 32), ("qq_groupsize", 16, 8), ("bits", 3, 4), ("wbits", 3, 2)])
def test_from_legacy_refuses_other_group_sizes_and_widths(key, want, bad):
    """SPQR-8.2: only b = 3 with groups of 16 converts."""
    legacy = tile_legacy() | {key: bad}
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.unsupported", key, f"{want} for the release layout", bad)


def test_from_legacy_accepts_the_release_group_sizes_and_width():
    """SPQR-8.2: groups of 16 and b = 3, stated, convert to the same bytes as the worked tile."""
    legacy = tile_legacy() | {"groupsize": 16, "qq_groupsize": 16, "bits": 3, "wbits": 3}
    assert spqr.from_legacy(legacy).col_vals.view(np.uint32).tolist() == TILE_CV


def test_from_legacy_refuses_one_dimensional_codes():
    """SPQR-8.1: quant_weights is the [m, n] code matrix."""
    legacy = tile_legacy()
    legacy["quant_weights"] = legacy["quant_weights"].reshape(-1)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_weights", "a [m, n] code matrix", (512,))


def test_from_legacy_refuses_rows_not_a_multiple_of_sixteen():
    """SPQR-8.2: only the shapes the release layout holds convert."""
    legacy = tile_legacy()
    legacy["quant_weights"] = np.zeros((24, 32), np.int8)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.unsupported", "quant_weights", DIMS, (24, 32))


def test_from_legacy_names_a_missing_key():
    """SPQR-8.1: every key of the quantizer's save is needed."""
    legacy = tile_legacy()
    del legacy["perm"]
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "perm", "present in the legacy dict", "missing")


def test_from_legacy_refuses_float_codes():
    """SPQR-8.1: codes are int8."""
    legacy = tile_legacy()
    legacy["quant_layer_scale"] = legacy["quant_layer_scale"].astype(np.float32)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_layer_scale", "an integer code tensor", "float32")


def test_from_legacy_refuses_codes_of_another_count():
    """SPQR-8.1: one code per (column group, row): 2 x 16 for the worked tile."""
    legacy = tile_legacy()
    legacy["quant_layer_zeros"] = legacy["quant_layer_zeros"][:1]
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_layer_zeros", "32 codes (2, 16)", (1, 1, 16))


def test_from_legacy_refuses_a_code_past_seven():
    """SPQR-8.1: codes outside [0, 7] are spqr.legacy.range, the code named."""
    legacy = tile_legacy()
    legacy["quant_weights"][1, 2] = 8
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.range", "quant_weights", "3-bit codes in [0, 7]", 8)


def test_from_legacy_refuses_an_empty_list_of_groups():
    """SPQR-8.1: a list per column group with no groups holds no codes."""
    legacy = tile_legacy() | {"quant_layer_scale": []}
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_layer_scale", "an integer code tensor", "float64")


def test_from_legacy_refuses_an_empty_list_of_statistics_by_count():
    """SPQR-8.1: an empty list of statistics holds none of the 2 x 1 the worked tile needs."""
    legacy = tile_legacy() | {"quant_layer_zero_qq_scale": []}
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_layer_zero_qq_scale", "float16 with 2x1 entries", ("float64", (0,)))


class NoArray:
    """A value NumPy cannot read as an array (its ``__array__`` refuses)."""

    def __array__(self, *args, **kwargs):
        raise TypeError("no array")


def test_from_legacy_refuses_a_value_that_is_no_array_by_key():
    """QF-2: a legacy entry that is no array is tensor.dtype, named by its key."""
    legacy = tile_legacy() | {"perm": NoArray()}
    assert whole(lambda: codec.from_legacy(legacy)) == refusal("tensor.dtype", "perm", "an array", "NoArray")


def test_from_legacy_refuses_a_group_that_is_no_array_by_key():
    """QF-2: one column group of a list that is no array is tensor.dtype, named by its key."""
    legacy = tile_legacy()
    legacy["quant_layer_zeros"] = [legacy["quant_layer_zeros"][0], NoArray()]
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "tensor.dtype", "quant_layer_zeros", "an array", "NoArray")


def test_from_legacy_reads_lists_per_column_group():
    """SPQR-8.1: the quantizer saves one tensor per column group; the lists give spqr_quant's bytes."""
    release, legacy = golden()
    for key in ("quant_layer_scale", "quant_layer_zeros", *STATS):
        legacy[key] = list(legacy[key])
    layer = spqr.from_legacy(legacy)
    assert all(getattr(layer, k).tobytes() == release[k].tobytes() for k in RELEASE)


@pytest.mark.parametrize("key", STATS)
def test_from_legacy_refuses_float32_statistics(key):
    """SPQR-8.1: the second-level statistics are float16 (right count, wrong dtype)."""
    legacy = tile_legacy()
    legacy[key] = legacy[key].astype(np.float32)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", key, "float16 with 2x1 entries", ("float32", (2, 1, 1)))


def test_from_legacy_refuses_statistics_of_another_count():
    """SPQR-8.1: one float16 statistic per tile (right dtype, wrong count)."""
    legacy = tile_legacy()
    legacy["quant_layer_zero_qq_zero"] = np.zeros(3, np.float16)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "quant_layer_zero_qq_zero", "float16 with 2x1 entries", ("float16", (3,)))


def test_from_legacy_refuses_a_perm_that_is_no_permutation():
    """SPQR-8.1: perm MUST be a permutation of 0..n-1 (spqr.legacy.invalid)."""
    legacy = tile_legacy()
    legacy["perm"][5] = 32
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "perm", "a permutation of 0..31", "index 32 at position 5")


# -- from_legacy outliers (SPQR-8.1, SPQR-7.1) -----------------------------------------------------------------------


def coo(legacy, rows, cols, values=None):
    values = np.ones(len(rows), np.float16) if values is None else values
    return legacy | {"outliers_matrix.indices": np.array([rows, cols]), "outliers_matrix.values": values}


@pytest.mark.parametrize(("indices", "values", "shown"), [
    pytest.param(np.array([0, 3]), np.ones(1, np.float16), ((2,), (1,)), id="1-d-indices"),
    pytest.param(np.zeros((3, 2), np.int64), np.ones(2, np.float16), ((3, 2), (2,)), id="three-rows"),
    pytest.param(np.zeros((2, 2), np.int64), np.ones(3, np.float16), ((2, 2), (3,)), id="values-longer"),
    pytest.param(np.zeros((2, 2), np.float32), np.ones(2, np.float16), ((2, 2), (2,)), id="float-indices"),
])
def test_from_legacy_refuses_malformed_coo(indices, values, shown):
    """SPQR-8.1: COO outliers are int indices [2, nnz] with values [nnz]."""
    legacy = tile_legacy() | {"outliers_matrix.indices": indices, "outliers_matrix.values": values}
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "outliers_matrix", "COO indices int [2, nnz] with values [nnz]", shown)


def test_from_legacy_reads_a_dense_outlier_matrix():
    """SPQR-8.1: a dense outliers_matrix (exact zeros dropped) gives spqr_quant's bytes, as its COO form does."""
    release, legacy = golden()
    (rows, cols), vals = legacy.pop("outliers_matrix.indices"), legacy.pop("outliers_matrix.values")
    dense = np.zeros((64, 128), np.float16)
    dense[rows, cols] = vals
    layer = spqr.from_legacy(legacy | {"outliers_matrix": dense})
    assert all(getattr(layer, k).tobytes() == release[k].tobytes() for k in RELEASE)


def test_from_legacy_refuses_a_dense_outlier_matrix_of_another_shape():
    """SPQR-8.1: a dense outliers_matrix is [m, n]."""
    legacy = tile_legacy()
    del legacy["outliers_matrix.indices"], legacy["outliers_matrix.values"]
    legacy["outliers_matrix"] = np.zeros((16, 16), np.float16)
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "outliers_matrix", "a dense [16, 32] matrix", (16, 16))


def test_from_legacy_refuses_integer_outlier_values():
    """SPQR-8.1: outlier values are floating point."""
    legacy = coo(tile_legacy(), [0], [3], np.ones(1, np.int16))
    assert whole(lambda: codec.from_legacy(legacy)) == refusal(
        "spqr.legacy.invalid", "outliers_matrix", "floating-point values", "int16")


def test_from_legacy_sorts_shuffled_float32_coo_into_spqr_quant_order():
    """SPQR-8.2: CSR from the row-then-column-sorted COO; float32 values are stored as float16 bits."""
    release, legacy = golden()
    order = np.random.default_rng(0).permutation(83)
    legacy["outliers_matrix.indices"] = legacy["outliers_matrix.indices"][:, order]
    legacy["outliers_matrix.values"] = legacy["outliers_matrix.values"][order].astype(np.float32)
    layer = spqr.from_legacy(legacy)
    assert all(getattr(layer, k).tobytes() == release[k].tobytes() for k in RELEASE)


@pytest.mark.parametrize(("rows", "cols", "shown"), [
    pytest.param([0, 16], [3, 3], (16, 3), id="row-m"),
    pytest.param([0, 3], [3, 32], (3, 32), id="column-n"),
    pytest.param([-1, 3], [3, 4], (3, 4), id="row-negative"),
    pytest.param([2, 3], [3, -1], (3, 3), id="column-negative"),
])
def test_from_legacy_refuses_an_outlier_outside_the_matrix(rows, cols, shown):
    """SPQR-8.1: outlier indices lie inside [m, n]; row m and column n are one past."""
    assert whole(lambda: codec.from_legacy(coo(tile_legacy(), rows, cols))) == refusal(
        "spqr.legacy.invalid", "outliers_matrix", "indices inside [16, 32]", shown)


def test_from_legacy_takes_an_outlier_at_the_last_row_and_column():
    """SPQR-8.1, 3.3: row m-1, column n-1 (the limits) is stored as column 31, value 1.0 (0x3c00) in row 15."""
    layer = spqr.from_legacy(coo(tile_legacy(), [15], [31]))
    assert (layer.row_offsets.tolist(), layer.col_vals.view(np.uint32).tolist()) == ([0] * 16 + [1], [0x3C00001F])


def test_from_legacy_refuses_two_outliers_at_one_position():
    """SPQR-8.1: the COO is coalesced; two entries at one position are refused."""
    assert whole(lambda: codec.from_legacy(coo(tile_legacy(), [4, 4], [7, 7]))) == refusal(
        "spqr.legacy.invalid", "outliers_matrix", "coalesced (no repeated position)", "duplicates")


def test_from_legacy_refuses_column_32768():
    """SPQR-7.1: spqr_quant sign-extends a column >= 32768 into a NaN value; from_legacy refuses to write one."""
    m, n = 16, 32784
    legacy = {"quant_weights": np.zeros((m, n), np.int8),
              "quant_layer_scale": np.zeros((n // 16, m), np.int8),
              "quant_layer_zeros": np.zeros((n // 16, m), np.int8),
              **{k: np.zeros(n // 16, np.float16) for k in STATS}, "perm": np.arange(n, dtype=np.int32)}
    assert whole(lambda: codec.from_legacy(coo(legacy, [0, 1], [5, 32768]))) == refusal(
        "spqr.outliers.column_signed", "outliers_matrix",
        "columns below 32768 (spqr_quant sign-extends wider ones into NaN values)", 32768)
