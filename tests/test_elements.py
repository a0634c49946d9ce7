"""Float elements (spec/float_elements.md, FE-): the decode tables against ml_dtypes, torch and the chapter's own
tables, the reference rounding against ml_dtypes' and torch's casts, and the chapter's worked examples.

Expected values come from third-party decoders (ml_dtypes 0.6, torch's float8 dtypes), from the tables and
examples printed in the chapter, or from properties (nearest value, saturation as a clamp); never from
qformats.elements itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from qformats import elements as el
from qformats.errors import QFormatsError

F32 = np.float32
CHAPTER = (Path(__file__).resolve().parents[1] / "spec" / "float_elements.md").read_text(encoding="utf-8")
ML = {el.E4M3FN: "float8_e4m3fn", el.E4M3FNUZ: "float8_e4m3fnuz", el.E5M2: "float8_e5m2", el.E8M0: "float8_e8m0fnu",
      el.E2M1: "float4_e2m1fn"}
TORCH = {el.E4M3FN: "float8_e4m3fn", el.E4M3FNUZ: "float8_e4m3fnuz", el.E5M2: "float8_e5m2", el.E8M0: "float8_e8m0fnu"}
SECTION = {el.E4M3FN: "FE-2.3", el.E4M3FNUZ: "FE-3.3", el.E5M2: "FE-4.3", el.E8M0: "FE-5.3", el.E2M1: "FE-6.3"}


def same(a, b) -> np.ndarray:
    """Bit-identical float32 values (so -0 differs from +0), any NaN equal to any NaN."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return (np.isnan(a) & np.isnan(b)) | (a.view(np.uint32) == b.view(np.uint32))


def same_code(a, b, fmt) -> np.ndarray:
    return (a == b) | (el.is_nan_code(a, fmt) & el.is_nan_code(b, fmt))


def all_codes(fmt) -> np.ndarray:
    return np.arange(len(el.table(fmt)), dtype=np.uint8)


def ml_decode(codes, fmt) -> np.ndarray:
    return codes.view(getattr(ml_dtypes, ML[fmt])).astype(F32)


def ml_encode(x, fmt) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(x, F32).astype(getattr(ml_dtypes, ML[fmt])).view(np.uint8)


def torch_dtype(fmt):
    torch = pytest.importorskip("torch")
    if fmt not in TORCH:
        pytest.skip(f"torch {torch.__version__} has no {fmt} dtype it can convert (float4_e2m1fn_x2 is storage only)")
    if not hasattr(torch, TORCH[fmt]):
        pytest.skip(f"torch {torch.__version__} lacks torch.{TORCH[fmt]}")
    return torch, getattr(torch, TORCH[fmt])


def probes(fmt, rng, n=100_000) -> np.ndarray:
    """Every value, every midpoint between neighbours and the floats either side of it, both signs, +-max, the
    overflow midpoint, +-inf, +-0, and random float32 bit patterns (NaNs, infinities and subnormals included)."""
    t = el.table(fmt).astype(np.float64)
    v = np.unique(np.abs(t[np.isfinite(t)]))
    top = v[-1] * 2 if fmt == el.E8M0 else 2 * v[-1] - v[-2]
    v = np.append(v, top)
    mids = ((v[:-1] + v[1:]) / 2).astype(F32)
    with np.errstate(over="ignore"):                    # E8M0's virtual step 2^128 is inf in float32
        edge = np.concatenate([v.astype(F32), mids, np.nextafter(mids, F32(np.inf)), np.nextafter(mids, F32(0)),
                               [np.inf, 0.0]]).astype(F32)
    edge = np.concatenate([edge, -edge])
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(F32)
    return np.concatenate([edge, bits])


# ------------------------------------------------------------------------------------------- decode tables


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in ML])
def test_table_matches_ml_dtypes(fmt):
    """FE-1.1: every code of the table decodes bit-identically to ml_dtypes' decoder (signed zeros, inf, NaN)."""
    codes = all_codes(fmt)
    assert same(el.decode(codes, fmt), ml_decode(codes, fmt)).all()


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in ML])
def test_table_matches_torch(fmt):
    """FE-1.1: every code decodes bit-identically to torch's float8 dtype of the same name."""
    torch, dt = torch_dtype(fmt)
    codes = all_codes(fmt)
    ref = torch.from_numpy(codes.copy()).view(dt).float().numpy()
    assert same(el.decode(codes, fmt), ref).all()


