"""iq4_nl and iq4_xs (spec/ggml_iquants.md IQ-1.1, IQ-2, IQ-3): the table, layouts, the worked examples,
the nearest-value rule, encoder properties, and the [run] claims about ggml that need its library."""

from __future__ import annotations

import os
import re
from pathlib import Path

import gguf
import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml import iq4
from qformats.formats.ggml.checks import scale_findings

F32 = np.float32
SPEC = Path(__file__).resolve().parents[2] / "spec" / "ggml_iquants.md"
GGML_COMMON = Path(__file__).resolve().parents[2] / ".venv/ggml/ggml_py-0.10.1/vendor/ggml/src/ggml-common.h"
LIB = os.environ.get("QFORMATS_GGML_LIB")
needs_ggml = pytest.mark.skipif(not LIB, reason="set QFORMATS_GGML_LIB to a ggml build to run")


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


def block(hexstr: str, size: int) -> np.ndarray:
    raw = bytes.fromhex(hexstr.replace(" ", ""))
    assert len(raw) == size
    return np.frombuffer(raw, np.uint8).reshape(1, size)


# ---------------------------------------------------------------------------------------------
# IQ-1.1 the table
# ---------------------------------------------------------------------------------------------


def _spec_table() -> list[int]:
    section = SPEC.read_text(encoding="utf-8").split("### IQ-1.1", 1)[1]
    line = next(ln for ln in section.splitlines() if ln.startswith("kv "))
    return [int(v.replace("−", "-")) for v in line.split()[1:]]


def test_table_is_the_spec_table():
    """IQ-1.1: "a decoder MUST use these values exactly" — the module's table is the spec's, and its
    midpoints are the ones the spec lists."""
    assert _spec_table() == iq4.KVALUES_IQ4NL.tolist()
    assert iq4.KVALUES_IQ4NL.dtype == np.int8
    v = iq4.KVALUES_IQ4NL.astype(float)
    assert ((v[1:] + v[:-1]) / 2).tolist() == [-115.5, -93.5, -74, -57, -42, -28.5, -16, -4.5, 7, 19, 31.5,
                                               45.5, 61, 79, 101]


@pytest.mark.skipif(not GGML_COMMON.exists(), reason="ggml-py sdist source not unpacked under .venv/ggml")
def test_table_is_ggml_common_h():
    """IQ-1.1 provenance: the values are ggml 0.10.1 src/ggml-common.h `kvalues_iq4nl`."""
    src = GGML_COMMON.read_text()
    body = re.search(r"GGML_TABLE_BEGIN\(int8_t, kvalues_iq4nl, 16\)(.*?)GGML_TABLE_END", src, re.S).group(1)
    assert [int(t) for t in re.findall(r"-?\d+", body)] == iq4.KVALUES_IQ4NL.tolist()


# ---------------------------------------------------------------------------------------------
# IQ-2.1, IQ-3.1 geometry and layout
# ---------------------------------------------------------------------------------------------


def test_geometry():
    """IQ-2.1: iq4_nl is 2 + 32/2 = 18 bytes per 32 weights (type 20); IQ-3.1: iq4_xs is
    2 + 2 + 4 + 128 = 136 bytes per 256 weights (type 23); gguf-py agrees."""
    nl, xs = ggml.TYPES["iq4_nl"], ggml.TYPES["iq4_xs"]
    assert (nl.block_size, nl.type_size, nl.ggml.type_id) == (32, 2 + 32 // 2, 20)
    assert (xs.block_size, xs.type_size, xs.ggml.type_id) == (256, 2 + 2 + 256 // 64 + 256 // 2, 23)
    assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.IQ4_NL] == (32, 18)
    assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.IQ4_XS] == (256, 136)
    assert nl.clause == "IQ-2" and xs.clause == "IQ-3"


