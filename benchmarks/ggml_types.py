"""Every GGUF block type: qformats' reference decode against gguf-py and ggml's C, and encode against ggml's C.

    .venv/bin/python benchmarks/ggml_types.py [--rows 1024] [--n 4096] [--repeat 3] [--types q6_k,q8_0]

Needs QFORMATS_GGML_LIB (``make ggml-oracle``): ggml's ``dequantize_row_<type>`` and ``quantize_<type>``
run on one thread (ggml-base has no threads). Prints, per type, decode time and the ratios gguf-py /
qformats (goal >= 3x) and qformats / ggml C (goal <= 1.5x for q4_K, the K-quants no slower than it), then
encode time as a ratio to ggml's C (goal <= 3x), in one run on the same data. A peer without the type
(gguf-py 0.19 has no q1_0 decoder, ggml 0.10.1 no q2_0) is reported as "peer has none" and the run goes
on. Asserts bit identity of the decoders (against ggml's C, or gguf-py where C has none) and byte
identity of the encoders, so a figure is never taken on a wrong answer. Not a test: prints figures,
then NOTES: why a type misses a goal, measured.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
import warnings

import numpy as np

import q4_k                # benchmarks/q4_k.py: the same best-of-N timer
from qformats.formats import ggml

NONE = "peer has none"

# Why a type misses a goal, measured 2026-11-28 (thread CPU time, NumPy 2.4, ggml 0.10.1 at -O3 on one core
# of a 2-core machine shared with other work). One NumPy operation over contiguous float32 in cache costs
# about 0.1 ns a weight; a broadcast over runs of 16 or 32 weights, a gather or a strided copy 2x to 10x
# that. A decoder is a count of whole-array steps; ggml's C does the whole decode in one loop.
NOTES = {
    "q4_k": "below 1.5x ggml's C is out of NumPy's reach: on 4.2M weights the decode is seven whole-array steps, "
            "sub-block scales 0.4 ms, nibble repeat + mask 0.35, widening to float32 0.7, repeating d*sc and "
            "dmin*m per weight 1.0, multiply 0.5, subtract 0.5 (about 3.6 ms), where C's one loop takes 0.9 to "
            "1.9 ms with the machine's load; on 16.8M weights both also pay about 8 ms of page faults for the "
            "fresh 67 MB output. Measured slower: broadcasting the scales over 32-weight runs (1.0 ms a step), "
            "a 16-entry table per sub-block (a gather, about 1 ns a weight), a transposed layout (the float32 "
            "transpose back, about 3 ms), a mixed-type multiply that widens the codes itself (+0.6 ms).",
    "q5_k": "q4_K's steps plus the fifth bit (a repeat of qh and four uint8 operations, about 1 ms); ggml's q5_K "
            "loop is as cheap as q4_K's, so about 3x its C.",
    "q4_1": "SWAR nibbles, one widening, d and m repeated per weight, multiply and add: 3.8 ms alone against "
            "gguf-py's 12.7 (3.3x); between 2.3x and 3.9x in full runs under load.",
    "q2_k": "q4_K's decode tail on 2-bit codes: 2.6x to 3.2x gguf-py between runs, about 1.1x to 1.3x its C.",
    "q6_k": "ten uint8 steps on the codes (ql and qh repeated, shifted by multiplies, masked, merged), one widening, "
            "one multiply by the repeated d*sc: 3.1x to 3.5x gguf-py on a quiet machine (2026-11-28), 2.1x to 2.9x on "
            "4.2M weights beside mutation runs (2026-11-29), where gguf-py's fewer, larger steps lose less to the load; "
            "0.8x to 1.2x its C.",
    "tq2_0": "2-bit unpack, one widening, one multiply: near 3x gguf-py, within the machine's noise of it.",
    "nvfp4": "every weight is one exact product kvalues[c] * D(d), so a (scale byte, qs byte) pair names both of "
             "its weights: one 512 KiB table of (low, high) float32 pairs and one gather per qs byte, 7.1 ms on 4.2M "
             "weights (4.7x gguf-py, 1.3x C; 2026-11-29), where widening the codes and multiplying by the repeated "
             "scales took 12.9 to 14.1 ms (2.0x to 2.5x gguf-py, 2.8x to 3.0x C).",
}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def _c_decoder(oracle, name: str):
    """ggml's dequantize_row_<type> as a function of the blocks, or None where the library lacks it."""
    lib = oracle.oracle()
    try:
        getattr(lib.lib, f"dequantize_row_{oracle._spelling(name)}")
    except AttributeError:
        return None
    return lambda blocks: lib.dequantize(name, blocks)


