"""The SpQR release-layout checks' refusals and findings asserted whole, at each limit and one past (issue 33: tests
with teeth; `make mutation MODULE=qformats/formats/spqr/checks.py`).

Every layer is built by hand from the words of spec/spqr.md: dense_weights words of zero (all codes 0, every
second-order byte 0, so the four statistics are +0.0), `row_offsets`, `col_vals` entries `fp16_bits << 16 | column`
(SPQR-3.3) and `in_perm` pairs `perm[2i] | perm[2i+1] << 16` (SPQR-4.1); a second-order byte p sits in bits 54..61
of rows 2p and 2p+1 of its tile (SPQR-2.2, SPQR-2.3). Expected refusals and findings are worked from those clauses,
never computed by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.findings import Finding
from qformats.formats.spqr.checks import (
    check_config, check_layer, config_findings, outlier_count, portability_findings,
)
from whole_error import refusal

ONE = 0x3C00                  # float16 1.0
DIMS = "of shape (m, n) with m, n positive multiples of 16 and n <= 65536"
NAMES = "dense_weights, row_offsets, col_vals, in_perm"
SHAPES_16x32 = {"dense_weights": 32, "row_offsets": 17, "col_vals": 0, "in_perm": 16}


def entry(column: int, half_bits: int = ONE) -> int:
    """SPQR-3.3: one col_vals entry, as uint32: the value's float16 bits over the column."""
    return half_bits << 16 | column


def perm_pairs(perm) -> np.ndarray:
    """SPQR-4.1: in_perm[i] = perm[2i] | perm[2i+1] << 16, stored as int32."""
    p = np.asarray(perm, np.uint32)
    return (p[0::2] | p[1::2] << np.uint32(16)).view(np.int32)