def test_code_order_is_low_nibbles_then_high():
    """IQ-2.1: "qs[j] = q[j] | q[j + 16] << 4" — byte j holds weights j and j + 16, not a neighbouring pair."""
    qs = np.zeros((1, 16), np.uint8)
    qs[0, 0] = 0x21                       # q[0] = 1, q[16] = 2
    qs[0, 1] = 0x43                       # q[1] = 3, q[17] = 4
    codes = iq4.unpack_codes(qs)[0]
    assert codes[[0, 16, 1, 17]].tolist() == [1, 2, 3, 4]
    assert codes[[2, 15, 18, 31]].tolist() == [0, 0, 0, 0]
    assert np.array_equal(iq4.pack_codes(iq4.unpack_codes(qs)), qs)


def test_xs_sub_scale_packing_round_trips():
    """IQ-3.2: every ls in 0..63 in every group survives pack -> unpack; all 48 bits are used."""
    rng = np.random.default_rng(5)
    ls = rng.integers(0, 64, (500, 8))
    ls[0] = 63
    h, lo = iq4.pack_xs_scales(ls)
    blk = np.zeros((500, 136), np.uint8)
    blk[:, 2:4] = h.astype("<u2")[:, None].view(np.uint8)
    blk[:, 4:8] = lo
    assert np.array_equal(iq4.xs_sub_scales(blk), ls)
    assert (h[0], lo[0].tolist()) == (0xFFFF, [0xFF] * 4)


# ---------------------------------------------------------------------------------------------
# IQ-2.8, IQ-3.6 worked examples (decode)
# ---------------------------------------------------------------------------------------------


def test_iq4_nl_decode_example():
    """IQ-2.8: d = 0x3800 (0.5), qs[0] = 0x8f, qs[1] = 0x70, qs[2..15] = 0x00 decodes to y[0] = 56.5,
    y[16] = 0.5, y[1] = -63.5, y[17] = -5, all other weights -63.5."""
    y = ggml.dequantize("iq4_nl", block("0038 8f70" + "00" * 14, 18))[0]
    want = np.full(32, -63.5, F32)
    want[[0, 16, 1, 17]] = [56.5, 0.5, -63.5, -5.0]
    assert np.array_equal(bits(y), bits(want))


def test_iq4_xs_decode_example():
    """IQ-3.6: d = 0x3400, scales_h = 0x71e8, scales_l = 00 f1 1f 00, every qs byte 0x8f gives
    ls = [0, 32, 33, 63, 31, 1, 48, 16], dl = [-8, 0, 0.25, 7.75, -0.25, -7.75, 4, -4];
    y[32ib] = dl * 113 and y[32ib + 16] = dl * 1."""
    blk = block("0034 e871 00f11f00" + "8f" * 128, 136)
    assert iq4.xs_sub_scales(blk)[0].tolist() == [0, 32, 33, 63, 31, 1, 48, 16]
    y = ggml.dequantize("iq4_xs", blk)[0].reshape(8, 2, 16)
    assert y[:, 0, 0].tolist() == [-904, 0, 28.25, 875.75, -28.25, -875.75, 452, -452]
    assert y[:, 1, 0].tolist() == [-8, 0, 0.25, 7.75, -0.25, -7.75, 4, -4]
    assert (y[:, :, :] == y[:, :, :1]).all()             # within a half-group every code is the same


def test_decoders_agree_with_gguf_py():
    """IQ-2.2, IQ-3.3 (exact products): gguf-py 0.19.0's independent NumPy decoders give the same floats
    on random blocks with finite d."""
    rng = np.random.default_rng(11)
    for name, qtype in (("iq4_nl", gguf.GGMLQuantizationType.IQ4_NL), ("iq4_xs", gguf.GGMLQuantizationType.IQ4_XS)):
        bt = ggml.TYPES[name]
        blk = rng.integers(0, 256, (64, bt.type_size), dtype=np.uint8)
        blk[:, 0:2] = (rng.standard_normal(64) * 0.01).astype("<f2")[:, None].view(np.uint8)
        ours = ggml.dequantize(name, blk.reshape(1, -1))
        theirs = gguf.quants.dequantize(blk, qtype).reshape(1, -1)
        assert np.array_equal(bits(ours), bits(theirs.astype(F32))), name


