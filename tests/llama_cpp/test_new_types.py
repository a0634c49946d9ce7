"""nvfp4, q1_0 and q2_0 against llama.cpp's ggml 0.25.3 (spec/ggml_ternary_fp4.md MX-2, spec/ggml_legacy.md
LEG-9, LEG-10; spec/ggml.md's type table).

q2_0 is absent from the pinned oracle (ggml 0.10.1), so this is where its decoder, reference encoder and
validity verdict are held to ggml; nvfp4 and q1_0 are checked against 0.10.1 by tests/ggml/test_oracle.py and
here against 0.25.3, with the edges random rows rarely reach: the UE4M3 rounding at every binade boundary,
tiny and huge block maxima, the (int) conversion of NaN and inf, and the NaN signs of the two decoders.
Also in test_second_oracle.py (every registered type, by the registry); this file adds what is special to them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ggml"))

from llama_tools import LLAMA, SKIP_REASON, newer_ggml, seeded_rng  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats import ggml  # noqa: E402
from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks  # noqa: E402
from test_oracle import encoder_rows  # noqa: E402

pytestmark = pytest.mark.skipif(not LLAMA, reason=SKIP_REASON)

F32 = np.float32
NEW = ["nvfp4", "q1_0", "q2_0"]


@pytest.fixture(scope="module")
def newer():
    return newer_ggml()


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, F32).view(np.uint32)


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("scale_class", list(SCALE_CLASSES))
def test_decoder_is_bit_identical_to_ggml_0_25_3(newer, name, scale_class):
    """LEG-9.2, LEG-10.2, MX-2.3 (GGML-2.2): random bytes of every scale class, 64 rows of 512, bit for bit."""
    blocks = random_blocks(ggml.TYPES[name], seeded_rng(name, scale_class), 64, 512, scale_class)
    assert np.array_equal(bits(ggml.dequantize(name, blocks)), bits(newer.dequantize(name, blocks)))


@pytest.mark.parametrize("name", NEW)
def test_reference_encoder_is_byte_identical_to_ggml_0_25_3(newer, name):
    """LEG-9.4, LEG-10.4, MX-2.5 (GGML-4.4): quantize_<type> on 3 x 104 rows (ties, zero rows, inf/NaN,
    subnormals, magnitudes 1e-12 .. 1e12)."""
    for seed in range(3):
        x = encoder_rows(seeded_rng("ref", name, seed), 512)
        assert np.array_equal(ggml.quantize(name, x), newer.quantize(name, x)), seed


@pytest.mark.parametrize("name", NEW)
def test_ggml_ignores_an_importance_vector(newer, name):
    """LEG-9.5, LEG-10.5, MX-2.5: quantize_<type> with quant_weights writes the bytes it writes without, which
    are qformats' reference bytes; so qformats refuses the vector (GGML-4.2) and loses nothing."""
    rng = seeded_rng("imatrix", name)
    x = encoder_rows(rng, 512)
    w = rng.gamma(2.0, 1.0, 512).astype(F32)
    assert np.array_equal(newer.quantize(name, x, importance=w), ggml.quantize(name, x))
    with pytest.raises(QFormatsError):
        ggml.quantize(name, x, importance=w)


@pytest.mark.parametrize("name", NEW)
def test_validity_agrees_with_ggml_validate_row_data(newer, name, capfd):
    """LEG-9.3, LEG-10.3, MX-2.4 (GGML-3.1): a row is refused by ggml 0.25.3 exactly when check_blocks refuses
    it: a non-finite d for q1_0 / q2_0, never for nvfp4."""
    bt = ggml.TYPES[name]
    rng = seeded_rng("validate", name)
    verdicts = set()
    for scale_class in ("random_bits", "nonfinite", "negative", "subnormal", "max"):
        for row in random_blocks(bt, rng, 16, 512, scale_class):
            try:
                ggml.check_blocks(name, row[None, :])
                ours = True
            except QFormatsError as err:
                assert err.code == "ggml.scale.nonfinite", err
                ours = False
            assert ours == newer.validate_row_data(bt.ggml.type_id, row), (scale_class, row[:8])
            verdicts.add(ours)
    assert verdicts == ({True} if name == "nvfp4" else {True, False})
    capfd.readouterr()                          # ggml prints each refusal to stderr


