"""Every GGUF block type: qformats' reference decode against gguf-py and ggml's C, and encode against ggml's C.

    .venv/bin/python benchmarks/ggml_types.py [--rows 1024] [--n 4096] [--repeat 3] [--types q6_k,q8_0]

Needs QFORMATS_GGML_LIB (``make ggml-oracle``): ggml's ``dequantize_row_<type>`` and ``quantize_<type>``
run on one thread (ggml-base has no threads). Prints, per type, decode throughput and the ratios
gguf-py / qformats (goal >= 3x) and qformats / ggml C, then encode time as a ratio to ggml's C (goal
<= 3x), in one run on the same data. Asserts bit identity of the three decoders and byte identity of
the encoders, so a figure is never taken on a wrong answer. Not a test: prints figures.
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np

from q4_k import best_of   # benchmarks/q4_k.py: the same best-of-N timer
from qformats.formats import ggml


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def bench_type(name: str, x: np.ndarray, repeat: int, oracle) -> dict:
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    bt = ggml.TYPES[name]
    importance = np.random.default_rng(1).gamma(2.0, 1.0, x.shape[1]).astype(np.float32)
    w = importance if bt.requires_importance else None
    blocks = oracle.quantize(name, x, w)
    row = {"type": name, "weights": x.size}
    t_ours, y_ours = best_of(lambda: ggml.dequantize(name, blocks), repeat)
    t_c, y_c = best_of(lambda: oracle.dequantize(name, blocks), repeat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t_py, y_py = best_of(lambda: gguf_dequantize(blocks, GGMLQuantizationType[name.upper()]), repeat)
    assert _same_bits(y_ours, y_c), f"{name}: qformats and ggml decoders disagree"
    row.update(decode_ms=t_ours * 1e3, gguf_py_ratio=t_py / t_ours, c_ratio=t_ours / t_c,
               gguf_py_agrees=_same_bits(y_py, y_c))
    if bt.quantize is not None:
        sub = x[: max(1, x.shape[0] // 8)]
        t_enc, ours = best_of(lambda: ggml.quantize(name, sub, w), repeat)
        t_cenc, theirs = best_of(lambda: oracle.quantize(name, sub, w), repeat)
        assert np.array_equal(ours, theirs), f"{name}: encoders disagree"
        row.update(encode_ms=t_enc * 1e3, encode_c_ratio=t_enc / t_cenc)
        if bt.importance and not bt.requires_importance:
            t_imp, ours = best_of(lambda: ggml.quantize(name, sub, importance), repeat)
            t_cimp, theirs = best_of(lambda: oracle.quantize(name, sub, importance), repeat)
            assert np.array_equal(ours, theirs), f"{name}: importance encoders disagree"
            row.update(imatrix_c_ratio=t_imp / t_cimp)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--types", default="", help="comma-separated type names (default: every block type)")
    args = ap.parse_args()
    if not os.environ.get("QFORMATS_GGML_LIB"):
        raise SystemExit("set QFORMATS_GGML_LIB (make ggml-oracle builds .venv/ggml/libggml-base.so)")
    from conformance.adapters import ggml as oracle
    from qformats.formats.ggml.cases import subject_types

    names = args.types.split(",") if args.types else [bt.name for bt in subject_types()] + ["q4_k"]
    x = (np.random.default_rng(0).standard_normal((args.rows, args.n)) * 0.02).astype(np.float32)
    print(f"GGUF block types: {args.rows} x {args.n} = {x.size:,} weights per type, numpy {np.__version__}, "
          f"ggml {oracle.version()[0]} (one thread), best of {args.repeat}")
    print(f"{'type':8} {'decode ms':>10} {'gguf-py/ours':>13} {'ours/ggml C':>12} {'encode/C':>9} {'imatrix/C':>10}")
    for name in names:
        r = bench_type(name, x, args.repeat, oracle)
        enc = f"{r['encode_c_ratio']:8.2f}x" if "encode_c_ratio" in r else f"{'-':>9}"
        imp = f"{r['imatrix_c_ratio']:9.2f}x" if "imatrix_c_ratio" in r else f"{'-':>10}"
        note = "" if r["gguf_py_agrees"] else "  (gguf-py differs from ggml!)"
        print(f"{name:8} {r['decode_ms']:10.2f} {r['gguf_py_ratio']:12.2f}x {r['c_ratio']:11.2f}x {enc} {imp}{note}")


if __name__ == "__main__":
    main()