def test_ue4m3_low_half_is_e4m3fn():
    """FE-7.1: UE4M3 codes 0x00 .. 0x7E have E4M3FN's values (ml_dtypes' float8_e4m3fn)."""
    codes = np.arange(0x7F, dtype=np.uint8)
    assert same(el.decode(codes, el.UE4M3), ml_decode(codes, el.E4M3FN)).all()


def test_ue4m3_sign_bit_and_nan_have_no_value():
    """FE-7.2: 0x7F and every byte with bit 7 set decode to no value (NaN): 129 codes, and no other."""
    nan = el.is_nan_code(np.arange(256), el.UE4M3)
    assert np.flatnonzero(nan).tolist() == [0x7F, *range(0x80, 0x100)]


def _spec_table(section: str) -> dict[int, float]:
    """The values a decode table of the chapter prints, keyed by code."""
    body = re.search(rf"^### {re.escape(section)} .*?$(.*?)^##", CHAPTER, re.M | re.S).group(1)
    out = {}
    for row in (r for r in body.splitlines() if r.startswith("| ") and not r.startswith("| e ")):
        cells = [c.strip() for c in row.strip("|").split("|")]
        if m := re.fullmatch(r"\d+ \(0x([0-9A-F]{2})\)", cells[0]):           # FP8 grid: E row, M columns
            first, vals = int(m.group(1), 16), cells[2:]
        elif m := re.fullmatch(r"0x([0-9A-F])_", cells[0]):                   # E8M0: high nibble row
            first, vals = int(m.group(1), 16) << 4, cells[1:]
        elif cells[0] == "value":                                             # E2M1: one row
            first, vals = 0, cells[1:]
        else:
            continue
        for i, v in enumerate(vals):
            out[first + i] = float(np.ldexp(1.0, int(v[2:]))) if v.startswith("2^") else float(v)
    return out


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in SECTION])
def test_table_matches_the_chapter(fmt):
    """FE-2.3 .. FE-6.3: the module's table holds exactly the values the chapter prints (the S = 0 half)."""
    printed = _spec_table(SECTION[fmt])
    assert len(printed) == (256 if fmt == el.E8M0 else 16 if fmt == el.E2M1 else 128)
    codes = np.array(sorted(printed))
    assert same(el.decode(codes, fmt), [printed[c] for c in codes]).all()


DECODE_EXAMPLES = [  # (format, code, value) quoted from FE-2.4, FE-3.4, FE-4.4, FE-5.4, FE-6.5, FE-7.4
    (el.E4M3FN, 0x38, 1.0), (el.E4M3FN, 0xB5, -0.8125), (el.E4M3FN, 0x01, 0.001953125), (el.E4M3FN, 0x7E, 448.0),
    (el.E4M3FN, 0x7F, np.nan), (el.E4M3FN, 0xFF, np.nan), (el.E4M3FN, 0x80, -0.0),
    (el.E4M3FNUZ, 0x40, 1.0), (el.E4M3FNUZ, 0x38, 0.5), (el.E4M3FNUZ, 0x7F, 240.0), (el.E4M3FNUZ, 0xC0, -1.0),
    (el.E4M3FNUZ, 0x80, np.nan), (el.E4M3FNUZ, 0x01, 0.0009765625),
    (el.E5M2, 0x3C, 1.0), (el.E5M2, 0x7B, 57344.0), (el.E5M2, 0x7C, np.inf), (el.E5M2, 0xFC, -np.inf),
    (el.E5M2, 0x7D, np.nan), (el.E5M2, 0x01, 0.0000152587890625), (el.E5M2, 0xC5, -5.0),
    (el.E8M0, 0x7F, 1.0), (el.E8M0, 0x80, 2.0), (el.E8M0, 0x7C, 0.125), (el.E8M0, 0x00, 2.0 ** -127),
    (el.E8M0, 0xFE, 2.0 ** 127), (el.E8M0, 0xFF, np.nan),
    (el.E2M1, 0x5, 3.0), (el.E2M1, 0x7, 6.0), (el.E2M1, 0x1, 0.5), (el.E2M1, 0xA, -1.0), (el.E2M1, 0x8, -0.0),
    (el.UE4M3, 0x38, 1.0), (el.UE4M3, 0x7E, 448.0), (el.UE4M3, 0x01, 2.0 ** -9), (el.UE4M3, 0x7F, np.nan),
    (el.UE4M3, 0xB8, np.nan), (el.UE4M3, 0x80, np.nan),
]


