"""FP4-3.9: the reference NVFP4 and MXFP4 quantizers that make the samples. Expected codes come from a
brute-force nearest search over the eight E2M1 magnitudes (ties to the even code), scales from the rules."""

import numpy as np
import pytest

from qformats import elements
from qformats.errors import QFormatsError
from qformats.formats.fp4 import codec, encode

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def _nearest_codes(x: np.ndarray) -> np.ndarray:
    """E2M1 codes by exhaustive distance; a tie goes to the even code; beyond 6 saturates at 6."""
    a = np.minimum(np.abs(x), 6.0)
    dist = np.abs(a[..., None] - E2M1)
    best = dist.min(axis=-1, keepdims=True)
    ties = dist == best
    even = ties & (np.arange(8) % 2 == 0)
    mag = np.where(even.any(axis=-1), even.argmax(axis=-1), ties.argmax(axis=-1))
    return (mag | (np.signbit(x) << 3)).astype(np.uint8)


def _w(seed: int, shape=(6, 64)) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.02, shape).astype(np.float32)


def test_mxfp4_scale_puts_each_block_amax_in_four_to_eight():
    """FP4-3.9: "e = floor(log2(amax(|block|))) − 2", the byte e + 127."""
    w = _w(1)
    _, scale = encode.mxfp4(w)
    ratio = np.abs(w).reshape(6, 2, 32).max(axis=2) / np.exp2(scale.astype(np.float64) - 127)
    assert np.all((ratio >= 4) & (ratio < 8))


def test_mxfp4_codes_are_the_nearest_e2m1_saturating_at_six():
    """FP4-3.9: "the codes E2M1(w / 2^e) saturating at ±6"."""
    w = _w(2)
    packed, scale = encode.mxfp4(w)
    s = np.repeat(np.exp2(scale.astype(np.float64) - 127), 32, axis=1)
    assert np.array_equal(codec.unpack(packed), _nearest_codes(w / s))


def test_mxfp4_zero_block_gets_byte_zero():
    """FP4-3.9: "a block of zeros gets the byte 0x00"."""
    w = _w(3)
    w[2, 32:] = 0
    _, scale = encode.mxfp4(w)
    assert scale[2].tolist()[1] == 0x00 and 0xFF not in scale


def test_mxfp4_is_idempotent_on_its_own_decode():
    """FP4-3.9 then FP4-3.7: quantizing the decoded weight gives the same bytes back."""
    packed, scale = encode.mxfp4(_w(4))
    again = encode.mxfp4(codec.mxfp4_dequantize(packed, scale))
    assert np.array_equal(again[0], packed) and np.array_equal(again[1], scale)


def test_nvfp4_global_scale_is_2688_over_amax():
    """FP4-3.9: "global = 448 · 6 / amax(|W|) in float32"."""
    w = _w(5)
    _, _, g = encode.nvfp4(w)
    assert g.dtype == np.float32 and g.tolist() == [float(np.float32(2688.0 / float(np.abs(w).max())))]


def test_nvfp4_codes_are_the_nearest_e2m1_of_w_over_the_block_scale():
    """FP4-3.9: "the codes E2M1(w / (ue4m3 / global))"."""
    w = _w(6)
    packed, scale, g = encode.nvfp4(w)
    eff = elements.decode(scale, elements.UE4M3).astype(np.float64) / np.float64(g[0])
    assert np.array_equal(codec.unpack(packed), _nearest_codes(w / np.repeat(eff, 16, axis=1)))


def test_nvfp4_block_scale_bytes_are_finite_ue4m3():
    """FP4-3.9 / FP4-3.3: the block scale byte is UE4M3 without the sign bit and never NaN."""
    _, scale, _ = encode.nvfp4(_w(7) * 1000)
    assert scale.max() < 0x7F


@pytest.mark.parametrize("fn,group", [(encode.nvfp4, 16), (encode.mxfp4, 32)])
def test_k_not_a_multiple_of_the_group_is_refused(fn, group):
    """FP4-2.2: K must be a multiple of the group."""
    with pytest.raises(QFormatsError) as e:
        fn(_w(8, (4, group + 2)))
    assert (e.value.code, e.value.tensor, e.value.actual) == ("fp4.group.shape", "weight", [4, group + 2])