def layer(m: int = 16, n: int = 32, offsets=None, entries=()) -> dict[str, np.ndarray]:
    """A release layer of zero dense words and the identity permutation; CSR with no outliers unless told."""
    return {"dense_weights": np.zeros(m * n // 16, np.int64),
            "row_offsets": np.zeros(m + 1, np.int32) if offsets is None else np.array(offsets, np.int32),
            "col_vals": np.array(entries, np.uint32).view(np.int32),
            "in_perm": perm_pairs(np.arange(n))}


def csr(m: int, n: int, rows: list[list[int]]) -> dict[str, np.ndarray]:
    """A CSR layer whose row r holds the given entries (rows past the list are empty)."""
    counts = [len(r) for r in rows] + [0] * (m - len(rows))
    return layer(m, n, np.concatenate([[0], np.cumsum(counts)]), [e for r in rows for e in r])


def with_so_bytes(t: dict[str, np.ndarray], n: int, tile: tuple[int, int], rows: dict[int, int]) -> dict:
    """SPQR-2.2/2.3: put byte ``rows[k]`` in bits 54..61 of row k of tile (I, J), word (I*(n/16) + J)*16 + k."""
    words = t["dense_weights"].view(np.uint64)
    for k, byte in rows.items():
        words[(tile[0] * (n // 16) + tile[1]) * 16 + k] |= np.uint64(byte) << np.uint64(54)
    return t


def refused(call) -> tuple[tuple, str]:
    """The whole refusal (as whole_error.whole gives it) and the clause it cites."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return (e.code, e.tensor, e.constraint, e.actual, e.message), e.clause


def fraction(nnz: int, m: int, n: int, pct: str, sparse: str) -> Finding:
    """SPQR-3.8: the info finding of the outlier count and fraction."""
    return Finding(code="spqr.outliers.fraction", severity="info", clause="SPQR-3.8", tensor="col_vals",
                   message=f"{nnz} outliers in {m * n} weights ({pct}%), {sparse}")


# -- SPQR-2.1: the four tensors -------------------------------------------------------------------------------------


def test_a_list_is_no_layer():
    """SPQR-2.1: "A release layer MUST consist of exactly the tensors ..."; a list of them is no layer."""
    assert refused(lambda: check_layer([1, 2])) == (
        refusal("argument.invalid", "layer", "a SpQR layer or a mapping of its tensors", "list"), "QF-2.6")


def test_a_missing_tensor_is_refused_under_spqr_2_1():
    """SPQR-2.1: a layer without col_vals lacks one of its four tensors (`tensor.missing`, reported with SPQR-2.1)."""
    t = layer()
    del t["col_vals"]
    assert refused(lambda: check_layer(t)) == (refusal("tensor.missing", "col_vals", "present", "missing"), "SPQR-2.1")


def test_an_extra_tensor_is_refused_naming_the_four():
    """SPQR-2.1: "exactly the tensors dense_weights, row_offsets, col_vals, in_perm"; a fifth is `tensor.unexpected`."""
    t = layer() | {"zeta": np.zeros(1, np.int32)}
    assert refused(lambda: check_layer(t)) == (
        refusal("tensor.unexpected", "zeta", f"one of {NAMES}", "zeta"), "SPQR-2.1")


def test_a_ragged_tensor_is_refused_by_its_name():
    """SPQR-2.1: each tensor is an array; a ragged list for row_offsets is none."""
    t = layer() | {"row_offsets": [[0], [0, 0]]}
    assert refused(lambda: check_layer(t)) == (refusal("tensor.dtype", "row_offsets", "an array", "list"), "QF-2.2")


def test_a_two_dimensional_tensor_is_refused():
    """SPQR-2.1: the four tensors are 1-D; dense_weights reshaped (2, 16) is refused with its shape."""
    t = layer() | {"dense_weights": np.zeros((2, 16), np.int64)}
    assert refused(lambda: check_layer(t)) == (
        refusal("tensor.shape", "dense_weights", "one-dimensional", (2, 16)), "SPQR-2.1")


def test_a_big_endian_tensor_is_refused_not_reinterpreted():
    """SPQR-2.1: "an in-memory array in non-native byte order is refused (tensor.dtype) rather than reinterpreted"."""
    t = layer() | {"dense_weights": np.zeros(32, ">i8")}
    assert refused(lambda: check_layer(t)) == (
        refusal("tensor.dtype", "dense_weights", "in native byte order", ">i8"), "SPQR-2.1")


def test_float32_dense_weights_are_refused():
    """SPQR-2.1: dense_weights is int64; only an empty col_vals may be float32 (SPQR-7.2), never the dense words."""
    t = layer() | {"dense_weights": np.zeros(32, np.float32)}
    assert refused(lambda: check_layer(t))[0] == refusal("tensor.dtype", "dense_weights", "int64", "float32")


def test_a_non_empty_float32_col_vals_is_refused():
    """SPQR-7.2: float32 col_vals is accepted only as the empty set; one float32 entry is refused."""
    t = layer(offsets=[0] + [1] * 16) | {"col_vals": np.zeros(1, np.float32)}
    assert refused(lambda: check_layer(t))[0] == refusal("tensor.dtype", "col_vals", "int32", "float32")


def test_the_float32_empty_set_is_refused_with_ptcsr():
    """SPQR-7.2: "The float32 form is accepted only with CSR row_offsets (length m+1); with PTCSR it is tensor.dtype"."""
    t = layer(offsets=[0, 0]) | {"col_vals": np.zeros(0, np.float32)}
    assert refused(lambda: check_layer(t)) == (refusal(
        "tensor.dtype", "col_vals", "int32 (float32[0] only with CSR row_offsets, SPQR-7.2)", "float32"), "SPQR-2.1")


# -- SPQR-2.1, SPQR-4.1: dimensions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["m", "n"])
def test_a_float_dimension_is_refused_by_name(name):
    """SPQR-2.1: given dimensions "MUST be integers (argument.invalid)"; 16.0 is a float."""
    assert refused(lambda: check_layer(layer(), **{name: 16.0})) == (
        refusal("argument.invalid", name, "an integer or None", 16.0), "QF-2.6")


def test_a_given_n_must_match_the_int32_pairs():
    """SPQR-2.1, SPQR-4.1: n = 2 len(in_perm); 16 int32 pairs hold n = 32, so n = 48 wants 24 of them."""
    assert refused(lambda: check_layer(layer(), n=48)) == (
        refusal("tensor.shape", "in_perm", "of shape (24,) for n = 48", (16,)), "SPQR-4.1")


def test_a_given_n_must_match_the_int64_indices():
    """SPQR-7.3: the int64 in_perm of PR #47 holds n plain indices, so n = 48 wants 48 of them, not 24."""
    t = layer() | {"in_perm": np.arange(32, dtype=np.int64)}
    assert refused(lambda: check_layer(t, n=48)) == (
        refusal("tensor.shape", "in_perm", "of shape (48,) for n = 48", (32,)), "SPQR-4.1")


def test_an_empty_in_perm_gives_no_dimensions():
    """SPQR-2.1: n = 2 len(in_perm) = 0 is no positive multiple of 16, and m is then 0 too (nothing to divide by)."""
    t = layer() | {"in_perm": np.zeros(0, np.int32)}
    assert refused(lambda: check_layer(t)) == (refusal("spqr.dims", "dense_weights, in_perm", DIMS, (0, 0)), "SPQR-2.1")


def test_a_given_m_must_match_the_dense_words():
    """SPQR-2.1: dense_weights is int64 [m n / 16]; m = 32, n = 32 wants 64 words, the layer has 32."""
    assert refused(lambda: check_layer(layer(), m=32)) == (
        refusal("tensor.shape", "dense_weights", "of shape (64,) = m*n/16", (32,)), "SPQR-2.1")


# -- SPQR-2.3, SPQR-2.5: the second-order word ------------------------------------------------------------------------


def test_unequal_so_byte_copies_are_refused_naming_both():
    """SPQR-2.3: "Byte p of SO is stored in rows 2p and 2p+1. The two copies MUST be equal" -- byte 1, tile (1, 1)."""
    t = with_so_bytes(layer(32, 32, offsets=[0] * 33), 32, (1, 1), {2: 0x11, 3: 0x22})
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.dense.so_mismatch", "dense_weights", "the same second-order byte in rows 2p and 2p+1",
        "tile (1, 1) byte 1: 0x11 vs 0x22"), "SPQR-2.3")


def test_an_infinite_statistic_is_named():
    """SPQR-2.3, SPQR-2.5: W_z_s is SO bits 16..31; 0x7c00 (+inf) puts 0x7c in byte 3, rows 6 and 7 of tile (1, 0)."""
    t = with_so_bytes(layer(32, 32, offsets=[0] * 33), 32, (1, 0), {6: 0x7C, 7: 0x7C})
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.stats.nonfinite", "dense_weights", "finite float16 second-level statistics", "W_z_s = inf in tile (1, 0)"),
        "SPQR-2.5")


# -- SPQR-3.1 .. SPQR-3.6: outliers ---------------------------------------------------------------------------------


def test_row_offsets_of_another_length_are_refused_naming_both_lengths():
    """SPQR-3.1: for m = 16 the length is m+1 = 17 (CSR) or m/16+1 = 2 (PTCSR); 5 is neither."""
    assert refused(lambda: check_layer(layer(offsets=[0] * 5))) == (refusal(
        "spqr.row_offsets.length", "row_offsets", "of length m+1 = 17 (CSR) or m/16+1 = 2 (PTCSR)", 5), "SPQR-3.1")


def test_row_offsets_must_start_at_zero():
    """SPQR-3.2: "row_offsets[0] MUST be 0"; the value at index 0 (1, not the 5 after it) is shown."""
    assert refused(lambda: check_layer(layer(offsets=[1] + [5] * 16))) == (
        refusal("spqr.row_offsets.start", "row_offsets", "0 at index 0", 1), "SPQR-3.2")


def test_the_first_decrease_of_row_offsets_is_named():
    """SPQR-3.2: "non-decreasing" -- equal neighbours (0, 0) are fine, 2 then 1 at index 3 is not."""
    offsets = [0, 0, 2, 1] + [3] * 13
    assert refused(lambda: check_layer(layer(offsets=offsets))) == (
        refusal("spqr.row_offsets.monotonic", "row_offsets", "non-decreasing", "2 then 1 at index 3"), "SPQR-3.2")


def test_row_offsets_must_end_at_the_col_vals_length():
    """SPQR-3.2: "its last element MUST equal len(col_vals)": 3 against no entries; the last element is shown."""
    assert refused(lambda: check_layer(layer(offsets=[0] * 16 + [3]))) == (refusal(
        "spqr.row_offsets.end", "row_offsets", "the col_vals length 0 at the last index", 3), "SPQR-3.2")


def test_the_first_ptcsr_block_off_a_multiple_of_16_is_named():
    """SPQR-3.5: "every block length MUST be a multiple of 16": blocks of 16, 0 and 7 entries; block 2 is refused."""
    t = layer(48, 32, offsets=[0, 16, 16, 23], entries=[0] * 23)
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.ptcsr.stride", "row_offsets", "16 * (widest row of the block) for every block", "7 entries in block 2"),
        "SPQR-3.5")