@pytest.mark.parametrize(("fmt", "code", "value"), [pytest.param(*e, id=f"{e[0]}-{e[1]:#04x}") for e in DECODE_EXAMPLES])
def test_decode_worked_example(fmt, code, value):
    """FE-2.4 .. FE-7.4: the chapter's hand-worked codes decode to the values it states."""
    assert same(el.decode(np.array([code], np.uint8), fmt), [value]).all()


def test_e8m0_zero_code_is_float32_subnormal():
    """FE-5.4: E8M0 0x00 is 2^-127, float32 bits 0x00400000, not zero."""
    assert el.decode(np.array([0], np.uint8), el.E8M0).view(np.uint32)[0] == 0x00400000


def test_max_finite():
    """FE-1.2: the largest finite values of the format table."""
    assert [el.max_finite(f) for f in el.FORMATS] == [448.0, 240.0, 57344.0, 2.0 ** 127, 6.0, 448.0]


def test_tables_are_read_only():
    """FE-1.1: the tables are shared by every family; nobody may write into them."""
    with pytest.raises(ValueError):
        el.table(el.E2M1)[0] = 1.0


# ------------------------------------------------------------------------------------------------ encode


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in (el.E4M3FN, el.E4M3FNUZ, el.E5M2)])
def test_encode_unsaturated_matches_ml_dtypes(fmt):
    """FE-8.1, FE-8.2: without saturation the FP8 rounding is ml_dtypes' cast, midpoints, overflow, NaN included."""
    x = probes(fmt, np.random.default_rng(1))
    assert same_code(el.encode(x, fmt, saturate=False), ml_encode(x, fmt), fmt).all()


def test_encode_e8m0_matches_ml_dtypes_on_normal_floats():
    """FE-8.3: E8M0 rounds like ml_dtypes for every positive normal float32 probe, ties up, overflow to NaN."""
    x = probes(el.E8M0, np.random.default_rng(2))
    x = x[(x >= np.finfo(F32).tiny) & ~np.isnan(x)]
    assert same_code(el.encode(x, el.E8M0, saturate=False), ml_encode(x, el.E8M0), el.E8M0).all()


def test_encode_e8m0_float32_subnormals_round_to_nearest():
    """FE-8.3: float32 subnormals take the nearer of 2^-127 and 2^-126, where ml_dtypes and torch both round the
    values strictly between 2^-127 and 1.5 * 2^-127 up (the chapter reports this disagreement). Every 16th
    subnormal bit pattern plus the neighbours of both boundaries."""
    b = np.concatenate([np.arange(1, 1 << 23, 16), 0x00400000 + np.arange(-2, 3), 0x00600000 + np.arange(-2, 3)])
    x = b.astype(np.uint32).view(F32)
    got = el.encode(x, el.E8M0)
    assert np.array_equal(got, (x.astype(np.float64) >= 1.5 * 2.0 ** -127).astype(np.uint8))
    inside = (b > 0x00400000) & (b < 0x00600000)
    assert np.array_equal(got != ml_encode(x, el.E8M0), inside)


def test_encode_e2m1_saturated_matches_ml_dtypes():
    """FE-8.1, FE-8.2: E2M1 saturates like ml_dtypes' float4_e2m1fn (which always saturates), NaN aside."""
    x = probes(el.E2M1, np.random.default_rng(3))
    x = x[~np.isnan(x)]
    assert np.array_equal(el.encode(x, el.E2M1), ml_encode(x, el.E2M1))


@pytest.mark.parametrize(("fmt", "saturate"), [pytest.param(el.E4M3FN, True, id="e4m3fn-saturated"),
                                                pytest.param(el.E4M3FNUZ, False, id="e4m3fnuz"),
                                                pytest.param(el.E5M2, False, id="e5m2")])