def _gguf_decoder(name: str, blocks: np.ndarray):
    """gguf-py's dequantize for the type, or None where gguf-py has none (no such type, or its
    dequantize raises NotImplementedError, as gguf-py 0.19 does for q1_0)."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    qtype = getattr(GGMLQuantizationType, name.upper(), None)
    if qtype is None:
        return None
    try:
        dequantize(blocks[:1], qtype)
    except NotImplementedError:
        return None
    return lambda b: dequantize(b, qtype)


def _blocks(bt, x: np.ndarray, w, c_decode, oracle) -> np.ndarray:
    """The blocks every decoder is timed on: ggml's encoder where it has the type, else ours."""
    if c_decode is not None:
        return oracle.quantize(bt.name, x, w)
    return ggml.quantize(bt.name, x, w)


def bench_type(name: str, x: np.ndarray, repeat: int, oracle, clock=time.perf_counter) -> dict:
    best_of = functools.partial(q4_k.best_of, clock=clock)
    bt = ggml.TYPES[name]
    importance = np.random.default_rng(1).gamma(2.0, 1.0, x.shape[1]).astype(np.float32)
    w = importance if bt.requires_importance else None
    c_decode = _c_decoder(oracle, name)
    blocks = _blocks(bt, x, w, c_decode, oracle)
    py_decode = _gguf_decoder(name, blocks)
    row = {"type": name, "weights": x.size}
    t_ours, y_ours = best_of(lambda: ggml.dequantize(name, blocks), repeat)
    row["decode_ms"] = t_ours * 1e3
    y_ref = None
    if c_decode is not None:
        t_c, y_ref = best_of(lambda: c_decode(blocks), repeat)
        row.update(c_ms=t_c * 1e3, c_ratio=t_ours / t_c)
    if py_decode is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            t_py, y_py = best_of(lambda: py_decode(blocks), repeat)
        row.update(gguf_py_ratio=t_py / t_ours, gguf_py_agrees=y_ref is None or _same_bits(y_py, y_ref))
        y_ref = y_py if y_ref is None else y_ref
    if y_ref is not None:
        assert _same_bits(y_ours, y_ref), f"{name}: qformats and the peer's decoder disagree"
    if bt.quantize is not None and c_decode is not None:
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


def _cell(row: dict, key: str, width: int, fmt: str = "{:.2f}x", missing: str = "-") -> str:
    return (fmt.format(row[key]) if key in row else missing).rjust(width)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--types", default="", help="comma-separated type names (default: every block type)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (README)")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by this thread's CPU time (time.thread_time), not wall time: steadier on a "
                         "shared machine")
    args = ap.parse_args()
    if not os.environ.get("QFORMATS_GGML_LIB"):
        raise SystemExit("set QFORMATS_GGML_LIB (make ggml-oracle builds .venv/ggml/libggml-base.so)")
    from conformance.adapters import ggml as oracle
    from qformats.formats.ggml.cases import subject_types

    names = args.types.split(",") if args.types else ["q4_k"] + [bt.name for bt in subject_types()]
    x = (np.random.default_rng(0).standard_normal((args.rows, args.n)) * 0.02).astype(np.float32)
    print(f"GGUF block types: {args.rows} x {args.n} = {x.size:,} weights per type, numpy {np.__version__}, "
          f"ggml {oracle.version()[0]} (one thread), best of {args.repeat}, "
          f"{'thread CPU time' if args.cpu_time else 'wall time'}")
    clock = time.thread_time if args.cpu_time else time.perf_counter
    head = ("type", "decode ms", "ggml C ms", "gguf-py/ours", "ours/ggml C", "encode/C", "imatrix/C")
    widths = (8, 10, 13, 14, 14, 9, 10)
    if args.markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    else:
        print(" ".join(h.rjust(wd) if i else h.ljust(wd) for i, (h, wd) in enumerate(zip(head, widths))))
    for name in names:
        r = bench_type(name, x, args.repeat, oracle, clock)
        cells = [name.ljust(8), f"{r['decode_ms']:10.2f}", _cell(r, "c_ms", 13, "{:.2f}", NONE),
                 _cell(r, "gguf_py_ratio", 14, missing=NONE), _cell(r, "c_ratio", 14, missing=NONE),
                 _cell(r, "encode_c_ratio", 9), _cell(r, "imatrix_c_ratio", 10)]
        if not r.get("gguf_py_agrees", True):
            cells[3] = cells[3].rstrip() + " (gguf-py differs from ggml!)"
        print("| " + " | ".join(c.strip() for c in cells) + " |" if args.markdown else " ".join(cells), flush=True)
    print("NOTES")
    for name in names:
        if name in NOTES:
            print(f"  {name}: {NOTES[name]}")


if __name__ == "__main__":
    main()
