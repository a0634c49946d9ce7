"""FP8-5.3: the reference quantizer that makes the samples. Expected codes come from ml_dtypes' own
float8_e4m3fn cast (an independent rounding), scales from the rule's arithmetic."""

import ml_dtypes
import numpy as np
import pytest

from qformats import elements
from qformats.formats.fp8 import codec, encode

SHAPE = (20, 70)                                   # ragged against a (8, 32) block: a 3 x 3 grid


def _weights(seed: int, amax: float) -> np.ndarray:
    w = np.random.default_rng(seed).uniform(-amax, amax, SHAPE).astype(np.float32)
    w[0, 0] = amax                                  # fixes the tensor's amax at a power of two times 448
    return w


def test_codes_are_the_nearest_e4m3fn_to_w_over_s():
    """FP8-5.3: "the codes E4M3FN(w / s), nearest with ties to even" (s a power of two here, so w / s is exact)."""
    w = _weights(1, 448 * 2.0 ** -9)
    layer = encode.quantize(w, strategy="tensor")
    assert layer["weight_scale"].tolist() == [2.0 ** -9]
    want = (w * np.float32(2 ** 9)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(layer["weight"], want)


@pytest.mark.parametrize("strategy,kw,cells", [("tensor", {}, (1,)), ("channel", {}, (20, 1)),
                                               ("block", {"block": (8, 32)}, (3, 3)),
                                               ("group", {"group_size": 35}, (20, 2))])
def test_every_cell_reaches_plus_or_minus_448(strategy, kw, cells):
    """FP8-5.3: "s = amax(|w|) / 448" per cell of the grid, ragged last blocks included: each cell's largest
    magnitude encodes to 448."""
    w = _weights(2, 0.1)
    layer = encode.quantize(w, strategy=strategy, **kw)
    assert layer["weight_scale"].shape == cells
    values = np.abs(elements.decode(layer["weight"], elements.E4M3FN))
    expanded = codec.expand(np.arange(np.prod(cells)).reshape(cells), *SHAPE, strategy, **kw)
    per_cell = [values[expanded == c].max() for c in range(int(np.prod(cells)))]
    assert per_cell == [448.0] * int(np.prod(cells))


def test_a_zero_cell_gets_scale_one_and_zero_codes():
    """FP8-5.3: "A cell of zeros gets s = 1, so every scale stays positive (FP8-6.4)"."""
    w = _weights(3, 0.1)
    w[8:16] = 0.0
    layer = encode.quantize(w, strategy="block", block=(8, 32))
    assert layer["weight_scale"][1].tolist() == [1.0, 1.0, 1.0]
    assert not layer["weight"][8:16].any()


def test_bfloat16_scales_are_bfloat16_values():
    """FP8-5.3: the scale is "rounded once to the scale dtype"."""
    w = _weights(4, 0.3)
    s = encode.quantize(w, strategy="channel", scale_dtype="BF16")["weight_scale"]
    want = (np.abs(w).max(axis=1, keepdims=True) / 448).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(s, want)


def test_decode_of_the_encoding_stays_within_half_a_step():
    """FP8-5.1 of FP8-5.3's output: every normal-range weight comes back within 2^-4 of itself, relative."""
    w = _weights(5, 0.05)
    layer = encode.quantize(w, strategy="block", block=(8, 32))
    d = codec.dequantize(layer, strategy="block", block=(8, 32))
    s = codec.expand(layer["weight_scale"], *SHAPE, "block", block=(8, 32))
    normal = np.abs(w) >= s * 2.0 ** -6
    assert np.all(np.abs(d - w)[normal] <= np.abs(w)[normal] * 2.0 ** -4)