def test_encode_matches_torch_cast(fmt, saturate):
    """FE-8.5: torch's .to(float8) is the saturating rounding for E4M3FN (torch >= 2.12) and the non-saturating
    one for E4M3FNUZ and E5M2, on the probes and random float32 bit patterns."""
    torch, dt = torch_dtype(fmt)
    if fmt == el.E4M3FN and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 12):
        pytest.skip(f"torch {torch.__version__} predates saturating E4M3FN casts (pytorch#178817)")
    x = probes(fmt, np.random.default_rng(4))
    ref = torch.from_numpy(x).to(dt).view(torch.uint8).numpy()
    assert same_code(el.encode(x, fmt, saturate=saturate), ref, fmt).all()


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in el.FORMATS])
def test_encode_is_nearest_with_ties_to_even(fmt):
    """FE-8.1, FE-8.3: the code's value is a nearest finite value; at a tie the even code (E8M0: the larger)."""
    t = el.table(fmt).astype(np.float64)
    fin = np.isfinite(t) & ((t > 0) if fmt == el.E8M0 else (t >= 0))
    v, c = t[fin], np.flatnonzero(fin)
    rng = np.random.default_rng(5)
    x = np.concatenate([(v[:-1] + v[1:]) / 2, rng.uniform(0, v.max(), 5000), np.exp2(rng.uniform(-127, 127, 2000))])
    x = x[(x > 0) & (x <= v.max())]
    got = el.decode(el.encode(x, fmt), fmt).astype(np.float64)
    dist = np.abs(v[None, :] - x[:, None])
    assert np.array_equal(np.abs(got - x), dist.min(axis=1))
    tie = (dist == dist.min(axis=1, keepdims=True)).sum(axis=1) == 2
    chosen = el.encode(x[tie], fmt)
    lower = c[np.argmin(np.where(dist[tie] == dist[tie].min(axis=1, keepdims=True), v[None, :], np.inf), axis=1)]
    want = lower + 1 if fmt == el.E8M0 else np.where(lower % 2 == 0, lower, lower + 1)
    assert tie.sum() > 0 and np.array_equal(chosen, want)


@pytest.mark.parametrize("fmt", [pytest.param(f, id=f) for f in el.FORMATS])
def test_saturation_is_a_clamp(fmt):
    """FE-8.2: the saturating encoder equals the non-saturating one applied to the input clamped to +-max."""
    x = probes(fmt, np.random.default_rng(6), n=20_000)
    x = x[~np.isnan(x)]
    if fmt in (el.E8M0, el.UE4M3):
        x = np.abs(x[np.abs(x) > 0]) if fmt == el.E8M0 else np.abs(x)
    m = el.max_finite(fmt)
    sat = el.encode(x, fmt)
    assert np.array_equal(sat, el.encode(np.clip(x, -m, m), fmt, saturate=False))
    assert np.isfinite(el.decode(sat, fmt)).all()


ENCODE_EXAMPLES = [  # (format, value, saturate, code) quoted from FE-8.6
    (el.E4M3FN, 0.3, True, 0x2A), (el.E4M3FN, 17.0, True, 0x58), (el.E4M3FN, 464.0, False, 0x7E),
    (el.E4M3FN, 464.0, True, 0x7E), (el.E4M3FN, 480.0, True, 0x7E), (el.E4M3FN, 480.0, False, 0x7F),
    (el.E4M3FN, -1000.0, True, 0xFE), (el.E4M3FN, -1000.0, False, 0xFF), (el.E4M3FN, -0.0, True, 0x80),
    (el.E4M3FN, 0.0009765625, True, 0x00), (el.E4M3FN, -0.0009765625, True, 0x80),
    (el.E4M3FNUZ, -0.0, True, 0x00), (el.E4M3FNUZ, 248.0, False, 0x80), (el.E4M3FNUZ, 248.0, True, 0x7F),
    (el.E4M3FNUZ, 0.3, True, 0x32),
    (el.E5M2, 1.125, True, 0x3C), (el.E5M2, 61440.0, False, 0x7C), (el.E5M2, 61440.0, True, 0x7B),
    (el.E5M2, -np.inf, False, 0xFC), (el.E5M2, -np.inf, True, 0xFB),
    (el.E8M0, 3.0, True, 0x81), (el.E8M0, 2.9, True, 0x80), (el.E8M0, 2.0 ** -130, True, 0x00),
    (el.E8M0, 1.5 * 2.0 ** 127, True, 0xFE), (el.E8M0, 1.5 * 2.0 ** 127, False, 0xFF),
    (el.E2M1, 5.0, True, 0x6), (el.E2M1, 2.5, True, 0x4), (el.E2M1, 0.25, True, 0x0), (el.E2M1, -0.25, True, 0x8),
    (el.E2M1, 0.75, True, 0x2), (el.E2M1, 7.0, True, 0x7), (el.E2M1, 6.5, False, 0x7),
    (el.UE4M3, 1.0, True, 0x38), (el.UE4M3, 500.0, True, 0x7E), (el.UE4M3, 500.0, False, 0x7F),
    (el.UE4M3, -0.0, True, 0x00),
]


