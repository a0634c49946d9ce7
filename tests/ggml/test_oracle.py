"""Every registered GGUF block type against a live ggml build (GGML-2.2, GGML-4.4, GGML-3.1).

``make test`` builds ggml 0.10.1's ggml-base (``make ggml-oracle``) and names it in QFORMATS_GGML_LIB.
For each type: the decoder is bit-identical to ``dequantize_row_<type>`` on random bytes with every
class of super-scale (subnormal, zero, negative, max, non-finite); the encoder is byte-identical to
``quantize_<type>`` on at least 100 random rows (ties, all-zero rows and specials among them), with
and without an importance vector where the type has that path; the validity verdict agrees with
``ggml_validate_row_data``.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import ggml
from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks, subject_types

LIB_PATH = os.environ.get("QFORMATS_GGML_LIB")
pytestmark = pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")

# Types newer than the pinned oracle (BlockType.since: q2_0) are judged by tests/llama_cpp/test_new_types.py.
PINNED = [bt for bt in subject_types() if bt.since is None]
DECODED = [bt.name for bt in PINNED] + ["q4_k"]
ENCODED = [bt.name for bt in PINNED if bt.quantize is not None] + ["q4_k"]
IMPORTANCE = [bt.name for bt in PINNED if bt.importance] + ["q4_k"]


@pytest.fixture(scope="module")
def oracle():
    from conformance.adapters import ggml as ggml_lib

    return ggml_lib


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("name", DECODED)
@pytest.mark.parametrize("scale_class", list(SCALE_CLASSES))
def test_decoder_is_bit_identical_to_ggml(oracle, name, scale_class):
    """GGML-2.2: the reference decoder is ggml's dequantize_row_<type>, bit for bit, invalid blocks included."""
    bt = ggml.TYPES[name]
    blocks = random_blocks(bt, _rng(name, scale_class), 64, 512, scale_class)
    np.testing.assert_array_equal(bits(ggml.dequantize(name, blocks)), bits(oracle.dequantize(name, blocks)))


def encoder_rows(rng: np.random.Generator, n: int, rows: int = 104) -> np.ndarray:
    """``rows`` float32 rows of length ``n`` in kinds that reach every branch of ggml's encoders:
    gaussian, heavy tails, one-signed, grid values with exact ties, all-zero and constant rows,
    tiny and huge magnitudes, mixed sub-block magnitudes, and a sprinkle of inf/NaN/subnormals."""
    kinds = [
        lambda: rng.standard_normal(n),
        lambda: rng.standard_t(2, n),
        lambda: rng.uniform(0, 1, n),
        lambda: -rng.exponential(1, n),
        lambda: (rng.integers(-16, 16, n) + 0.5) / 4,                 # ties on a coarse grid
        lambda: np.round(rng.standard_normal(n) * 4) / 4,
        lambda: np.zeros(n),
        lambda: np.full(n, rng.standard_normal()),
        lambda: rng.standard_normal(n) * np.repeat(10.0 ** rng.integers(-8, 8, n // 32), 32),
    ]
    x = np.stack([kinds[i % len(kinds)]() for i in range(rows)])
    x *= 10.0 ** rng.uniform(-12, 12, (rows, 1)) * (np.arange(rows)[:, None] % 7 != 6)   # and a few exact zero rows
    x = x.astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 1e-45, 3e38, -0.0], np.float32)
    mask = (rng.random(x.shape) < 0.001) & (np.arange(rows)[:, None] % 5 == 4)
    x[mask] = rng.choice(specials, int(mask.sum()))
    return x


@pytest.mark.parametrize("name", ENCODED)
def test_reference_encoder_is_byte_identical_to_ggml(oracle, name):
    """GGML-4.4: ggml's quantize_<type> without an importance vector, byte for byte, on 104 rows."""
    bt = ggml.TYPES[name]
    if bt.requires_importance:
        pytest.skip(f"{name} cannot be encoded without an importance vector")
    x = encoder_rows(_rng("ref", name), 512)
    np.testing.assert_array_equal(ggml.quantize(name, x), oracle.quantize(name, x))


@pytest.mark.parametrize("name", IMPORTANCE)
def test_importance_encoder_is_byte_identical_to_ggml(oracle, name):
    """GGML-4.4: ggml's quantize_<type> with an importance vector, byte for byte, on 104 rows each of 3 vectors."""
    rng = _rng("imatrix", name)
    for _ in range(3):
        x = encoder_rows(rng, 512)
        w = (rng.gamma(2.0, 1.0, 512) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
        np.testing.assert_array_equal(ggml.quantize(name, x, importance=w), oracle.quantize(name, x, importance=w))


@pytest.mark.parametrize("name", DECODED)
def test_validity_agrees_with_ggml_validate_row_data(oracle, name):
    """GGML-3.1: a row is refused by ggml_validate_row_data exactly when check_blocks finds a non-finite scale."""
    bt = ggml.TYPES[name]
    rng = _rng("validate", name)
    for scale_class in ("random_bits", "nonfinite", "negative", "subnormal"):
        blocks = random_blocks(bt, rng, 16, 512, scale_class)
        for row in blocks:
            try:
                ggml.check_blocks(name, row[None, :])
                ours = True
            except QFormatsError as err:
                assert err.code in ("ggml.scale.nonfinite",), err
                ours = False
            assert ours == oracle.validate_row_data(bt.ggml.type_id, row), (scale_class, row[:8])