def _amax_sweep() -> np.ndarray:
    """Block maxima whose amax / 6 covers the UE4M3 conversion: a stride through every binade from 2^-30 to
    2^13, and +-40 ulps around each mantissa sixteenth (the rounding bit), the subnormal cap, 240, 248 and 448."""
    lo, hi = F32(2.0 ** -30).view(np.uint32), F32(2.0 ** 13).view(np.uint32)
    stride = np.arange(lo, hi, 20011, dtype=np.uint32)
    centres = [F32(2.0 ** e * (1 + m / 16)) * F32(6) for e in range(-30, 13) for m in range(16)]
    centres += [F32(t) * F32(6) for t in (15 * 2.0 ** -10, 13 * 2.0 ** -10, 2.0 ** -10, 2.0 ** -6, 240, 248, 448)]
    around = (np.array(centres, F32).view(np.uint32)[:, None].astype(np.int64) + np.arange(-40, 41)).ravel()
    return np.concatenate([stride, around.astype(np.uint32)]).view(F32)


def test_nvfp4_ue4m3_rounding_at_every_boundary(newer):
    """MX-2.5 step 2: sub-blocks whose maximum sweeps the UE4M3 conversion (subnormal cap, ties away from zero,
    carries, the clamp to 0x7E) get ggml's scale byte and codes, byte for byte."""
    amax = _amax_sweep()
    amax = np.resize(amax, -(-amax.size // 32) * 32)              # whole rows of 8 blocks
    rng = seeded_rng("ue4m3")
    sub = (amax[:, None] * rng.uniform(-1, 1, (amax.size, 16))).astype(F32)
    sub[np.arange(amax.size), rng.integers(0, 16, amax.size)] = amax * rng.choice([F32(-1), F32(1)], amax.size)
    x = sub.reshape(-1, 512)
    assert np.array_equal(ggml.quantize("nvfp4", x), newer.quantize("nvfp4", x))


@pytest.mark.parametrize("name", NEW)
def test_extreme_block_maxima(newer, name):
    """LEG-9.4, LEG-10.4 (id = 1/d overflowing, the (int) of NaN and inf), MX-2.5: blocks whose maximum is a
    float32 subnormal, 2^-126 .. 2^-128, around float16's 65504, or FLT_MAX, with zeros, ties, NaN and inf."""
    rng = seeded_rng("extreme", name)
    rows = []
    for scale in (1e-45, 1e-40, 2.0 ** -128, 2.0 ** -127, 2.0 ** -126, 1e-30, 1.0, 65504, 65520, 1e5, 3.4028235e38):
        with np.errstate(over="ignore"):        # 3.4e38 * a normal sample: inf, like the specials below
            r = (rng.standard_normal((8, 512)) * scale).astype(F32)
            r[7] = ((rng.integers(-4, 4, 512) + 0.5) * scale).astype(F32)
        r[1], r[2] = F32(scale), -F32(scale)
        r[3, ::3] = 0
        r[4, 5], r[5, 7], r[6, 9] = np.nan, np.inf, -np.inf
        rows.append(r)
    x = np.concatenate(rows)
    assert np.array_equal(ggml.quantize(name, x), newer.quantize(name, x))


def test_nan_signs_of_the_two_decoders(newer):
    """LEG-9.2, LEG-10.2: q1_0 negates (-d flips a NaN's sign), q2_0 multiplies (-1 * NaN keeps it on x86):
    with d = +NaN, code/bit 0 gives -NaN for q1_0 and +NaN for q2_0, in ggml as in qformats."""
    blk = np.zeros((1, 18), np.uint8)
    blk[0, :2] = [0x00, 0x7E]                                      # d = +NaN, every code/bit 0
    for name, want in (("q1_0", 0xFFC00000), ("q2_0", 0x7FC00000)):
        theirs, ours = bits(newer.dequantize(name, blk))[0, 0], bits(ggml.dequantize(name, blk))[0, 0]
        assert (int(theirs), int(ours)) == (want, want), name


def test_the_pinned_oracle_has_no_q2_0():
    """spec/ggml.md type table: ggml 0.10.1 ends at Q1_0 (41); its library exports nvfp4 and q1_0 but no q2_0."""
    path = os.environ.get("QFORMATS_GGML_LIB")
    if not path:
        pytest.skip("set QFORMATS_GGML_LIB to the pinned ggml build to compare")
    import ctypes

    lib = ctypes.CDLL(path)
    assert [hasattr(lib, f"dequantize_row_{t}") for t in NEW] == [True, True, False]
