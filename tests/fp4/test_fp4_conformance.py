"""spec/fp4.md FP4-7 and spec/kernels.md KC-1.12: the NVFP4 / MXFP4 conformance cases, their validating reference
decoder, its named readings and misreadings. Expected values come from the spec's E2M1 table, the UE4M3 and
E8M0 bit formulas written out here and ml_dtypes' bfloat16 rounding, not from the codec under test."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance import run_kernel
from qformats.errors import QFormatsError
from qformats.formats.fp4 import cases as fp4_cases

CASES = {c.id: c for c in fp4_cases.cases()}
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)   # FP4-1.2


def _case(fmt: str, name: str):
    return CASES[f"{fmt}_packed/read/{name}"]


def _codes(packed: np.ndarray) -> np.ndarray:
    """Element 2j from the low nibble of byte j (FP4-1.2), written out."""
    p = np.asarray(packed, np.uint8)
    return np.stack([p & 15, p >> 4], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])


def _bf16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _ue4m3(b: np.ndarray) -> np.ndarray:
    """FE-7: exponent 4 bits (bias 7), mantissa 3; exponent 0 subnormal (m / 8 * 2^-6)."""
    e, m = (b >> 3).astype(np.int32), (b & 7).astype(np.float32)
    return np.where(e == 0, m / 8 * np.float32(2.0 ** -6), np.ldexp(1 + m / 8, e - 7)).astype(np.float32)


def _nvfp4_by_hand(case) -> np.ndarray:
    t = case.inputs
    s32 = (_ue4m3(t["weight_scale"]) / t["weight_global_scale"][0]).astype(np.float32)
    return _bf16(E2M1[_codes(t["weight_packed"])] * np.repeat(s32, 16, axis=-1))


def _mxfp4_by_hand(case) -> np.ndarray:
    t = case.inputs
    scale = np.ldexp(np.float32(1), t["weight_scale"].astype(np.int32) - 127).astype(np.float32)
    with np.errstate(over="ignore"):
        return _bf16(E2M1[_codes(t["weight_packed"])] * np.repeat(scale, 32, axis=-1))


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(np.asarray(a, np.float32).view(np.uint32),
                                                 np.asarray(b, np.float32).view(np.uint32))


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
def test_reference_passes_every_case_and_validates(fmt):
    """KC-4.2: the reference decoder passes every case, rejecting each non-conforming one: level validating."""
    entry = f"qformats.formats.fp4.cases:{fmt}_dequantize_checked"
    result = run_kernel(entry, fmt=f"{fmt}_packed", op="dequantize")
    assert result.counts["pass"] == len(result.cases) == {"nvfp4": 21, "mxfp4": 18}[fmt]
    assert result.level()["reached"] == "validating"


@pytest.mark.parametrize("name", [n.split("/read/")[1] for n, c in CASES.items()
                                  if c.expect == "values" and n.startswith("nvfp4")])
def test_nvfp4_reference_is_the_rounding_order_of_fp4_3_1(name):
    """FP4-3.1: W = bf16(f32(e2m1 * f32(ue4m3 / global))), bit for bit, from the spec's tables."""
    case = _case("nvfp4", name)
    assert _same_bits(fp4_cases.reference(case), _nvfp4_by_hand(case))


@pytest.mark.parametrize("name", [n.split("/read/")[1] for n, c in CASES.items()
                                  if c.expect == "values" and n.startswith("mxfp4")])
def test_mxfp4_reference_is_the_exact_product_rounded_once(name):
    """FP4-3.7: W = bf16(e2m1 * 2^(e - 127)), bit for bit (experts included), from the spec's tables."""
    case = _case("mxfp4", name)
    assert _same_bits(fp4_cases.reference(case), _mxfp4_by_hand(case))


def test_every_code_case_packs_two_codes_a_byte_low_nibble_first():
    """FP4-1.2: codes 0..15 in order are the bytes 0x10, 0x32, 0x54, ..., 0xFE; code 8 decodes to -0.0."""
    case = _case("mxfp4", "every_code_signed_zeros")
    assert case.inputs["weight_packed"][0, :8].tolist() == [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]
    w = fp4_cases.reference(case)
    assert _same_bits(w[0, :16], E2M1) and np.signbit(w[0, 8]) and w[0, 8] == 0


