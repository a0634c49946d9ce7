"""Record ``iq4_teeth_ggml.npz``: what ggml's C code does on rows and blocks chosen to reach every branch of
``qformats/formats/ggml/iq4.py`` (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_iq4_teeth.py

Encoder cases ``<case>.type``, ``<case>.x`` (float32 rows), ``<case>.w`` (importance, where the case has one) and
``<case>.expected``: the bytes ggml 0.10.1's ``quantize_<type>(x, y, rows, n, w)`` wrote. Decoder cases
``dec_<type>.blocks`` (random bytes, one row, ``d`` cycling through zero, subnormal, negative, largest, inf and
NaN) and ``dec_<type>.expected``: ``dequantize_row_<type>``'s float32 output. The inputs are built here by rule;
the expected arrays come only from ggml. tests/ggml/test_iq4_teeth.py reads the file and checks it against the
live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("iq4_teeth_ggml.npz")
F32 = np.float32
SIZE = {"iq4_nl": 18, "iq4_xs": 136}
NAN, INF = F32(np.nan), F32(np.inf)
HALVES = np.array([0x3C00, 0x0001, 0x8001, 0x03FF, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01,
                   0x0000, 0x8000, 0x2E66, 0xC4D2, 0x5A1F], np.uint16)


def _groups(*groups) -> np.ndarray:
    """32-weight groups from short lists (zero-padded), padded with zero groups to whole iq4_xs blocks,
    as one float32 row."""
    n = -(-len(groups) // 8) * 8
    out = np.zeros((n, 32), F32)
    for i, g in enumerate(groups):
        out[i, :len(g)] = g
    return out.reshape(1, -1)


def encoder_inputs() -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    rng = np.random.default_rng(20261130)
    gauss = (rng.standard_normal((8, 512)) * 10.0 ** rng.uniform(-3, 3, (8, 1))).astype(F32)
    ints = rng.integers(-9, 10, (2, 512)).astype(F32)                       # exact products, ties
    per_group = (rng.standard_normal((2, 512)) * np.repeat(10.0 ** rng.uniform(-4, 2, (2, 16)), 32, axis=1))
    clean = np.concatenate([gauss, ints, per_group.astype(F32)]).reshape(4, 1536)   # 48 groups a row
    signs = _groups([3, -3, 1], [-3, 3, 1], [5] * 32, [-5] * 32, list(np.arange(32) - 15.0),
                    list(15.0 - np.arange(32)), [1e-15, -1e-16], [9.9e-16, -9.9e-16], [1e-15], [-1e-15, 5e-16],
                    [-0.0, 0.0], [0.0, -0.0, 1], [1, 0.5], [-1, -0.5], [2, 1], [4, 2], [8, 4], [16, 8],
                    [1, 0.5], [0.0], [0.0], [0.0], [0.0], [0.0], [0.0], [0.0],
                    [1, 2, 3], [0.5], [-4, 4], [4, -4], [1e-3, -1e-3], [7, -6], [-2], [2])
    special = _groups([1, NAN, -2], [NAN, 3, -1], [1, -2] + [0] * 29 + [NAN], [NAN] * 32, [INF, 1, -1],
                      [-INF, 1, 2], [INF, -INF], [1e-40, -3e-41, 2e-45], [3e38, -3e38, 1], [3.4e38, 1e38],
                      [1e7, 3], [-1e7, 3], [1e5, 1], [65000, -1], [1e-30, 1], [NAN, 0.0, -0.0])
    w_gamma = rng.gamma(2.0, 1.0, clean.shape[1]).astype(F32)
    w_sparse = np.where(rng.random(clean.shape[1]) < 0.1, rng.gamma(2.0, 1.0, clean.shape[1]), 0).astype(F32)
    mixed = np.random.default_rng(1)                # importance of both signs: the trials' sumq2 differ in sign
    x_mixed = mixed.standard_normal((8, 256)).astype(F32)
    mixed.gamma(2.0, 1.0, 256)
    w_mixed = mixed.standard_normal(256).astype(F32)
    # Gaussian rows with one weight moved next to a midpoint of IQ-1.1 as the scaled value id * x sees it (found by
    # search): a float64 id, max, max_scale or dl, or float64 products, round across the midpoint there
    near = np.random.default_rng(5).standard_normal((8, 256)).astype(F32)
    edge = np.stack([near[0], near[0], near[7]])
    edge[0, 14], edge[1, 14], edge[2, 244] = np.array([0xBF4576A0, 0xBF489A34, 0x40182584], np.uint32).view(F32)
    return {
        "clean": (clean, None),
        "edge": (edge, None),
        "imp_mixed": (x_mixed, w_mixed),
        "signs": (signs, None),
        "special": (special, None),
        "imp_gamma": (clean, w_gamma),
        "imp_sparse": (clean, w_sparse),
        "imp_signs": (signs, rng.gamma(2.0, 1.0, signs.shape[1]).astype(F32)),
        "imp_special": (special, rng.gamma(2.0, 1.0, special.shape[1]).astype(F32)),
    }


def decoder_blocks(name: str) -> np.ndarray:
    rng = np.random.default_rng(SIZE[name])
    blk = rng.integers(0, 256, (48, SIZE[name]), dtype=np.uint8)
    pick = HALVES[rng.integers(0, HALVES.size, 48)]
    pick[:HALVES.size] = HALVES
    blk[:, :2] = pick.astype("<u2")[:, None].view(np.uint8)
    return blk.reshape(1, -1)


def record(lib_module) -> dict[str, np.ndarray]:
    out = {}
    for case, (x, w) in encoder_inputs().items():
        for name in SIZE:
            key = f"{case}_{name}"
            out[f"{key}.type"] = np.array(name)
            out[f"{key}.x"] = x
            if w is not None:
                out[f"{key}.w"] = w
            out[f"{key}.expected"] = lib_module.quantize(name, x, w)
    for name in SIZE:
        blk = decoder_blocks(name)
        out[f"dec_{name}.blocks"] = blk
        out[f"dec_{name}.expected"] = lib_module.dequantize(name, blk)
    return out


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ggml_recording import oracle, write

    lib = oracle()
    with np.errstate(all="ignore"):
        return write(DATA, record(lib), lib)


if __name__ == "__main__":
    sys.exit(main())
