"""Q4K-4 / Q4K-3 against a live ggml build: random inputs, byte-exact and bit-exact.

``make test`` builds ggml 0.10.1's ggml-base from the ggml-py sdist (``make ggml-oracle``) and names
it in QFORMATS_GGML_LIB, so these tests run in CI. Any other ggml build may be named instead (e.g. a
llama.cpp release's ggml-base) if it is built without FMA contraction (Q4K-4.1); ggml before 2025-06
(b9061570) also needs ``ggml_init`` to have run. Without the variable the tests are skipped.
"""

import os

import numpy as np
import pytest

from conformance import run_kernel
from conformance.adapters import ggml as ggml_lib
from qformats.formats import q4_k
from q4k_golden import bits, load

LIB_PATH = os.environ.get("QFORMATS_GGML_LIB")
pytestmark = pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")


@pytest.fixture(scope="module")
def ggml():
    def quantize(x, w=None):
        return ggml_lib.q4_k_quantize(x=x, importance=w)

    def dequantize(b):
        return ggml_lib.q4_k_dequantize(blocks=b)

    # the library itself must reproduce the golden bytes, or it is not a valid oracle (FMA build, old ggml)
    assert (quantize(load("main_input_f32.npy")) == load("main_q4k_blocks_u8.npy")).all()
    return quantize, dequantize


def test_oracle_is_the_recorded_ggml():
    """Q4K-6.2: the library under test is the ggml version the Makefile pins (when it says which)."""
    expected = os.environ.get("QFORMATS_GGML_VERSION")
    if not expected:
        pytest.skip("QFORMATS_GGML_VERSION not set: a ggml build of the user's choosing")
    assert ggml_lib.version()[0] == expected


def test_ggml_dequantize_conforms():
    """Q4K-6.1: ggml's dequantize_row_q4_K passes every q4_K decoder case, as a conformance subject."""
    result = run_kernel("conformance.adapters.ggml:q4_k_dequantize", fmt="q4_k", op="dequantize", jobs=1)
    decoded = [c for c in result.cases if "/invalid/" not in c.id]     # non-conforming input: KC-4.2 (validating level)
    assert result.conforms and sum(c.status == "pass" for c in decoded) == len(decoded) > 70
    assert result.level()["readings"] == {"nonfinite_scales": "evaluation"}


def test_ggml_quantize_conforms():
    """Q4K-6.2: ggml's quantize_q4_K (the reference path) passes every q4_K encoder case, as a subject."""
    result = run_kernel("conformance.adapters.ggml:q4_k_quantize", fmt="q4_k", op="quantize", jobs=1)
    assert result.conforms and result.counts["pass"] == len(result.cases) > 70
    assert all("byte-identical" in case.detail for case in result.cases)   # reference-equivalent, not just valid


def _inputs(rng, kind):
    x = {
        "gaussian": lambda: rng.standard_normal((8, 1024)),
        "student-t": lambda: rng.standard_t(2, (8, 1024)),
        "positive": lambda: rng.uniform(0, 1, (8, 1024)),
        "grid": lambda: np.round(rng.standard_normal((8, 1024)) * 4) / 4,
        "mixed-subblocks": lambda: rng.standard_normal((8, 1024))
        * np.repeat(10.0 ** rng.integers(-8, 8, (8, 32)), 32, axis=1),
    }[kind]()
    x = (x * 10.0 ** rng.uniform(-12, 12, (8, 1))).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 1e-45, 3e38, -0.0], np.float32)
    mask = rng.random(x.shape) < 0.002
    x[mask] = rng.choice(specials, mask.sum())
    return x


KINDS = ["gaussian", "student-t", "positive", "grid", "mixed-subblocks"]


@pytest.mark.parametrize("kind", KINDS)
def test_reference_encoder_matches_ggml_on_random_input(ggml, kind):
    """Q4K-4.3: byte-identical to quantize_row_q4_K_ref on random rows, specials included."""
    rng = np.random.default_rng(KINDS.index(kind))
    for _ in range(20):
        x = _inputs(rng, kind)
        np.testing.assert_array_equal(q4_k.quantize(x), ggml[0](x))


@pytest.mark.parametrize("kind", KINDS)
def test_importance_encoder_matches_ggml_on_random_input(ggml, kind):
    """Q4K-4.6: byte-identical to quantize_row_q4_K_impl on random rows and importance vectors."""
    rng = np.random.default_rng(100 + KINDS.index(kind))
    for _ in range(20):
        x = _inputs(rng, kind)
        w = (rng.gamma(2.0, 1.0, 1024) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
        np.testing.assert_array_equal(q4_k.quantize(x, importance=w), ggml[0](x, w))


def test_decoder_matches_ggml_on_random_bytes(ggml):
    """Q4K-3.1: bit-identical to dequantize_row_q4_K on random bytes, invalid blocks included."""
    blocks = np.random.default_rng(9).integers(0, 256, (64, 64 * 144), dtype=np.uint8)
    np.testing.assert_array_equal(bits(q4_k.dequantize(blocks)), bits(ggml[1](blocks)))