def test_nvfp4_zero_scale_block_gives_signed_zeros():
    """KC-2.4: the block of scale byte 0x00 decodes to +0 for codes 0..7 and -0 for codes 8..15."""
    w = fp4_cases.reference(_case("nvfp4", "every_code_signed_zeros"))[2, 16:32]
    assert (w == 0).all() and np.array_equal(np.signbit(w), np.arange(16) >= 8)


def test_every_scale_byte_cases_hold_every_value_byte():
    """FP4-3.3, FP4-3.4: one row per UE4M3 byte 0x00..0x7E and per E8M0 byte 0x00..0xFE, in order."""
    assert _case("nvfp4", "every_scale_byte").inputs["weight_scale"].ravel().tolist() == list(range(0x7F))
    assert _case("mxfp4", "every_scale_byte").inputs["weight_scale"].ravel().tolist() == list(range(0xFF))


def test_e8m0_extremes_decode_to_subnormals_and_infinities():
    """FP4-3.7: scale 0x00 is 2^-127 (0.5 -> 2^-128, a bfloat16 subnormal); 0xFE is 2^127 (2 -> inf, 1.5 finite)."""
    low = fp4_cases.reference(_case("mxfp4", "e8m0_min"))
    nonzero = np.abs(low[low != 0])
    assert nonzero.min() == 2.0 ** -128 and nonzero.max() == 6 * 2.0 ** -127
    case = _case("mxfp4", "e8m0_max")
    high, codes = fp4_cases.reference(case), _codes(case.inputs["weight_packed"])
    assert np.array_equal(np.isinf(high), (codes & 7) >= 4)
    assert np.all(np.isfinite(high[(codes & 7) == 3]))


def test_subnormal_results_case_reaches_bfloat16_subnormals():
    """FP4-3.1: with a global scale of 1.5 * 2^118 some results are nonzero bfloat16 subnormals."""
    w = fp4_cases.reference(_case("nvfp4", "subnormal_results"))
    assert ((w != 0) & (np.abs(w) < 2.0 ** -126)).any()


def test_cases_cover_odd_and_even_rows_experts_and_every_code():
    """FP4-7.2: both formats meet odd and even N and every E2M1 code; MXFP4 holds 3-D experts."""
    for fmt in ("nvfp4", "mxfp4"):
        values = [c for i, c in CASES.items() if i.startswith(fmt) and c.expect == "values"]
        assert {c.inputs["weight_packed"].shape[-2] % 2 for c in values} == {0, 1}
        codes = np.concatenate([_codes(c.inputs["weight_packed"]).ravel() for c in values])
        assert set(np.unique(codes).tolist()) == set(range(16))
    assert sum(c.inputs["weight_packed"].ndim == 3 for c in CASES.values()) == 3


EXPECTED_REJECTIONS = {
    "nvfp4/k_not_multiple_of_16": ("fp4.group.shape", "weight_packed", 40),
    "nvfp4/scale_grid_columns": ("fp4.grid.shape", "weight_scale", (4, 2)),
    "nvfp4/scale_grid_rows": ("fp4.grid.shape", "weight_scale", (3, 3)),
    "nvfp4/scale_nan_7f": ("fp4.scale.nan", "weight_scale", "0x7F at [1, 2]"),
    "nvfp4/scale_nan_ff": ("fp4.scale.nan", "weight_scale", "0xFF at [1, 2]"),
    "nvfp4/scale_sign_b8": ("fp4.scale.sign", "weight_scale", "0xB8 at [1, 2]"),
    "nvfp4/global_zero": ("fp4.global_scale.invalid", "weight_global_scale", 0.0),
    "nvfp4/global_inf": ("fp4.global_scale.invalid", "weight_global_scale", float("inf")),
    "nvfp4/global_negative": ("fp4.global_scale.invalid", "weight_global_scale", -2.5),
    "nvfp4/global_two_values": ("tensor.shape", "weight_global_scale", (2,)),
    "nvfp4/packed_int32": ("tensor.dtype", "weight_packed", "int32"),
    "mxfp4/k_not_multiple_of_32": ("fp4.group.shape", "weight_packed", 88),
    "mxfp4/scale_grid_columns": ("fp4.grid.shape", "weight_scale", (4, 2)),
    "mxfp4/scale_grid_rows": ("fp4.grid.shape", "weight_scale", (3, 3)),
    "mxfp4/experts_grid": ("fp4.grid.shape", "weight_scale", (3, 4, 3)),
    "mxfp4/e8m0_nan": ("fp4.scale.e8m0_nan", "weight_scale", "0xFF at [1, 2]"),
    "mxfp4/packed_int32": ("tensor.dtype", "weight_packed", "int32"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED_REJECTIONS))
