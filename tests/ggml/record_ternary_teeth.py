"""Record the expected values of ``ternary_teeth_ggml.npz`` from ggml's C code (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_ternary_teeth.py

For tq1_0 and tq2_0 (spec/ggml_ternary_fp4.md TQ-1, TQ-2) the file holds, under ``<type>.<case>``:

* ``ref.x`` float32 (rows, 512) and ``ref.expected``: what ggml 0.10.1's ``quantize_<type>(x, y, rows, 512, NULL)``
  wrote (TQ-1.4 / TQ-2.4): gaussian rows, exact ties at +-0.5 amax, NaN that reset the running MAX, NaN last,
  1/d overflowing, d overflowing float16, +-inf, subnormal and all-zero blocks, amax 0 and 1 after a NaN, NaN payloads last;
* ``dec.blocks`` uint8 and ``dec.expected`` float32: ``dequantize_row_<type>`` of random bytes with every class
  of d (TQ-1.3 / TQ-2.2).

The inputs are drawn here from a fixed seed; the expected values come only from ggml.
tests/ggml/test_ternary_teeth.py reads them and checks them against the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ggml_recording import oracle, write  # noqa: E402

DATA = Path(__file__).with_name("ternary_teeth_ggml.npz")
TYPES = ("tq1_0", "tq2_0")
N = 512
F32 = np.float32


def rows(rng: np.random.Generator) -> np.ndarray:
    """float32 (44, N): one kind of block per row half, the kinds that reach every branch of the encoders."""
    out = []
    for k in range(8):                                     # gaussian at many scales, one-signed, spiky
        out.append(rng.standard_normal(N) * 10.0 ** rng.uniform(-20, 20))
        out.append(np.abs(rng.standard_t(1.5, N)) * (1 if k % 2 else -1))
    ties = rng.integers(-4, 5, N) * 0.25                   # amax 1 or 2: x * id hits +-0.25, +-0.5, +-0.75, +-1
    ties[::256] = 1.0
    out += [ties, np.where(rng.random(N) < 0.5, 0.5, -0.5)]
    for _ in range(6):
        x = rng.standard_normal(N) * 100
        x[rng.integers(0, N, 3)] = np.nan                  # a NaN resets amax: later values can exceed it
        x[255::256] = rng.uniform(1e-3, 1e-1, 2)           # the last weight sets amax after a NaN
        out.append(x)
        y = rng.standard_normal(N)
        y[rng.integers(0, 200, 2)] = np.nan                # NaN early: the rest of the block sets amax
        out.append(y)
    out.append(np.where(np.arange(N) % 256 == 255, np.nan, 1.0))      # NaN last: d = NaN, written 0x7E00
    out.append(np.where(np.arange(N) % 256 == 0, np.nan, -2.0))
    out.append(np.full(N, 2e-39) * rng.standard_normal(N))           # 1 / d = inf
    out.append(np.full(N, 1e-45))
    out.append(np.full(N, 1e5) * np.sign(rng.standard_normal(N)))    # d overflows float16 to inf
    out.append(np.full(N, 65519.0))                                   # rounds down to 65504
    out.append(np.where(np.arange(N) % 7 == 0, np.inf, rng.standard_normal(N)))
    out.append(np.where(np.arange(N) % 3 == 0, -np.inf, np.nan))
    out.append(np.zeros(N))
    z = np.zeros(N)
    z[300] = -3.0                                                      # one weight: a negative amax element
    out.append(z)
    out.append(rng.standard_normal(N) * 3e38)                          # x * id rounds to +-1.0000001
    out.append(np.linspace(-1, 1, N))
    r = np.zeros(N)
    r[0], r[1], r[256], r[258], r[259], r[260] = 5.0, np.nan, np.nan, 1.0, 0.5, -0.7     # amax 0 and 1 after a NaN
    out.append(r)
    out.append(np.linspace(-1, 1, N))                                  # NaN payloads last in each block: d 0x7E00
    with np.errstate(over="ignore"):                                    # 3e38 * normal: some overflow to inf
        x = np.stack(out).astype(F32)
    x[-1, [255, 511]] = np.array([0x7FF00000, 0x7F800001], np.uint32).view(F32)
    return x


def inputs() -> dict[str, np.ndarray]:
    from qformats.formats import ggml
    from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks

    rng = np.random.default_rng(20261129 + 10)
    out = {}
    for t in TYPES:
        out[f"{t}.ref.x"] = rows(rng)
        bt = ggml.TYPES[t]
        out[f"{t}.dec.blocks"] = np.concatenate([random_blocks(bt, rng, 4, N, c) for c in SCALE_CLASSES])
    return out


def record(arrays: dict[str, np.ndarray], lib) -> dict[str, np.ndarray]:
    out = dict(arrays)
    for t in TYPES:
        out[f"{t}.ref.expected"] = lib.quantize(t, arrays[f"{t}.ref.x"])
        out[f"{t}.dec.expected"] = lib.dequantize(t, arrays[f"{t}.dec.blocks"])
    return out


def main() -> int:
    lib = oracle()
    return write(DATA, record(inputs(), lib), lib)


if __name__ == "__main__":
    sys.exit(main())
