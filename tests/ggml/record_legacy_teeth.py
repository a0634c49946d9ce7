"""Record ``legacy_teeth_ggml.npz``: what ggml's C code does on rows and blocks chosen to reach every branch of
``qformats/formats/ggml/legacy.py`` (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_legacy_teeth.py

Encoder cases ``<case>.type``, ``<case>.x`` (float32 rows), ``<case>.w`` (importance, where the case has one) and
``<case>.expected``: the bytes ggml 0.10.1's ``quantize_<type>(x, y, rows, n, w)`` wrote (q8_1, which has no
``quantize_q8_1``: ``quantize_row_q8_1_ref`` over the whole input). Decoder cases ``dec_<type>.blocks`` (uint8,
one row of blocks whose float16 fields run through every class: zero, subnormal, negative, huge, inf, NaN) and
``dec_<type>.expected``: ``dequantize_row_<type>``'s float32 output. The inputs are built here by rule (below);
the expected arrays come only from ggml. tests/ggml/test_legacy_teeth.py reads the file and checks it against
the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("legacy_teeth_ggml.npz")
F32 = np.float32
SIZE = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34, "q8_1": 36}
NAN, INF = F32(np.nan), F32(np.inf)


def _blocks(*rows) -> np.ndarray:
    """32-weight blocks from short lists (zero-padded) as one float32 row."""
    out = np.zeros((len(rows), 32), F32)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out.reshape(1, -1)


def encoder_inputs() -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Rows for the encoders, by case name (without the type)."""
    rng = np.random.default_rng(20261129)
    gauss = (rng.standard_normal((4, 256)) * 10.0 ** rng.uniform(-3, 3, (4, 1))).astype(F32)
    grid = ((rng.integers(-16, 16, (2, 256)) + 0.5) / 4).astype(F32)      # exact ties of x*id + 0.5
    ramp = np.arange(32, dtype=F32) - 15                                    # +a and -a both present
    clean = np.concatenate([gauss.reshape(1, -1), grid.reshape(1, -1)], axis=1)
    signs = _blocks([3, -3, 1], [-3, 3, 1], [-0.0, 0.0, 0.0], [0.0, -0.0], [-0.0, 1, 2, 0.0], [0.0, 2, -0.0],
                    [-1, -0.0, 0.0], [-1, 0.0, -0.0], [5] * 32, [-5] * 32, list(ramp), list(-ramp),
                    [1e-20, -1e-20], [2.0 ** -100, 3.0 * 2.0 ** -101])
    special = _blocks([1, NAN, -2], [NAN, 3, -1], [1, -2] + [0] * 29 + [NAN], [NAN] * 32, [NAN] * 31 + [2],
                      [INF, 1, -1], [-INF, 1, 2], [INF, -INF], [1e-40, -3e-41, 2e-45], [1e-40] * 32,
                      [3e38, -3e38, 1], [3.4e38, 1e38], [-3e38, 2e38, -1e38], [NAN, 0.0, -0.0], [-0.0, NAN],
                      [0.0, -0.0, NAN], [1e-38, -1e-38, 5e-39], [NAN, -1.5, 1.5])
    w_gamma = rng.gamma(2.0, 1.0, clean.shape[1]).astype(F32)
    w_sparse = np.where(rng.random(clean.shape[1]) < 0.1, rng.gamma(2.0, 1.0, clean.shape[1]), 0).astype(F32)
    leg35 = np.array([[20, -6, -8, 14, 19, 14, 11, -13, -5, -3, 13, -19, -10, -16, -10, 19, 1, 11, -10, -12, 15, -8,
                       2, -7, 3, 20, 7, 16, -16, 15, 13, -4]], F32)
    w35 = np.zeros(32, F32)
    w35[14], w35[19] = 3, 2
    return {
        "clean": (clean.reshape(2, -1), None),
        "signs": (signs, None),
        "special": (special, None),
        "imp_gamma": (clean.reshape(2, -1), np.tile(w_gamma[: clean.size // 2], 1)),
        "imp_sparse": (clean.reshape(2, -1), w_sparse[: clean.size // 2]),
        "imp_leg35": (leg35, w35),
        "imp_signs": (signs, rng.gamma(2.0, 1.0, signs.shape[1]).astype(F32)),
        "imp_special": (special, rng.gamma(2.0, 1.0, special.shape[1]).astype(F32)),
    }


def decoder_blocks(name: str) -> np.ndarray:
    """One row of random blocks whose float16 fields (d, and m or s) cycle through the scale classes."""
    rng = np.random.default_rng(len(name) * 7 + SIZE[name])
    size = SIZE[name]
    blk = rng.integers(0, 256, (48, size), dtype=np.uint8)
    halves = np.array([0x3C00, 0x0001, 0x8001, 0x03FF, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01,
                       0x0000, 0x8000, 0x2E66, 0xC4D2, 0x5A1F], np.uint16)
    fields = 2 if name in ("q4_1", "q5_1", "q8_1") else 1
    for f in range(fields):
        pick = halves[rng.integers(0, halves.size, 48)]
        pick[:halves.size] = np.roll(halves, 5 * f)
        blk[:, 2 * f:2 * f + 2] = pick.astype("<u2")[:, None].view(np.uint8)
    return blk.reshape(1, -1)


def record(lib_module) -> dict[str, np.ndarray]:
    lib = lib_module.library()
    out = {}
    for case, (x, w) in encoder_inputs().items():
        for name in SIZE:
            if name in ("q8_0", "q8_1") and w is not None:
                continue
            key = f"{case}_{name}"
            out[f"{key}.type"] = np.array(name)
            out[f"{key}.x"] = x
            if w is not None:
                out[f"{key}.w"] = w
            if name == "q8_1":
                fn = lib.quantize_row_q8_1_ref
                fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
                y = np.zeros((x.shape[0], x.shape[1] // 32 * 36), np.uint8)
                xc = np.ascontiguousarray(x, F32)
                fn(xc.ctypes.data, y.ctypes.data, xc.size)
                out[f"{key}.expected"] = y
            else:
                out[f"{key}.expected"] = lib_module.quantize(name, x, w)
    for name in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
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