@pytest.mark.parametrize(("fmt", "value", "saturate", "code"),
                         [pytest.param(*e, id=f"{e[0]}-{e[1]}-{'sat' if e[2] else 'nosat'}") for e in ENCODE_EXAMPLES])
def test_encode_worked_example(fmt, value, saturate, code):
    """FE-8.6: the chapter's hand-worked roundings."""
    assert el.encode(np.array([value]), fmt, saturate=saturate).tolist() == [code]


@pytest.mark.parametrize(("fmt", "code"), [pytest.param(f, c, id=f) for f, c in
                                           ((el.E4M3FN, 0x7F), (el.E4M3FNUZ, 0x80), (el.E5M2, 0x7F), (el.E8M0, 0xFF),
                                            (el.UE4M3, 0x7F))])
def test_encode_nan_gives_the_nan_code(fmt, code):
    """FE-8.4: NaN (either sign) becomes the format's NaN code, saturated or not."""
    x = np.array([np.nan, -np.nan])
    assert el.encode(x, fmt).tolist() == el.encode(x, fmt, saturate=False).tolist() == [code, code]


REFUSED = [  # (format, value, saturate, constraint, as the message shows the value) from FE-8.4
    (el.E2M1, np.nan, True, "not NaN (e2m1 has no NaN)", "NaN"),
    (el.E2M1, 7.0, False, "|x| that rounds to at most 6.0 (e2m1 has no infinity or NaN)", "7.0"),
    (el.E8M0, 0.0, True, "positive (E8M0 has neither zero nor sign) for e8m0", "0.0"),
    (el.E8M0, -1.0, True, "positive (E8M0 has neither zero nor sign) for e8m0", "-1.0"),
    (el.UE4M3, -1.0, True, "not negative (unsigned) for ue4m3", "-1.0"),
]


@pytest.mark.parametrize(("fmt", "value", "saturate", "constraint", "shown"),
                         [pytest.param(*r, id=f"{r[0]}-{r[1]}") for r in REFUSED])
def test_encode_refuses_values_the_format_cannot_hold(fmt, value, saturate, constraint, shown):
    """FE-8.4: NaN in E2M1, unsaturated E2M1 overflow, zero or negatives in E8M0, negatives in UE4M3."""
    with pytest.raises(QFormatsError) as e:
        el.encode(np.array([1.0, value]), fmt, saturate=saturate)
    assert (e.value.code, e.value.clause, e.value.tensor, e.value.constraint) == \
        ("argument.invalid", "FE-8.4", "values", constraint)
    assert str(e.value) == f"'values' must be {constraint} (got {shown}) [argument.invalid, FE-8.4]"


def test_unknown_format_is_refused():
    """FE-1.3: only the six names are formats."""
    with pytest.raises(QFormatsError) as e:
        el.decode(np.array([0], np.uint8), "e4m3")
    assert str(e.value) == ("'fmt' must be one of e4m3fn, e4m3fnuz, e5m2, e8m0, e2m1, ue4m3 (got e4m3) "
                            "[argument.invalid, FE-1.3]")


def test_code_outside_the_format_is_refused():
    """FE-1.1: an E2M1 code is a nibble; 16 is no code."""
    with pytest.raises(QFormatsError) as e:
        el.decode(np.array([3, 16]), el.E2M1)
    assert str(e.value) == "'codes' must be e2m1 codes in [0, 15] (got 16) [argument.invalid, FE-1.1]"


def test_ggml_kvalues_are_doubled_e2m1():
    """FE-6.4: ggml's kvalues_mxfp4, as the chapter prints it, is twice FE-6.3 with code 0x8 as +0."""
    from qformats.formats.ggml.mxfp4 import KVALUES_MXFP4

    assert KVALUES_MXFP4.dtype == np.int8
    assert KVALUES_MXFP4.tolist() == [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]
    assert np.array_equal(KVALUES_MXFP4.astype(F32), el.decode(np.arange(16), el.E2M1) * 2)
