"""Record the expected values of ``kquants_qkx_teeth_ggml.npz`` from ggml's C code (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_kquants_qkx_teeth.py

For q2_K and q5_K (spec/ggml_kquants.md KQ-2, KQ-5) the file holds, under ``<type>.<case>``:

* ``ref.x`` float32 (rows, 512) and ``ref.expected``: what ggml 0.10.1's ``quantize_<type>(x, y, rows, 512, NULL)``
  wrote (the reference path, KQ-2.4 / KQ-5.4);
* ``imp.x``, ``imp.w`` float32 (512,) and ``imp.expected``: the same with the importance vector ``w`` (KQ-2.5 /
  KQ-5.5; block ``i`` of a row weighted by ``w[256 (i % 2) ...]``);
* ``dec.blocks`` uint8 and ``dec.expected`` float32: ``dequantize_row_<type>`` of random bytes with every class
  of super-scale (KQ-2.2 / KQ-5.2);
* ``signed.x``, ``signed.w`` and ``signed.expected``: the importance path under a signed importance vector, whose
  negative scales give make_qp_quants codes above 15 / 63 (KQ-2.5's spill into the min nibble, KQ-5.5's MIN(63, .));
* ``tie.x`` / ``tie.expected``: ``tie_rows()``, one block on a code grid with a weight at a float32 half-code tie;
* ``pass.ref`` and ``pass.imp``: the SHA-256 (32 uint8) of ggml's bytes for ``pass_rows()`` (171 rows of 3
  super-blocks, more than one encoder pass), without and with ``pass_w()``.

For q8_K (KQ-7): ``q8_k.ref.x`` / ``q8_k.ref.expected`` from ``quantize_row_q8_K_ref`` into a zeroed buffer, and
``q8_k.dec.blocks`` / ``q8_k.dec.expected`` from ``dequantize_row_q8_K``.

The inputs are drawn here from a fixed seed; the expected values come only from ggml.
tests/ggml/test_kquants_qkx_teeth.py reads them and checks them against the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ggml_recording import encoder_rows, one_signed_sub_blocks, oracle, write, zero_sub_blocks  # noqa: E402

DATA = Path(__file__).with_name("kquants_qkx_teeth_ggml.npz")
TYPES = ("q2_k", "q5_k")
N = 512                          # two super-blocks per row: the importance vector's block index matters


def rows(rng: np.random.Generator, count: int) -> np.ndarray:
    """float32 (count, N): ggml_recording.encoder_rows' kinds, then zero sub blocks, one signed sub blocks."""
    return encoder_rows(rng, count, N, extra=(zero_sub_blocks, one_signed_sub_blocks), tiny_second_last=True)


def pass_rows() -> np.ndarray:
    """171 rows of 768 (513 super-blocks: more than one 512-block encoder pass), from a fixed seed."""
    rng = np.random.default_rng(33)
    return (rng.standard_normal((171, 768)) * 10.0 ** rng.uniform(-2, 2, (171, 1))).astype(np.float32)


def pass_w() -> np.ndarray:
    """An importance vector of 768 whose three super-blocks differ by orders of magnitude."""
    rng = np.random.default_rng(34)
    return (rng.gamma(2.0, 1.0, 768) * np.repeat([1.0, 100.0, 0.01], 256)).astype(np.float32)


def q8k_rows(rng: np.random.Generator) -> np.ndarray:
    """float32 (12, 512): gaussian, ties of largest magnitude of either sign first, zero blocks, NaN and inf."""
    x = rows(rng, 12)[:, :N]
    x[0, :256] = (rng.integers(-3, 4, 256) * 0.5).astype(np.float32)            # several of largest magnitude
    x[1, :256] = 0
    x[1, 5], x[1, 9] = -2, 2                                                    # -2 first: max = -2
    x[1, 256:] = 0
    x[1, 300], x[1, 310] = 2, -2                                                # 2 first: max = 2
    x[2, 3] = np.nan                                                            # a NaN before the maximum
    x[3, :256] = np.linspace(-1, 1, 256, dtype=np.float32) * 127 / 127.5       # codes at +-127 and rounding ties
    return x


