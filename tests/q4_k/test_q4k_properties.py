"""Properties of the q4_K codec that follow from spec/q4_k.md, checked on generated inputs."""

import warnings

import gguf
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from qformats.formats import q4_k
from qformats.formats.q4_k import codec
from q4k_golden import bits, load

Q4_K = gguf.GGMLQuantizationType.Q4_K


def _finite_scales(blocks: np.ndarray) -> np.ndarray:
    """Force every block's d and dmin finite by clearing one exponent bit when it is all ones."""
    b = blocks.reshape(-1, 144)
    for hi in (1, 3):
        all_ones = (b[:, hi] & 0x7C) == 0x7C
        b[all_ones, hi] &= 0xFB
    return blocks


def _gguf(blocks: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # gguf-py warns on inf*0
        return gguf_dequantize(blocks, Q4_K)


random_blocks = hnp.arrays(np.uint8, st.tuples(st.integers(1, 3), st.integers(1, 3).map(lambda k: 144 * k)))


@settings(deadline=None, max_examples=60)
@given(random_blocks)
def test_decode_is_total_and_finite_on_valid_random_bytes(blocks):
    """Q4K-5: every byte pattern with finite d/dmin is valid and decodes to finite float32."""
    blocks = _finite_scales(blocks)
    q4_k.check_blocks(blocks)
    y = q4_k.dequantize(blocks)
    assert y.dtype == np.float32 and y.shape == (blocks.shape[0], blocks.shape[1] // 144 * 256)
    assert np.isfinite(y).all()


@settings(deadline=None, max_examples=60)
@given(random_blocks)
def test_decode_matches_gguf_py_on_random_bytes(blocks):
    """Q4K-3.1: our decoder equals gguf-py's independent Q4_K decoder bit for bit, invalid blocks too."""
    np.testing.assert_array_equal(bits(q4_k.dequantize(blocks)), bits(_gguf(blocks)))


def test_decode_matches_gguf_py_on_many_random_blocks():
    """Q4K-3.1: 20,000 random blocks (subnormal, zero, huge d) decode like gguf-py bit for bit."""
    rng = np.random.default_rng(20250821)
    blocks = rng.integers(0, 256, (100, 200 * 144), dtype=np.uint8)
    np.testing.assert_array_equal(bits(q4_k.dequantize(blocks)), bits(_gguf(blocks)))


@pytest.mark.parametrize("name", ["main_q4k_blocks_u8.npy", "importance_q4k_blocks_u8.npy"])
def test_decode_matches_gguf_py_on_golden(name):
    """Q4K-3.1: on the golden blocks, gguf-py, llama.cpp and qformats agree bit for bit."""
    blocks = load(name)
    np.testing.assert_array_equal(bits(q4_k.dequantize(blocks)), bits(_gguf(blocks)))


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(0, 63), min_size=16, max_size=16))
def test_scale_packing_round_trips(values):
    """Q4K-1.4: any eight 6-bit scales and eight 6-bit mins survive pack -> unpack."""
    ls, lm = np.array([values[:8]]), np.array([values[8:]])
    sc, m = codec.unpack_scales(codec.pack_scales(ls, lm))
    assert sc.tolist() == ls.tolist() and m.tolist() == lm.tolist()


def _grid_check(x: np.ndarray, blocks: np.ndarray) -> None:
    """Each decoded weight is the grid point d*sc*q - dmin*m (q = 0..15) nearest to its input."""
    y = q4_k.dequantize(blocks).astype(np.float64).reshape(-1, 8, 32)
    blk = blocks.reshape(-1, 144)
    d = blk[:, 0:2].copy().view("<f2").astype(np.float64)
    dmin = blk[:, 2:4].copy().view("<f2").astype(np.float64)
    sc, m = codec.unpack_scales(blk[:, 4:16])
    step = d * sc                                   # (B, 8)
    low = -(dmin * m)
    xs = x.astype(np.float64).reshape(-1, 8, 32)
    grid = step[..., None, None] * np.arange(16) + low[..., None, None]        # (B, 8, 1, 16)
    best = np.abs(xs[..., None] - grid).min(-1)
    err = np.abs(xs - y)
    slack = 1e-6 * (np.abs(xs) + np.abs(low)[..., None] + 16 * step[..., None])
    zero = step == 0                                # codes are free; y = -dmin*m
    assert (err <= best + slack)[~zero].all()
    assert (y == low[..., None])[zero].all()


finite_rows = st.integers(1, 2).flatmap(
    lambda r: st.integers(1, 2).flatmap(
        lambda k: hnp.arrays(np.float32, (r, 256 * k),
                             elements=st.floats(-1000, 1000, width=32, allow_subnormal=True))))


@settings(deadline=None, max_examples=30)
@given(finite_rows, st.sampled_from([1.0, 1e-3, 1e-6, 37.0]))
def test_reference_encoder_picks_the_nearest_grid_point(x, scale):
    """Q4K-4.3 step 5: with the stored scales, every code is the nearest of the 16 grid points."""
    x = (x * np.float32(scale)).astype(np.float32)
    blocks = q4_k.quantize(x)
    q4_k.check_blocks(blocks, n=x.shape[1])        # finite input of moderate size -> valid blocks
    _grid_check(x, blocks)


@settings(deadline=None, max_examples=20)
@given(finite_rows, st.data())
def test_importance_encoder_picks_the_nearest_grid_point(x, data):
    """Q4K-4.6: the importance path ends with the same nearest-grid code assignment."""
    w = data.draw(hnp.arrays(np.float32, (x.shape[1],), elements=st.floats(0.0078125, 128.0, width=32)))
    blocks = q4_k.quantize(x, importance=w)
    q4_k.check_blocks(blocks, n=x.shape[1])
    _grid_check(x, blocks)


@settings(deadline=None, max_examples=20)
@given(finite_rows)
def test_rows_encode_independently(x):
    """Q4K-4.1: a row's blocks depend on that row only (the reference treats input as flat blocks)."""
    whole = q4_k.quantize(x)
    for r in range(x.shape[0]):
        np.testing.assert_array_equal(whole[r:r + 1], q4_k.quantize(x[r:r + 1]))


@pytest.mark.parametrize("importance", [False, True], ids=["reference", "importance"])
def test_round_trip_error_bounded_per_super_block(importance):
    """Q4K-4 (informative): on Gaussian rows, |x - y| <= 2 * (largest sub-block range) / 15."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((32, 2048)) * 0.02).astype(np.float32)
    w = rng.gamma(2.0, 1.0, 2048).astype(np.float32) if importance else None
    y = q4_k.dequantize(q4_k.quantize(x, importance=w))
    xs = x.reshape(-1, 8, 32)
    ranges = xs.max(-1) - np.minimum(xs.min(-1), 0)
    bound = 2 * ranges.max(-1) / 15
    assert (np.abs(x - y).reshape(-1, 256).max(-1) <= bound).all()