def test_decode_is_exact():
    """IQ-2.2, IQ-3.3: y is exactly d * (ls - 32) * kv (float64 reference, then float32 without rounding)."""
    rng = np.random.default_rng(3)
    blk = rng.integers(0, 256, (256, 136), dtype=np.uint8)
    bad = (blk[:, 1] & 0x7C) == 0x7C                   # exponent all ones: inf/NaN, not this property
    blk[bad, 1] &= 0xBF
    d = np.ascontiguousarray(blk[:, 0:2]).view("<f2").astype(np.float64)
    ls = iq4.xs_sub_scales(blk).astype(np.float64) - 32
    q = iq4.unpack_codes(blk[:, 8:].reshape(-1, 8, 16))
    want = d[:, :, None] * ls[:, :, None] * iq4.KVALUES_IQ4NL.astype(np.float64)[q]
    got = ggml.dequantize("iq4_xs", blk.reshape(1, -1)).reshape(256, 8, 32)
    assert np.array_equal(got.astype(np.float64), want)


# ---------------------------------------------------------------------------------------------
# IQ-2.4 nearest table value
# ---------------------------------------------------------------------------------------------


def c_best_index(v: np.ndarray) -> np.ndarray:
    """IQ-2.4's pseudocode as written (ggml best_index_int8): the bisection and the float32 tie test."""
    kv = iq4.KVALUES_IQ4NL.astype(F32)
    v = np.asarray(v, F32)
    ml = np.zeros(v.shape, np.intp)
    mu = np.full(v.shape, 15, np.intp)
    for _ in range(4):                                       # 15 -> 8 -> 4 -> 2 -> 1
        go = mu - ml > 1
        mav = (ml + mu) // 2
        below = v < kv[mav]
        mu = np.where(go & below, mav, mu)
        ml = np.where(go & ~below, mav, ml)
    out = np.where((v - kv[mu - 1]) < (kv[mu] - v), mu - 1, mu)
    out = np.where(v >= kv[15], 15, out)
    return np.where(v <= kv[0], 0, out)


def test_tie_test_switches_exactly_at_the_midpoints():
    """IQ-2.4: C's last test is true at the float32 just below each midpoint m[i] and false at m[i];
    with its monotonicity this makes the code the number of midpoints <= v."""
    kv = iq4.KVALUES_IQ4NL.astype(F32)
    for i in range(1, 16):
        m = (kv[i - 1] + kv[i]) / F32(2)
        below = np.nextafter(m, F32(-np.inf))
        assert (below - kv[i - 1]) < (kv[i] - below), i
        assert not (m - kv[i - 1]) < (kv[i] - m), i


def test_best_index_is_the_bisection():
    """IQ-2.4: the closed form (a lookup by floor(2v)) equals the bisection everywhere: around every
    midpoint and table value (+-4096 ulps), on random floats of every magnitude, and on specials
    (NaN -> 15, -inf -> 0, +inf -> 15, -0.0 -> 8)."""
    rng = np.random.default_rng(0)
    kv = iq4.KVALUES_IQ4NL.astype(F32)
    centres = np.concatenate([(kv[1:] + kv[:-1]) / 2, kv, [F32(-128), F32(114), F32(0)]]).astype(F32)
    steps = np.arange(-4096, 4097)
    near = (centres.view(np.int32)[:, None] + np.where(centres[:, None] < 0, -steps, steps)).astype(np.int32).view(F32)
    wide = (rng.standard_normal(200_000) * 10.0 ** rng.uniform(-3, 38, 200_000)).astype(F32)
    grid = (rng.integers(-520, 520, 20_000) / 4).astype(F32)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 3e38, -3e38], F32)
    v = np.concatenate([near.ravel(), wide, grid, specials])
    assert np.array_equal(iq4.best_index(v), c_best_index(v))
    assert iq4.best_index(specials[:5]).tolist() == [15, 15, 15, 0, 8]


