"""What the ``record_*_teeth.py`` scripts share (issue 33): rows that reach the encoders' branches, drawn from a
fixed seed, and writing the recording. Each script lets ggml's C code (``conformance.adapters.ggml``, the pinned
oracle named by QFORMATS_GGML_LIB) compute the expected values of its inputs and saves both beside the tests that
read them; the tests check the recording against the live library when it is built.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SPECIALS = np.array([np.nan, np.inf, -np.inf, 1e-45, 3e38, -0.0], np.float32)


def tiny(rng, n):
    return rng.standard_normal(n) * 1e-30


def zero_sub_blocks(rng, n):
    """Gaussian with about 30 % of its 16-weight sub-blocks all zero."""
    return rng.standard_normal(n) * np.repeat(rng.random(n // 16) < 0.3, 16)


def one_signed_sub_blocks(rng, n):
    """Each 16-weight sub-block all negative or, half the time, all positive."""
    return rng.uniform(-1, 0, n) + np.repeat(rng.random(n // 16) < 0.5, 16) * 3


def encoder_rows(rng: np.random.Generator, count: int, n: int, extra=(), tiny_second_last: bool = False) -> np.ndarray:
    """float32 (count, n), row i of kind i mod the kinds: gaussian, heavy tails, one-signed either way, ties on a
    grid, all-zero, constant, one weight, mixed sub-block magnitudes, then ``extra`` (functions of ``(rng, n)``);
    each row scaled by 10^U(-3, 3); ``tiny_second_last`` scales row count - 2 by 1e-30; the last row gets four
    specials (NaN, +-inf, the smallest subnormal, 3e38, -0)."""
    kinds = [
        lambda: rng.standard_normal(n),
        lambda: rng.standard_t(2, n),
        lambda: rng.uniform(0, 1, n),
        lambda: -rng.exponential(1, n),
        lambda: (rng.integers(-16, 16, n) + 0.5) / 4,
        lambda: np.round(rng.standard_normal(n) * 4) / 4,
        lambda: np.zeros(n),
        lambda: np.full(n, rng.standard_normal()),
        lambda: np.eye(1, n, int(rng.integers(0, n)))[0] * rng.standard_normal(),
        lambda: rng.standard_normal(n) * np.repeat(10.0 ** rng.integers(-6, 6, n // 16), 16),
    ] + [lambda f=f: f(rng, n) for f in extra]
    x = np.stack([kinds[i % len(kinds)]() for i in range(count)]) * 10.0 ** rng.uniform(-3, 3, (count, 1))
    x = x.astype(np.float32)
    if tiny_second_last:
        x[count - 2] *= np.float32(1e-30)
    x[count - 1, rng.integers(0, n, 4)] = rng.choice(SPECIALS, 4)
    return x


def oracle():
    """ggml's C code through the conformance adapter (QFORMATS_GGML_LIB names the library)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from conformance.adapters import ggml as ggml_lib

    return ggml_lib


def write(data: Path, arrays: dict[str, np.ndarray], lib) -> int:
    """Save the recording and say what wrote it."""
    np.savez_compressed(data, **arrays)
    print(f"{data}: {len(arrays)} arrays, ggml {lib.version()}")
    return 0
