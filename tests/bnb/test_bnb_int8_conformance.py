"""spec/bnb.md BNB-6, BNB-9.2 and spec/kernels.md KC-1.10: the LLM.int8 (``bnb_int8``) conformance cases and their
validating reference decoder. Expected values come from hand-worked spec examples and properties of the cases;
bitsandbytes' own decode of every case is pinned in test_bnb_real_library.py."""

from __future__ import annotations

import numpy as np
import pytest

from conformance import run_kernel
from qformats.errors import QFormatsError
from qformats.formats.bnb import int8_cases

CASES = {c.id.removeprefix("bnb_int8/read/"): c for c in int8_cases.cases()}


def test_reference_passes_every_case_and_validates():
    """KC-4.2: the validating decoder passes all 17 cases, rejecting each non-conforming one: level validating."""
    result = run_kernel("qformats.formats.bnb.int8_cases:dequantize_checked", fmt="bnb_int8", op="dequantize")
    assert result.counts["pass"] == len(result.cases) == 17
    assert result.level()["reached"] == "validating" and result.level()["validation_cases"] == 6


def test_cases_cover_ragged_shapes_and_every_dtype():
    """BNB-9.2: 1 x 1, odd, square and past-a-tile (N, K); each of the three dtypes."""
    values = [c for c in CASES.values() if c.expect == "values"]
    shapes = {c.inputs["weight"].shape for c in values}
    assert {(1, 1), (7, 33), (48, 48), (64, 65)} <= shapes
    assert {c.params["dtype"] for c in values} == {"float32", "float16", "bfloat16"}
    assert all(c.inputs["weight"].dtype == np.int8 and c.inputs["SCB"].shape == c.inputs["weight"].shape[:1]
               for c in values)


def test_every_code_case_holds_minus_128_to_127():
    """BNB-6.2: all 256 int8 codes, -128 included (bitsandbytes never writes it, readers decode it)."""
    codes = CASES["int8_every_code"].inputs["weight"].reshape(-1)
    assert np.array_equal(np.unique(codes), np.arange(-128, 128)) and codes[0] == -128


def test_one_over_127_as_float32_decodes_127_to_scb_and_minus_128_beyond_it():
    """BNB-6.2 by hand: with SCB 1, code 127 gives f32(127 * f32(1/127)) = 1.0 and -128 gives
    f32(-128 * f32(1/127)) = -1.007874 (-128/127 rounded to float32); with SCB 0 every code gives a zero of the
    code's sign."""
    w = int8_cases.dequantize_checked(weight=np.array([[127, -128, -1, 0]], np.int8),
                                      SCB=np.array([1.0], np.float32), dtype="float32")
    assert w[0, 0] == 1.0 and w[0, 1] == np.float32(-128 / 127)
    z = int8_cases.dequantize_checked(weight=np.array([[5, -5, 0]], np.int8), SCB=np.array([0.0], np.float32),
                                      dtype="float32")
    assert (z == 0).all() and np.signbit(z).tolist() == [[False, True, False]]


def test_zero_rows_hold_negative_zeros_exactly_at_negative_codes():
    """KC-2.4: the rows with SCB 0 decode to zeros, -0.0 where the code is negative; the other row does not."""
    c = CASES["int8_zero_rows"]
    w = int8_cases.reference(c)
    codes = c.inputs["weight"]
    for row in (0, 2):
        assert (w[row] == 0).all() and np.array_equal(np.signbit(w[row]), codes[row] < 0)
    assert (w[1][codes[1] != 0] != 0).all()


EXPECTED_REJECTIONS = {
    "scb_nan": ("bnb.int8.invalid", "SCB", "nan at [2]"),
    "scb_inf": ("bnb.int8.invalid", "SCB", "-inf at [5]"),
    "scb_short": ("bnb.int8.invalid", "SCB", "float32 [5]"),
    "weight_uint8": ("bnb.int8.invalid", "weight", "uint8 [6, 34]"),
    "dtype_float64": ("bnb.dtype", "dtype", "float64"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_REJECTIONS))
def test_reference_rejects_each_invalid_case_with_its_clause(name):
    """KC-4.2: each */invalid/* case raises the error of the clause it cites, naming the input and its value."""
    c = CASES[f"invalid/{name}"]
    with pytest.raises(QFormatsError) as err:
        int8_cases.dequantize_checked(**c.inputs, **c.params)
    code, tensor, actual = EXPECTED_REJECTIONS[name]
    got = (err.value.code, err.value.clause, err.value.tensor, err.value.actual)
    assert got == (code, c.clauses[0], tensor, actual)


def test_negative_scb_is_rejected_naming_the_row():
    """BNB-6.1: an absmax is not negative; the error names the row and its value."""
    c = CASES["invalid/scb_negative"]
    with pytest.raises(QFormatsError) as err:
        int8_cases.dequantize_checked(**c.inputs, **c.params)
    assert (err.value.code, err.value.tensor) == ("bnb.int8.invalid", "SCB")
    assert err.value.actual == f"{c.inputs['SCB'][1]} at [1]" and c.inputs["SCB"][1] < 0
    assert str(err.value).startswith("'SCB' must be finite and not negative, a row's absmax (BNB-6.1)")
