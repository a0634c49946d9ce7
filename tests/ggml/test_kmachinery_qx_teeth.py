"""Tests with teeth for the symmetric K-quant searches (issue 33 item 3: ``qformats/formats/ggml/kmachinery_qx.py``;
spec/ggml_kquants.md KQ-1.1, KQ-1.2).

``make_qx_quants`` and ``make_q3_quants`` are static in ggml, so their expected values come through q3_K, which
calls both (KQ-3.4, KQ-3.5): what ggml 0.10.1's ``quantize_q3_K`` wrote for rows that reach the searches' rare
branches (``kmachinery_qx_teeth_ggml.npz``, recorded by ``record_kmachinery_qx_teeth.py`` and checked against the
live library when QFORMATS_GGML_LIB is set). ``wrap_int8`` is checked on two's complement worked by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from qformats.formats import ggml
from qformats.formats.ggml.kmachinery_qx import make_qx_quants, wrap_int8

TEETH = Path(__file__).with_name("kmachinery_qx_teeth_ggml.npz")
CASES = {
    "ref_six_passes": "KQ-1.2: the descent runs five passes at most, not more",
    "ref_same_code_steps": "KQ-1.2: a step whose new code equals the old one is never taken",
    "ref_one_live_group": "KQ-1.2: a single group still changing keeps descending",
    "imp_nan_sub_scale": "KQ-1.1: a NaN among finitely weighted values: codes from iscale * x, NaN scale",
    "imp_inf_sub_scale": "KQ-1.1: -inf among finitely weighted values: all codes 0, suml2 = 0, scale 0",
}


def recorded(case: str) -> dict[str, np.ndarray]:
    with np.load(TEETH) as data:
        return {k[len(case) + 1:]: data[k] for k in data.files if k.startswith(case + ".")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_search_through_q3k_is_ggmls(case):
    """KQ-1.1 / KQ-1.2 through KQ-3.4 / KQ-3.5: q3_K writes ggml's bytes on rows that reach the searches' rare
    branches (see ``CASES`` and record_kmachinery_qx_teeth.py)."""
    c = recorded(case)
    np.testing.assert_array_equal(ggml.quantize("q3_k", c["x"], importance=c.get("w")), c["expected"])


def test_imp_special_rows_write_nan_and_zero_super_scales():
    """KQ-1.1 by hand: the NaN row's second search returns NaN (``suml2 != 0``), the -inf row's returns 0 (every
    code 0, ``suml2 = 0``); q3_K stores that as the super-block scale d (bytes 108..109, fp16)."""
    nan_d = recorded("imp_nan_sub_scale")["expected"][0, 108:110].view("<f2")[0]
    inf_d = recorded("imp_inf_sub_scale")["expected"][0, 108:110].view("<f2")[0]
    assert np.isnan(nan_d) and inf_d == 0


@pytest.mark.skipif(not os.environ.get("QFORMATS_GGML_LIB"), reason="set QFORMATS_GGML_LIB to check the recording")
@pytest.mark.parametrize("case", sorted(CASES))
def test_recording_is_the_live_librarys(case):
    """The recorded bytes are what the live ggml build writes now (the recording is not stale)."""
    lib = pytest.importorskip("conformance.adapters.ggml")    # the repository root (absent in make mutation's copy)

    c = recorded(case)
    np.testing.assert_array_equal(lib.quantize("q3_k", c["x"], c.get("w")), c["expected"])


def test_make_qx_quants_nan_group_whose_suml2_cancels_to_zero():
    """KQ-1.1 worked by hand (q6_K's importance path passes its weights unchanged, any sign, so a NaN weight's
    row can carry a finite weight): x = [NaN, 1, -1, 0 ...], w = [1, 961, -1024, 1 ...], nmax 32. max = 1,
    iscale = -32, codes l = [0 (NaN), -32, 31 (32 clamped), 0 ...]; sumlx is NaN, suml2 = (961 * -32) * -32 +
    (-1024 * 31) * 31 = 984064 - 984064 = 0 exactly, so scale = 0 (``suml2 ? ... : 0``), best = NaN and no trial
    is taken: scale 0, L = l + 32."""
    x = np.zeros((16, 1), np.float32)
    x[:3, 0] = np.nan, 1, -1
    w = np.ones((16, 1), np.float32)
    w[1:3, 0] = 961, -1024
    scale, L = make_qx_quants(x, 32, w)
    assert scale.tolist() == [0.0]
    np.testing.assert_array_equal(L[:, 0], [32, 0, 63] + [32] * 13)


def test_wrap_int8_is_twos_complement_as_int32():
    """KQ-1.1's callers store ints into int8_t: 127 stays, 128 -> -128, 255 -> -1, 256 -> 0, -129 -> 127,
    -128 stays; the result is int32 whatever integer type comes in."""
    got = wrap_int8([127, 128, 255, 256, -129, -128])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [127, -128, -1, 0, 127, -128])
    assert wrap_int8(np.array([383], np.int64)).dtype == np.int32