def test_a_sign_extended_column_32768_is_refused():
    """SPQR-7.1: spqr_quant's sign extension writes value bits 0xffff over column 32768: entry 0xffff8000."""
    t = csr(16, 32, [[entry(3), 0xFFFF8000]])
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.outliers.sign_extended", "col_vals",
        "free of sign-extended columns (value bits 0xffff over a column >= 32768)", "0xffff8000 at entry 1"), "SPQR-7.1")


def test_value_bits_0xffff_over_column_32767_are_no_sign_extension():
    """SPQR-7.1: below 32768 the int16 view is not negative, so 0xffff7fff is only a column past n = 32 (SPQR-3.3)."""
    t = csr(16, 32, [[0xFFFF7FFF]])
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.outliers.column_range", "col_vals", "columns below n = 32", "32767 at entry 0"), "SPQR-3.3")


def test_column_n_is_refused():
    """SPQR-3.3: the column "MUST be < n"; column 32 of n = 32, the second entry, is the first past it."""
    t = csr(16, 32, [[entry(3), entry(32)]])
    assert refused(lambda: check_layer(t)) == (
        refusal("spqr.outliers.column_range", "col_vals", "columns below n = 32", "32 at entry 1"), "SPQR-3.3")


def test_column_n_minus_one_is_accepted():
    """SPQR-3.3: column 31 of n = 32 is the last column."""
    assert check_layer(csr(16, 32, [[entry(31)]])) == {"m": 16, "n": 32, "sparse": "csr"}