def q8k_blocks(rng: np.random.Generator) -> np.ndarray:
    blocks = rng.integers(0, 256, (16, 292), dtype=np.uint8)
    d = np.array([1.5, -0.25, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e38, 3e38, 7.0, -1e-3, 2.0 ** -126,
                  1.0, -1.0, 0.1], "<f4")
    blocks[:, 0:4] = d.view(np.uint8).reshape(16, 4)
    return blocks


def tie_rows() -> dict[str, np.ndarray]:
    """One block per type on a code grid with one weight planted where float32 rounding of ``x + mj`` lands on
    a half code and exact arithmetic does not (KQ-2.4 step 5, KQ-5.4): q2_K grid step 3.75, mins 5.625, weight 1
    at -3.875 * 2^-24; q5_K grid step 3.9375, mins 5.5 * 3.9375, weight 5 at -2^-20."""
    q2 = np.tile(np.array([-5.625, -1.875, 1.875, 5.625], np.float32), 64).reshape(1, 256)
    q2[0, 1] = np.float32(-3.875 * 2.0 ** -24)
    q5 = np.tile((np.arange(32) * 3.9375 - 5.5 * 3.9375).astype(np.float32), 8).reshape(1, 256)
    q5[0, 5] = np.float32(-(2.0 ** -20))
    return {"q2_k.tie.x": q2, "q5_k.tie.x": q5}


def inputs() -> dict[str, np.ndarray]:
    from qformats.formats import ggml
    from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks

    rng = np.random.default_rng(20261129 + 33)
    out = {}
    for t in TYPES:
        out[f"{t}.ref.x"] = rows(rng, 36)
        out[f"{t}.imp.x"] = rows(rng, 36)
        w = (rng.gamma(2.0, 1.0, N) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32)
        w[rng.integers(0, N, 40)] = 0                                    # zero weights reach the `!w` branches
        out[f"{t}.imp.w"] = w
        bt = ggml.TYPES[t]
        out[f"{t}.dec.blocks"] = np.concatenate([random_blocks(bt, rng, 3, N, c) for c in SCALE_CLASSES])
    out.update(tie_rows())
    signed = np.random.default_rng(0)                                    # a signed importance vector (GGML-4.2 allows it)
    sx, sw = signed.standard_normal((12, N)).astype(np.float32), signed.standard_normal(N).astype(np.float32)
    for t in TYPES:
        out[f"{t}.signed.x"], out[f"{t}.signed.w"] = sx, sw
    out["q8_k.ref.x"] = q8k_rows(rng)
    out["q8_k.dec.blocks"] = q8k_blocks(rng)
    return out


def _q8k_quantize(lib, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros((x.shape[0], x.shape[1] // 256 * 292), np.uint8)     # zeroed: bsums of zero blocks (KQ-7.3)
    fn = lib.library().quantize_row_q8_K_ref
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64], None
    fn(x.ctypes.data, out.ctypes.data, x.size)
    return out


def digest(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(hashlib.sha256(np.ascontiguousarray(a, np.uint8).tobytes()).digest(), np.uint8)


def record(arrays: dict[str, np.ndarray], lib) -> dict[str, np.ndarray]:
    out = dict(arrays)
    for t in TYPES:
        out[f"{t}.ref.expected"] = lib.quantize(t, arrays[f"{t}.ref.x"])
        out[f"{t}.imp.expected"] = lib.quantize(t, arrays[f"{t}.imp.x"], arrays[f"{t}.imp.w"])
        out[f"{t}.dec.expected"] = lib.dequantize(t, arrays[f"{t}.dec.blocks"])
        out[f"{t}.signed.expected"] = lib.quantize(t, arrays[f"{t}.signed.x"], arrays[f"{t}.signed.w"])
        out[f"{t}.tie.expected"] = lib.quantize(t, arrays[f"{t}.tie.x"])
        out[f"{t}.pass.ref"] = digest(lib.quantize(t, pass_rows()))
        out[f"{t}.pass.imp"] = digest(lib.quantize(t, pass_rows(), pass_w()))
    out["q8_k.ref.expected"] = _q8k_quantize(lib, arrays["q8_k.ref.x"])
    out["q8_k.dec.expected"] = lib.dequantize("q8_k", arrays["q8_k.dec.blocks"])
    return out


def main() -> int:
    lib = oracle()
    return write(DATA, record(inputs(), lib), lib)


if __name__ == "__main__":
    sys.exit(main())