# ---------------------------------------------------------------------------------------------
# IQ-2.7, IQ-3.5 encoders: worked examples and properties
# ---------------------------------------------------------------------------------------------


def test_iq4_nl_encode_example():
    """IQ-2.8: x = [1, 0.5, 0, ..., 0] encodes to `07 a0 80 83` and fourteen `88`; it decodes to
    y[0] = 127*1031/131072, y[1] = 65*1031/131072, every other y = -1031/131072."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [1.0, 0.5]
    out = ggml.quantize("iq4_nl", x)
    assert out.tobytes().hex() == "07a08083" + "88" * 14
    y = ggml.dequantize("iq4_nl", out)[0]
    assert y[0] == F32(127 * 1031 / 131072) and y[1] == F32(65 * 1031 / 131072)
    assert (y[2:] == F32(-1031 / 131072)).all()


def test_iq4_nl_encode_example_arithmetic():
    """IQ-2.8: the two competing trials: 121.625 / 13959.25 (trial 0) loses to -135.125 / 17185.25
    (itry = -7) because sumqx^2 = 18258.77 > best * sumq2 = 18211.2; s = -0.007862847, fp16 0xa007."""
    d0 = F32(121.625) / F32(13959.25)
    best = d0 * F32(121.625)
    assert abs(float(best) - 1.05970) < 1e-5 and abs(float(best * F32(17185.25)) - 18211.2) < 0.1
    assert F32(-135.125) * F32(-135.125) > best * F32(17185.25)
    s = F32(-135.125) / F32(17185.25)
    assert str(s) == "-0.007862847" and np.float16(s).view(np.uint16) == 0xA007


def test_iq4_xs_encode_example():
    """IQ-3.6: group ib holding 2^ib, 2^(ib-1), zeros encodes to `07 28 5a 15 00 ef 8c 00`, groups 0 and 1
    all `88`, groups 2..7 `80 83` then fourteen `88`; ls = [32, 32, 31, 30, 28, 24, 16, 0]."""
    x = np.zeros((1, 256), F32)
    for ib in range(8):
        x[0, 32 * ib:32 * ib + 2] = [2.0 ** ib, 2.0 ** ib / 2]
    out = ggml.quantize("iq4_xs", x)
    group = ["88" * 16] * 2 + ["8083" + "88" * 14] * 6
    assert out.tobytes().hex() == "07285a1500ef8c00" + "".join(group)
    assert iq4.xs_sub_scales(out)[0].tolist() == [32, 32, 31, 30, 28, 24, 16, 0]
    y = ggml.dequantize("iq4_xs", out)[0]
    assert (y[:64] == 0).all()                           # "the inputs 1, 0.5, 2, 1 are lost"


def test_all_zero_blocks():
    """IQ-2.7: an all-zero iq4_nl block is `00 00` and sixteen `88`; IQ-3.6: an all-zero iq4_xs block has
    d = -0.0 (`00 80`), scales_h `aa aa`, scales_l 0, every qs byte `88` — with or without importance."""
    w32, w256 = np.ones(32, F32), np.ones(256, F32)
    for imp32, imp256 in ((None, None), (w32, w256)):
        assert ggml.quantize("iq4_nl", np.zeros((1, 32), F32), imp32).tobytes().hex() == "0000" + "88" * 16
        assert ggml.quantize("iq4_xs", np.zeros((1, 256), F32), imp256).tobytes().hex() == \
            "0080aaaa00000000" + "88" * 128


def test_huge_input_stores_infinite_d():
    """IQ-2.7: "|s| >= 65520 stores d = ±inf, an invalid block" — x[0] = 1e7 gives d = 0x7c00 (ggml's
    bytes `00 7c 8f 88 ...`), which check_blocks refuses."""
    x = np.zeros((1, 32), F32)
    x[0, :2] = [1e7, 3.0]
    out = ggml.quantize("iq4_nl", x)
    assert out[0, :4].tobytes().hex() == "007c8f88"
    with pytest.raises(QFormatsError) as err:
        ggml.check_blocks("iq4_nl", out)
    assert err.value.code == "ggml.scale.nonfinite"


@pytest.mark.parametrize("name", ["iq4_nl", "iq4_xs"])
def test_power_of_two_scaling(name):
    """IQ-2.5 .. IQ-2.7, IQ-3.5: every float32 step scales exactly by a power of two, so x * 2^k gives the
    same codes and sub-scales and d * 2^k (while d stays an fp16 normal), and importance * 2^k the
    same bytes."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 512)).astype(F32)
    w = rng.gamma(2.0, 1.0, 512).astype(F32)
    size = ggml.TYPES[name].type_size
    for imp in (None, w):
        base = ggml.quantize(name, x, imp).reshape(-1, size)
        for k in (-3, 5):
            scaled = ggml.quantize(name, x * F32(2.0 ** k), imp).reshape(-1, size)
            assert np.array_equal(scaled[:, 2:], base[:, 2:])
            d0 = np.ascontiguousarray(base[:, :2]).view("<f2").astype(np.float64)
            d1 = np.ascontiguousarray(scaled[:, :2]).view("<f2").astype(np.float64)
            assert np.array_equal(d1, d0 * 2.0 ** k)
    assert np.array_equal(ggml.quantize(name, x, w * F32(8)), ggml.quantize(name, x, w))