def test_a_nan_outlier_value_is_refused():
    """SPQR-3.4: "Each value MUST be finite float16"; 0x7e00 is a NaN, at entry 1."""
    t = csr(16, 32, [[entry(3)], [entry(4, 0x7E00)]])
    assert refused(lambda: check_layer(t)) == (
        refusal("spqr.outliers.nonfinite", "col_vals", "finite float16", "NaN at [1]"), "SPQR-3.4")


def ptcsr_two_blocks(late: bool) -> dict[str, np.ndarray]:
    """m = 32: block 0 all padding (16 slots); block 1 (rows 16..31) two slots a row, entries 16..47 (SPQR-3.4).

    Row 16 holds two outliers (slots at 16 and 32); row 17's slot 0 (entry 17) is padding, and with ``late`` its
    slot 1 (entry 33) holds an outlier after it.
    """
    cv = [0] * 48
    cv[16], cv[32] = entry(1), entry(2)
    if late:
        cv[33] = entry(3)
    return layer(32, 32, offsets=[0, 16, 48], entries=cv)


def test_a_ptcsr_outlier_after_padding_is_refused_with_row_and_slot():
    """SPQR-3.4, SPQR-3.6: "After a row's first padding slot, all its later slots in the block MUST be padding";
    entry 33 = row_offsets[1] + 16 t + k with t = 1, k = 1 is row 17's slot 1."""
    assert refused(lambda: check_layer(ptcsr_two_blocks(late=True))) == (refusal(
        "spqr.ptcsr.padding", "col_vals", "zero in every slot after a row's first padding slot",
        "0x3c000003 at entry 33 (row 17, slot 1)"), "SPQR-3.6")


def test_ptcsr_padding_to_the_end_of_each_row_is_valid():
    """SPQR-3.6: padding after a row's last outlier, to the block's end, is the rule kept."""
    assert check_layer(ptcsr_two_blocks(late=False)) == {"m": 32, "n": 32, "sparse": "ptcsr"}


# -- SPQR-4.2: permutation ----------------------------------------------------------------------------------------------


def test_in_perm_with_a_repeated_index_is_refused():
    """SPQR-4.2: "The unpacked vector MUST be a permutation of 0 .. n-1"; 0, 0, 2, 3, ... holds 0 twice."""
    t = layer() | {"in_perm": perm_pairs([0, 0, *range(2, 32)])}
    assert refused(lambda: check_layer(t)) == (refusal(
        "spqr.in_perm.not_permutation", "in_perm", "a permutation of 0..31", "index 0 appears 2 times"), "SPQR-4.2")


# -- SPQR-6: config ---------------------------------------------------------------------------------------------------


def config(**extra) -> dict:
    """SPQR-6.1: the required quantization_config, shapes for module 'mlp.down_proj' of a 16 x 32 layer."""
    shapes = {f"mlp.down_proj.{k}.shape": v for k, v in SHAPES_16x32.items()}
    return {"quant_method": "spqr", "bits": 3, "beta1": 16, "beta2": 16, "shapes": shapes} | extra


