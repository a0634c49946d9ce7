"""q4_K throughput: qformats vs gguf-py dequantize on 16M weights, and our encoders.

    .venv/bin/python benchmarks/q4_k.py [--rows 4096] [--n 4096] [--repeat 5]

Not a test: prints figures. It does assert that both decoders agree bit for bit.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from qformats.formats import q4_k


def best_of(fn, repeat: int, clock=time.perf_counter) -> tuple[float, object]:
    """The least time of ``repeat`` calls by ``clock`` (wall time; ``time.thread_time`` counts only this
    thread's CPU time, the steadier figure on a machine shared with other work), and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = clock()
        out = fn()
        best = min(best, clock() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((args.rows, args.n)) * 0.02).astype(np.float32)
    n_w = x.size
    print(f"q4_K benchmark: {args.rows} x {args.n} = {n_w:,} weights, numpy {np.__version__}")

    t_enc, blocks = best_of(lambda: q4_k.quantize(x), 1)
    print(f"encode (reference path)  : {t_enc:8.3f} s  {n_w / t_enc / 1e6:8.2f} M weights/s")
    sub = x[: max(1, args.rows // 8)]
    imp = rng.gamma(2.0, 1.0, args.n).astype(np.float32)
    t_imp, _ = best_of(lambda: q4_k.quantize(sub, importance=imp), 1)
    print(f"encode (importance path) : {t_imp:8.3f} s  {sub.size / t_imp / 1e6:8.2f} M weights/s "
          f"({sub.size:,} weights)")

    t_ours, y_ours = best_of(lambda: q4_k.dequantize(blocks), args.repeat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t_gguf, y_gguf = best_of(lambda: gguf_dequantize(blocks, GGMLQuantizationType.Q4_K), args.repeat)
    assert np.array_equal(y_ours.view(np.uint32), y_gguf.view(np.uint32)), "decoders disagree"
    print(f"dequantize qformats      : {t_ours * 1e3:8.2f} ms  {n_w / t_ours / 1e6:8.1f} M weights/s")
    print(f"dequantize gguf-py       : {t_gguf * 1e3:8.2f} ms  {n_w / t_gguf / 1e6:8.1f} M weights/s")
    print(f"ratio gguf-py / qformats : {t_gguf / t_ours:8.2f}x (best of {args.repeat}; bit-identical)")


if __name__ == "__main__":
    main()
