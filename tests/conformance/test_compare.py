"""QF-4.6 judging rules, checked on hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

from conformance import compare


def test_float16_result_must_be_the_correctly_rounded_value():
    """1 + 2^-11 lies halfway between float16 neighbours 1 and 1 + 2^-10: ties to even give 1."""
    ref = np.array([1 + 2.0 ** -11], np.float32)
    assert compare.exact(np.array([1.0], np.float16), "float16", ref).ok
    assert not compare.exact(np.array([1 + 2.0 ** -10], np.float16), "float16", ref).ok


def test_float32_result_must_be_exact_and_nan_matches_nan():
    """Dequantize is bit-exact as values: NaN matches NaN as a class, every other value exactly."""
    ref = np.array([0.1, np.nan, -0.0, -np.inf], np.float32)
    assert compare.exact(np.array([0.1, -np.nan, -0.0, -np.inf], np.float32), "float32", ref).ok
    assert not compare.exact(np.array([np.nextafter(np.float32(0.1), 1), np.nan, -0.0, -np.inf], np.float32),
                             "float32", ref).ok
    assert not compare.exact(np.array([0.1, np.nan, -0.0, np.inf], np.float32), "float32", ref).ok


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_the_sign_of_zero_must_match(dtype):
    """A decoder that turns -0.0 into +0.0 (a dense outlier matrix added, ``w + 0.0``) fails, and says so."""
    ref = np.array([-0.0, 0.0, 2.0], np.float32)
    j = compare.exact(np.array([0.0, 0.0, 2.0], dtype), dtype, ref)
    assert not j.ok and j.detail.endswith("1 / 3 mismatched; first: [0] actual 0 expected -0; 1 zeros of the wrong sign")
    assert not compare.exact(np.array([-0.0, -0.0, 2.0], dtype), dtype, ref).ok


def test_numeric_equality_is_a_declared_lower_level():
    """A subject declaring "zeros": "numeric" passes +0 for -0, and the detail says it was judged so."""
    j = compare.exact(np.array([0.0, 2.0], np.float32), "float32", np.array([-0.0, 2.0], np.float32), signed_zeros=False)
    assert j.ok and j.detail == "2 values, exact float32 (numeric equality declared: +0 == -0)"


def test_float64_result_is_rounded_to_float32_first():
    """A decoder in float64 then rounded once (Q4K-3.2) is exact; its unrounded value is judged the same way."""
    ref = np.array([np.float32(1 / 3)], np.float32)
    assert compare.exact(np.array([1 / 3]), "float64", ref).ok


def test_bfloat16_rounding_ties_to_even():
    """bfloat16 keeps 8 significant bits: 1 + 2^-8 is a tie (-> 1), 1 + 3 * 2^-8 a tie (-> 1 + 2^-6)."""
    got = compare.round_bfloat16(np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20], np.float32))
    assert got.tolist() == [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7]


def test_bound_by_hand():
    """x = [1, 1], W = [[1, 1]], float32 output, W may be rounded: y = 2 and
    allowed = 2^-11 * 2 + 2^-25 * 2 + gamma(3) * 2 * (1 + 2^-11), gamma(3) = 3u / (1 - 3u), u = 2^-24."""
    y, allowed = compare.bound(np.ones((1, 2), np.float16), np.ones((1, 2), np.float32), "float32", w_rounding=True)
    u = 2.0 ** -24
    gamma = 3 * u / (1 - 3 * u)
    assert y.tolist() == [[2.0]]
    assert np.isclose(allowed[0, 0], 2.0 ** -10 + 2.0 ** -24 + gamma * 2 * (1 + 2.0 ** -11), rtol=1e-12, atol=0)


def test_fp16_accumulation_error_exceeds_the_bound_on_long_positive_sums():
    """Summing 4096 terms in float16 loses far more than the float32-accumulation bound allows."""
    x = np.full((1, 4096), 0.5, np.float16)
    w = np.full((1, 4096), 0.25, np.float32)
    acc = np.float16(0)
    for v in (x[0] * w[0].astype(np.float16)):
        acc = np.float16(acc + v)
    assert not compare.within_bound(np.array([[acc]], np.float16), "float16", x, w, w_rounding=True).ok
    assert compare.within_bound(np.array([[512.0]], np.float16), "float16", x, w, w_rounding=True).ok


def test_float16_overflow_to_inf_is_allowed_only_where_due():
    x = np.full((1, 2), 60000, np.float16)
    w = np.ones((1, 2), np.float32)
    assert compare.within_bound(np.array([[np.inf]], np.float16), "float16", x, w, w_rounding=True).ok
    assert not compare.within_bound(np.array([[np.inf]], np.float16), "float16", x / 4, w, w_rounding=True).ok


def _at_float32_reach(beyond: bool) -> np.ndarray:
    """The one-weight layer W = [[v]] (K = 1, x = 1) with ``|x| @ |W|.T · (1 + gamma(2)) · (1 + u_w)`` the
    largest float32 still inside float32's range, or the next float32 past it."""
    from conformance.compare import FP32_MAX, U32, U_W

    factor = (1 + 2 * U32 / (1 - 2 * U32)) * (1 + U_W)
    v = np.float32(FP32_MAX / factor)
    while float(v) * factor > FP32_MAX:
        v = np.nextafter(v, np.float32(0))
    return np.array([[np.nextafter(v, np.float32(np.inf)) if beyond else v]], np.float32)


def test_matmul_output_beyond_float32s_range_is_not_judged_and_said():
    """QF-4.6: past float32's reach a product or partial sum of the float32 model may overflow, so any value
    conforms there; the detail counts those outputs."""
    from conformance.compare import within_bound

    x = np.ones((1, 1), np.float16)
    got = within_bound(np.array([[np.inf]], np.float32), "float32", x, _at_float32_reach(True), w_rounding=True)
    assert got.ok and got.detail.startswith("0 outputs within the QF-4.6 bound") and \
        "; 1 beyond float32's range, not judged" in got.detail


def test_matmul_output_at_float32s_reach_is_judged():
    """One float32 below that reach the output is judged: inf for a finite exact value fails."""
    from conformance.compare import within_bound

    x = np.ones((1, 1), np.float16)
    got = within_bound(np.array([[np.inf]], np.float32), "float32", x, _at_float32_reach(False), w_rounding=True)
    assert not got.ok and got.detail.startswith("QF-4.6 bound: ")