def test_a_config_that_is_no_mapping_is_refused():
    """SPQR-6.1: "A quantization_config that is not a mapping is spqr.config.invalid too"."""
    assert refused(lambda: check_config([("quant_method", "spqr")])) == (
        refusal("spqr.config.invalid", "quantization_config", "a mapping", "list"), "SPQR-6.1")


def test_a_config_without_shapes_is_refused_naming_the_key():
    """SPQR-6.1: quantization_config MUST have ... shapes; without it the key is named missing."""
    assert refused(lambda: check_config({"quant_method": "spqr"})) == (
        refusal("spqr.config.invalid", "shapes", "present", "missing"), "SPQR-6.1")


def test_a_config_with_bits_4_is_refused():
    """SPQR-6.1: "bits = 3"; 4 is present but outside the domain, so it is named with its value, not as missing."""
    assert refused(lambda: check_config(config(bits=4))) == (refusal("spqr.config.invalid", "bits", "3", 4), "SPQR-6.1")


def test_a_module_the_shapes_do_not_list_is_refused():
    """SPQR-6.2: shapes lists every quantized linear; 'mlp.up_proj' is not listed."""
    assert refused(lambda: check_layer(layer(), config=config(), module="mlp.up_proj")) == (refusal(
        "spqr.config.shape_mismatch", "mlp.up_proj.*.shape", "listed in quantization_config.shapes", "missing"),
        "SPQR-6.2")


def test_a_length_other_than_the_declared_is_refused():
    """SPQR-6.2: each declared length "MUST equal the stored length"; in_perm declared 15, stored 16."""
    cfg = config()
    cfg["shapes"]["mlp.down_proj.in_perm.shape"] = 15
    assert refused(lambda: check_layer(layer(), config=cfg, module="mlp.down_proj")) == (refusal(
        "spqr.config.shape_mismatch", "mlp.down_proj.in_perm", "of the length declared in shapes (15)", 16),
        "SPQR-6.2")


def test_the_declared_lengths_are_accepted():
    """SPQR-6.2: a 16 x 32 CSR layer with no outliers stores 32, 17, 0 and 16 entries, as declared."""
    assert check_layer(layer(), config=config(), module="mlp.down_proj") == {"m": 16, "n": 32, "sparse": "csr"}


def test_the_old_key_is_a_warning():
    """SPQR-7.5: "Before SpQR PR #52 the key was linear_weights_not_to_quantize; accepted, with warning"."""
    assert config_findings(config(linear_weights_not_to_quantize=["lm_head.weight"])) == [Finding(
        code="spqr.config.legacy_key", severity="warning", clause="SPQR-7.5",
        tensor="quantization_config.linear_weights_not_to_quantize",
        message="'linear_weights_not_to_quantize' is the name used before SpQR PR #52; readers after it look for "
                "'modules_to_not_convert'")]


def unknown(key: str) -> Finding:
    """SPQR-6.4: the warning for one key the chapter does not define."""
    return Finding(code="spqr.config.unknown_key", severity="warning", clause="SPQR-6.4",
                   tensor=f"quantization_config.{key}",
                   message=f"key {key!r} is not defined by the SpQR chapter and is ignored")


def test_unknown_keys_are_warnings_in_name_order():
    """SPQR-6.4: "Keys this chapter does not define are reported and ignored" -- one finding a key, sorted."""
    assert config_findings(config(zeta=1, alpha=2)) == [unknown("alpha"), unknown("zeta")]


# -- portability findings (SPQR-3.7, 3.8, 7.1 .. 7.3) and the outlier count -------------------------------------------------


def test_float32_empty_col_vals_is_a_warning():
    """SPQR-7.2: "With CSR and no outliers spqr_quant writes col_vals as float32[0] ... validators warn"."""
    t = layer() | {"col_vals": np.zeros(0, np.float32)}
    assert portability_findings(t) == [Finding(
        code="spqr.col_vals.float32_empty", severity="warning", clause="SPQR-7.2", tensor="col_vals",
        message="'col_vals' is float32[0], the empty CSR outlier set spqr_quant's merge_col_val writes; the spec type "
                "is int32[0]"), fraction(0, 16, 32, "0.000", "CSR")]