@pytest.mark.parametrize("name", ["iq4_nl", "iq4_xs"])
def test_encoder_error_is_bounded(name):
    """IQ-2.7, IQ-3.5: codes are the nearest table values for the chosen scale, so on Gaussian rows the
    reconstruction error is small: RMS below 10 % of the RMS of x (4.25-4.5 bits per weight)."""
    x = np.random.default_rng(1).standard_normal((8, 1024)).astype(F32)
    y = ggml.dequantize(name, ggml.quantize(name, x))
    assert np.sqrt(np.mean((y - x) ** 2)) < 0.1 * np.sqrt(np.mean(x ** 2))


def test_negative_d_is_written_and_not_flagged():
    """IQ-2.3, IQ-3.4: d < 0 is ordinary (the encoders write it), so no field is never_negative and a
    negative d gives no GGML-3.2 warning; a non-finite d is GGML-3.1's error."""
    x = np.zeros((1, 256), F32)
    x[0, :2] = [1.0, 0.5]
    nl = ggml.quantize("iq4_nl", x)
    assert np.ascontiguousarray(nl[0, :2]).view("<f2")[0] < 0
    for name in ("iq4_nl", "iq4_xs"):
        bt = ggml.TYPES[name]
        assert bt.never_negative == () and bt.importance and not bt.requires_importance
        blk = np.zeros((1, bt.type_size), np.uint8)
        blk[0, :2] = np.array([-1.5], "<f2").view(np.uint8)
        assert scale_findings(bt, blk, "t") == []
        blk[0, :2] = np.array([np.inf], "<f2").view(np.uint8)
        with pytest.raises(QFormatsError) as err:
            ggml.check_blocks(name, blk)
        assert err.value.code == "ggml.scale.nonfinite"


def test_encoder_input_errors():
    """GGML-1.2, GGML-4.2 for these types: n must be a multiple of 32 (iq4_nl) / 256 (iq4_xs); the
    importance vector must be (n,) float32."""
    cases = [("iq4_nl", np.zeros((1, 48), F32), None, "ggml.n.not_multiple"),
             ("iq4_xs", np.zeros((1, 32), F32), None, "ggml.n.not_multiple"),
             ("iq4_xs", np.zeros((1, 256), F32), np.ones(255, F32), "ggml.importance.shape"),
             ("iq4_nl", np.zeros((1, 32), F32), np.ones(32, np.float64), "ggml.input.dtype")]
    for name, x, w, code in cases:
        with pytest.raises(QFormatsError) as err:
            ggml.quantize(name, x, w)
        assert err.value.code == code, (name, err.value.code)


