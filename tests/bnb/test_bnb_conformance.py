"""spec/bnb.md BNB-9 and spec/kernels.md KC-1.10: the bitsandbytes 4-bit conformance cases, their validating
reference decoder and its named readings. Expected values come from the spec's hand-written tables and from
properties of the cases, not from the codec under test."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conformance import run_kernel
from qformats.errors import QFormatsError
from qformats.formats.bnb import cases as bnb_cases

CASES = {c.id.removeprefix("bnb_4bit/read/"): c for c in bnb_cases.cases()}
CONFORMING = {name: c for name, c in CASES.items() if c.expect == "values"}
BLOCKSIZES = (32, 64, 128, 256, 512, 1024, 2048, 4096)          # BNB-3.3, written out
# BNB-2.2's table, x 12, by code (low three bits; bit 3 the sign): the spec's own numbers
FP4_X12 = [0, 0.0625, 8, 12, 4, 6, 2, 3]


def _n(case) -> int:
    return case.params["shape"][0] * case.params["shape"][1]


def test_reference_passes_every_case_and_validates():
    """KC-4.2: the reference decoder passes all 49 cases and rejects each non-conforming one: level validating."""
    result = run_kernel("conformance.reference:bnb_4bit_dequantize", fmt="bnb_4bit", op="dequantize")
    assert result.counts["pass"] == len(result.cases) == 49
    assert result.level()["reached"] == "validating"
    assert result.level()["readings"] == {"nonfinite_scales": "reject", "quant_map_mismatch": "reject"}


def test_cases_cover_both_types_every_blocksize_and_double_quant():
    """BNB-9.2: NF4 and FP4 x every blocksize x double quantization off and on, each with a partial last block
    of at least the second block; each type meets odd and even n and K."""
    grid = {(c.params["quant_type"], c.params["blocksize"], "nested_absmax" in c.inputs)
            for name, c in CONFORMING.items() if "_b" in name and name.count("_") <= 2}
    assert grid == set(itertools.product(("nf4", "fp4"), BLOCKSIZES, (False, True)))
    for c in CONFORMING.values():
        assert _n(c) % c.params["blocksize"] and _n(c) > c.params["blocksize"], c.id
    for qt in ("nf4", "fp4"):
        ns = {(_n(c) % 2, c.params["shape"][1] % 2) for c in CONFORMING.values() if c.params["quant_type"] == qt}
        assert ns == {(0, 0), (1, 1)}, qt


def test_nested_blocks_case_has_two_nested_blocks_the_second_partial():
    """BNB-4.3: 302 blocks of 32 make two nested blocks of 256, the second holding 46."""
    c = CASES["fp4_b32_dq_nested_blocks"]
    assert c.inputs["absmax"].shape == (302,) and c.inputs["absmax"].dtype == np.uint8
    assert c.inputs["nested_absmax"].shape == (2,) and c.inputs["nested_offset"].shape == (1,)


def test_fp4_every_code_decodes_to_the_spec_table_with_negative_zero():
    """BNB-2.2, BNB-2.3: codes 0..15 in order decode to the spec's table x absmax; code 8 is -0.0."""
    c = CASES["fp4_b32_every_code"]
    magnitude = np.array(FP4_X12, np.float32) / np.float32(12)
    table = np.concatenate([magnitude, -magnitude])
    codes = np.arange(99) % 16
    expected = (table[codes] * c.inputs["absmax"][np.arange(99) // 32]).reshape(3, 33)
    w = bnb_cases.reference(c)
    assert np.array_equal(w.view(np.uint32), expected.view(np.uint32))
    assert np.signbit(w.reshape(-1)[8]) and w.reshape(-1)[8] == 0


def test_signed_zeros_case_holds_negative_zeros_where_absmax_is_zero():
    """KC-2.4: the block with absmax 0 decodes to -0.0 exactly at its negative codes (NF4 0..6; FP4 8..15, the
    sign bit set)."""
    for qt, negative in (("nf4", range(0, 7)), ("fp4", range(8, 16))):
        c = CASES[f"{qt}_b64_signed_zeros_zero_absmax"]
        w = bnb_cases.reference(c).reshape(-1)
        block = slice(64, 128)
        b = c.inputs["packed"].reshape(-1)
        codes = np.stack([b >> 4, b & 15], 1).reshape(-1)[:250]
        assert np.array_equal(np.signbit(w[block]) & (w[block] == 0), np.isin(codes[block], list(negative)))
        assert (w[block] == 0).all()


EXPECTED_REJECTIONS = {
    "absmax_nan": ("bnb.absmax.nonfinite", "absmax", "nan at [1]"),
    "absmax_inf": ("bnb.absmax.nonfinite", "absmax", "inf at [3]"),
    "nested_absmax_nan": ("bnb.absmax.nonfinite", "nested_absmax", "nan at [0]"),
    "absmax_short": ("bnb.absmax.length", "absmax", [3]),
    "packed_short": ("bnb.shape", "packed", "uint8 [101, 1]"),
    "blocksize_48": ("bnb.blocksize", "blocksize", 48),
    "quant_type_int4": ("bnb.quant_type", "quant_type", "int4"),
    "dtype_float64": ("bnb.dtype", "dtype", "float64"),
    "nested_missing": ("bnb.nested.missing", "absmax", "uint8 without them"),
    "nested_quant_map_short": ("bnb.nested.invalid", "nested_quant_map", "float32 [255]"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_REJECTIONS))
def test_reference_rejects_each_invalid_case_with_its_clause(name):
    """KC-4.2: each */invalid/* case raises the error of the clause it cites, naming the input and its value."""
    c = CASES[f"invalid/{name}"]
    with pytest.raises(QFormatsError) as err:
        bnb_cases.dequantize_checked(**c.inputs, **c.params)
    code, tensor, actual = EXPECTED_REJECTIONS[name]
    got = (err.value.code, err.value.clause, err.value.tensor, err.value.actual)
    assert got == (code, c.clauses[0], tensor, actual)


def test_quant_map_mismatch_is_rejected_and_its_reading_uses_quant_type():
    """BNB-2.4: the FP4 table stored under quant_type nf4 is refused; the named reading 'quant_type' is the
    decode of the same layer with the NF4 table stored (what bitsandbytes does)."""
    c = CASES["invalid/quant_map_mismatch"]
    with pytest.raises(QFormatsError) as err:
        bnb_cases.dequantize_checked(**c.inputs, **c.params)
    assert (err.value.code, err.value.clause, err.value.tensor) == ("bnb.quant_map.mismatch", "BNB-2.4", "quant_map")
    feature, clause, readings = bnb_cases.readings(c)
    fixed = dict(c.inputs) | {"quant_map": bnb_cases.STORED_MAPS["nf4"]}
    assert (feature, clause, list(readings)) == ("quant_map_mismatch", "BNB-2.4", ["quant_type"])
    assert np.array_equal(readings["quant_type"][1], bnb_cases.dequantize_checked(**fixed, **c.params))


def test_nonfinite_absmax_reading_is_a_block_of_nan():
    """BNB-3.4, KC-4.5: the reading 'evaluation' of a NaN absmax is NaN on its block (64..127) and nowhere else."""
    feature, clause, readings = bnb_cases.readings(CASES["invalid/absmax_nan"])
    w = readings["evaluation"][1].reshape(-1)
    assert (feature, clause) == ("nonfinite_scales", "BNB-3.4")
    assert np.array_equal(np.flatnonzero(np.isnan(w)), np.arange(64, 128))