def test_int64_in_perm_is_an_error_finding_naming_the_int32_length():
    """SPQR-7.3: int64 in_perm "a validator MUST report it as an error"; n = 32 needs int32[16] pairs."""
    t = layer() | {"in_perm": np.arange(32, dtype=np.int64)}
    assert portability_findings(t)[0] == Finding(
        code="spqr.in_perm.int64", severity="error", clause="SPQR-7.3", tensor="in_perm",
        message="'in_perm' is int64[32] (SpQR PR #47); spqr_quant 0.2.0 raises on it and transformers cannot load it: "
                "int32[16] is required")


def test_columns_from_32768_are_a_warning_below_are_not():
    """SPQR-7.1: "A correct column >= 32768 (n > 32768) is valid here but non-portable": of 32767 and 32768 one counts."""
    t = csr(16, 32784, [[entry(32767), entry(32768)]])
    assert portability_findings(t)[0] == Finding(
        code="spqr.outliers.column_signed", severity="warning", clause="SPQR-7.1", tensor="col_vals",
        message="1 outlier columns are >= 32768 (first 32768); spqr_quant reads columns as signed int16")


def unsorted(count: int) -> Finding:
    """SPQR-3.7: the warning for CSR columns that do not strictly ascend within a row."""
    return Finding(code="spqr.outliers.unsorted", severity="warning", clause="SPQR-3.7", tensor="col_vals",
                   message=f"{count} CSR entries do not have a column above the previous entry of their row")


def test_unsorted_entries_are_counted_within_rows_only():
    """SPQR-3.7: "CSR columns SHOULD strictly ascend within a row": row 0 = 5, 5, 4 breaks it twice (equal, then
    down); row 1 = 2, 3 ascends by one, and the step down from row 0 to row 1 is between rows."""
    t = csr(16, 32, [[entry(5), entry(5), entry(4)], [entry(2), entry(3)]])
    assert portability_findings(t) == [unsorted(2), fraction(5, 16, 32, "0.977", "CSR")]


def test_two_descending_entries_are_unsorted():
    """SPQR-3.7: two entries are the fewest that can be out of order: 7 then 6 in row 0."""
    assert unsorted(1) in portability_findings(csr(16, 32, [[entry(7), entry(6)]]))


def test_a_csr_zero_entry_is_an_outlier():
    """SPQR-3.8: "real entries: CSR entries, or non-padding PTCSR entries" -- a CSR entry of column 0, +0.0 counts."""
    assert portability_findings(csr(16, 32, [[0]])) == [fraction(1, 16, 32, "0.195", "CSR")]


def test_ptcsr_padding_is_no_outlier_and_no_unsorted_column():
    """SPQR-3.7, SPQR-3.8: PTCSR padding slots (column 0, +0.0) are not outliers; 2 real entries of 1024 weights."""
    assert portability_findings(ptcsr_two_blocks(late=False)) == [fraction(2, 32, 32, "0.195", "PTCSR")]


def test_outlier_count_counts_a_csr_zero_entry():
    """SPQR-3.8: every CSR entry is an outlier, the entry 0 included."""
    assert outlier_count(csr(16, 32, [[0], [entry(1)]])) == 2


def test_outlier_count_skips_ptcsr_padding():
    """SPQR-3.8: of block 1's 32 slots and block 0's 16, only the two non-zero entries are outliers."""
    assert outlier_count(ptcsr_two_blocks(late=False)) == 2


@pytest.mark.parametrize("call", [outlier_count, portability_findings], ids=["outlier_count", "portability_findings"])
def test_a_given_m_is_checked_against_the_layer(call):
    """SPQR-2.1: given dimensions "MUST agree": m = 32 wants 64 dense words of a 16 x 32 layer's 32."""
    assert refused(lambda: call(layer(), m=32)) == (
        refusal("tensor.shape", "dense_weights", "of shape (64,) = m*n/16", (32,)), "SPQR-2.1")


@pytest.mark.parametrize("call", [outlier_count, portability_findings], ids=["outlier_count", "portability_findings"])
def test_a_given_n_is_checked_against_the_layer(call):
    """SPQR-2.1, SPQR-4.1: n = 64 wants 32 in_perm pairs; the layer has 16."""
    assert refused(lambda: call(layer(), n=64)) == (
        refusal("tensor.shape", "in_perm", "of shape (32,) for n = 64", (16,)), "SPQR-4.1")


def test_portability_findings_include_the_config_findings():
    """SPQR-6.4: with a config, its findings follow the layer's."""
    assert portability_findings(layer(), config=config(zeta=1)) == [fraction(0, 16, 32, "0.000", "CSR"), unknown("zeta")]