def test_reference_rejects_each_invalid_case_with_its_clause(name):
    """KC-4.2: each */invalid/* case raises the error of the clause it cites, naming the input and its value."""
    fmt, rule = name.split("/")
    case = _case(fmt, f"invalid/{rule}")
    with pytest.raises(QFormatsError) as err:
        fp4_cases.CHECKED[case.format](**case.inputs)
    assert (err.value.code, err.value.clause, err.value.tensor, err.value.actual) == \
        (EXPECTED_REJECTIONS[name][0], case.clauses[0], *EXPECTED_REJECTIONS[name][1:])


def test_global_nan_is_rejected():
    """FP4-3.2: a NaN global scale is refused (NaN compares unequal, so apart from the table above)."""
    with pytest.raises(QFormatsError) as err:
        fp4_cases.nvfp4_dequantize_checked(**_case("nvfp4", "invalid/global_nan").inputs)
    assert err.value.code == "fp4.global_scale.invalid" and np.isnan(err.value.actual)


def test_e8m0_nan_reading_is_a_block_of_nan_and_the_infinity_misreading_is_not():
    """FP4-3.4, KC-4.5: reading 'nan' is NaN on block [1, 64:96] alone; 0xFF read as 2^128 in bfloat16 gives
    +-inf there, and NaN only where the code is a zero."""
    case = _case("mxfp4", "invalid/e8m0_nan")
    feature, clause, readings = fp4_cases.readings(case)
    w = readings["nan"][1]
    assert (feature, clause) == ("e8m0_nan", "FP4-3.4")
    assert np.array_equal(np.argwhere(np.isnan(w)), [[1, k] for k in range(64, 96)])
    inf = next(m[2] for m in fp4_cases.misreadings(case) if m[3] == "E8M0 0xFF read as 2^128 (inf)")
    block, codes = inf[1, 64:96], _codes(case.inputs["weight_packed"])[1, 64:96]
    assert np.array_equal(np.isnan(block), (codes & 7) == 0) and np.isinf(block[(codes & 7) != 0]).all()


def test_ue4m3_sign_readings_differ_by_the_sign_of_one_block():
    """FP4-3.3: byte 0xB8 is -1.0 as E4M3FN (torch) and 1.0 with bit 7 ignored (ggml): the block's signs flip."""
    _, _, readings = fp4_cases.readings(_case("nvfp4", "invalid/scale_sign_b8"))
    torch_, ggml = readings["e4m3fn"][1], readings["magnitude"][1]
    assert _same_bits(torch_[1, 32:48], -ggml[1, 32:48])
    assert _same_bits(np.delete(torch_.ravel(), range(80, 96)), np.delete(ggml.ravel(), range(80, 96)))


def test_global_scale_multiplied_misreading_is_the_product_by_hand():
    """FP4-3.2, modular#6600: the misreading multiplies by weight_global_scale where the format divides."""
    case = _case("nvfp4", "n7_k48")
    got = next(m[2] for m in fp4_cases.misreadings(case) if m[0] == "FP4-3.2")
    t = case.inputs
    s32 = (_ue4m3(t["weight_scale"]) * t["weight_global_scale"][0]).astype(np.float32)
    assert _same_bits(got, _bf16(E2M1[_codes(t["weight_packed"])] * np.repeat(s32, 16, axis=-1)))