def test_fp16_rounding_of_nan_is_ggmls():
    """IQ-2 notation: fp16 maps every NaN to sign | 0x7E00 (GGML_FP32_TO_FP16), other values round to
    nearest even."""
    v = np.array([np.nan, 1.0, 1e5, -1e-8], F32)
    v = np.concatenate([v, np.array([0x7F800001, 0xFFC00123], np.uint32).view(F32)])
    assert iq4.fp16_ggml(v).tolist() == [0x7E00, 0x3C00, 0x7C00, 0x8000, 0x7E00, 0xFE00]


# ---------------------------------------------------------------------------------------------
# [run] claims about ggml itself
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def oracle():
    from conformance.adapters import ggml as ggml_lib

    return ggml_lib


def _row_ref(oracle, x: np.ndarray) -> np.ndarray:
    """ggml quantize_row_iq4_nl_ref on one row."""
    import ctypes

    fn = oracle.library().quantize_row_iq4_nl_ref
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    x = np.ascontiguousarray(x, F32)
    out = np.zeros(x.size // 32 * 18, np.uint8)
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out.reshape(-1, 18)


@needs_ggml
def test_quantize_row_iq4_nl_ref_is_not_the_encoder(oracle):
    """IQ-2.7 [run]: quantize_row_iq4_nl_ref (ntry = -1) differs from quantize_iq4_nl in 42 of 64 blocks of a
    Gaussian row, and for an all-zero block keeps the previous block's codes."""
    x = np.random.default_rng(0).standard_normal(32 * 64).astype(F32)
    x[64:96] = 0
    ref = _row_ref(oracle, x)
    enc = oracle.quantize("iq4_nl", x[None]).reshape(-1, 18)
    assert int((ref != enc).any(axis=1).sum()) == 42
    assert ref[2, :2].tobytes() == b"\0\0" and np.array_equal(ref[2, 2:], ref[1, 2:])
    assert enc[2].tobytes().hex() == "0000" + "88" * 16
    assert np.array_equal(ggml.quantize("iq4_nl", x[None]).reshape(-1, 18), enc)


@needs_ggml
def test_negative_d_share(oracle):
    """IQ-2.3, IQ-3.4 [run]: negative d in 4115 (4103 with importance) of 8192 iq4_nl blocks and 514 (529) of
    1024 iq4_xs blocks of a Gaussian 64x4096 matrix."""
    x = np.random.default_rng(0).standard_normal((64, 4096)).astype(F32)
    w = np.random.default_rng(1).gamma(2.0, 1.0, 4096).astype(F32)
    for name, size, want in (("iq4_nl", 18, (4115, 4103)), ("iq4_xs", 136, (514, 529))):
        got = tuple(int((np.ascontiguousarray(oracle.quantize(name, x, imp).reshape(-1, size)[:, :2])
                         .view("<f2") < 0).sum()) for imp in (None, w))
        assert got == want, name


@needs_ggml
def test_iq4_xs_ref_is_quantize_iq4_xs(oracle):
    """IQ-3.5 [run]: quantize_row_iq4_xs_ref is quantize_iq4_xs without an importance vector."""
    import ctypes

    fn = oracle.library().quantize_row_iq4_xs_ref
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    x = np.random.default_rng(2).standard_t(3, 4096).astype(F32)
    out = np.zeros(4096 // 256 * 136, np.uint8)
    fn(x.ctypes.data, out.ctypes.data, x.size)
    assert np.array_equal(out, oracle.quantize("iq4_xs", x[None])[0])
