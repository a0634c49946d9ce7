"""Record the expected values of ``kquants_qx_teeth_ggml.npz`` from ggml's C code (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_kquants_qx_teeth.py

For q3_K and q6_K (spec/ggml_kquants.md KQ-3, KQ-6) the file holds, under ``<type>.<case>``:

* ``ref.x`` float32 (rows, 512) and ``ref.expected``: what ggml 0.10.1's ``quantize_<type>(x, y, rows, 512, NULL)``
  wrote (the reference path, KQ-3.4 / KQ-6.4);
* ``imp.x``, ``imp.w`` float32 (512,) and ``imp.expected``: the same with the importance vector ``w`` (KQ-3.5 /
  KQ-6.5; block ``i`` of a row weighted by ``w[256 (i % 2) ...]``);
* ``dec.blocks`` uint8 and ``dec.expected`` float32: ``dequantize_row_<type>`` of random bytes with every class
  of super-scale (KQ-3.2 / KQ-6.2);
* ``q6_k.eps.x`` float32 (2, 256), ``q6_k.eps.w`` (256,) ones and ``q6_k.eps.expected``: one-weight super-blocks
  whose largest sub-block scale is exactly GROUP_MAX_EPS (``x0 = 32 * 1e-15f``: with weight 1 the scale of
  ``[x0, 0, ...]`` is ``-x0 / 32``, KQ-6.6) and one float32 step below it (KQ-6.4's
  ``if (max_abs_scale < GROUP_MAX_EPS)`` memset, at the limit and one past).

The inputs are drawn here from a fixed seed; the expected values come only from ggml.
tests/ggml/test_kquants_qx_teeth.py reads them and checks them against the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ggml_recording import encoder_rows, oracle, tiny, write, zero_sub_blocks  # noqa: E402

DATA = Path(__file__).with_name("kquants_qx_teeth_ggml.npz")
TYPES = ("q3_k", "q6_k")
N = 512                          # two super-blocks per row: the importance vector's block index matters


def rows(rng: np.random.Generator, count: int) -> np.ndarray:
    """float32 (count, N): ggml_recording.encoder_rows' kinds, then tiny, zero sub blocks."""
    return encoder_rows(rng, count, N, extra=(tiny, zero_sub_blocks))


def inputs() -> dict[str, np.ndarray]:
    from qformats.formats import ggml
    from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks

    rng = np.random.default_rng(20261129)
    out = {}
    for t in TYPES:
        out[f"{t}.ref.x"] = rows(rng, 36)
        out[f"{t}.imp.x"] = rows(rng, 36)
        w = (rng.gamma(2.0, 1.0, N) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
        w[rng.integers(0, N, 40)] = 0                                    # zero weights reach the `!w` branches
        out[f"{t}.imp.w"] = w
        bt = ggml.TYPES[t]
        out[f"{t}.dec.blocks"] = np.concatenate([random_blocks(bt, rng, 3, N, c) for c in SCALE_CLASSES])
    x0 = np.float32(32) * np.float32(1e-15)                              # exact: a power of two times eps
    eps = np.zeros((2, 256), np.float32)
    eps[:, 0] = [x0, np.nextafter(x0, np.float32(0))]
    out["q6_k.eps.x"], out["q6_k.eps.w"] = eps, np.ones(256, np.float32)
    return out


def record(arrays: dict[str, np.ndarray], lib) -> dict[str, np.ndarray]:
    out = dict(arrays)
    for t in TYPES:
        out[f"{t}.ref.expected"] = lib.quantize(t, arrays[f"{t}.ref.x"])
        out[f"{t}.imp.expected"] = lib.quantize(t, arrays[f"{t}.imp.x"], arrays[f"{t}.imp.w"])
        out[f"{t}.dec.expected"] = lib.dequantize(t, arrays[f"{t}.dec.blocks"])
    out["q6_k.eps.expected"] = lib.quantize("q6_k", arrays["q6_k.eps.x"], arrays["q6_k.eps.w"])
    return out


def main() -> int:
    lib = oracle()
    return write(DATA, record(inputs(), lib), lib)


if __name__ == "__main__":
    sys.exit(main())
