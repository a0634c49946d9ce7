"""Run under .venv/real (compressed-tensors 0.20.0, transformers 5.24.0): each real FP8 decoder as a conformance
subject on the fp8_* matrix (conformance/adapters/ct_fp8.py, transformers_fp8.py), in one interpreter (transformers' per-tensor run, the channel path with one row, is left to `make matrix`); prints
``{"<entry> <format>": {"level": ..., "cases": {id: [status, attributed clause, misreading]}}}`` as JSON."""

from __future__ import annotations

import json
import sys

from conformance import run_kernel

RUNS = [(f"conformance.adapters.ct_fp8:dequantize_{s}", f"fp8_{s}") for s in ("tensor", "channel", "block")] + \
    [("conformance.adapters.transformers_fp8:dequantize", f"fp8_{s}") for s in ("channel", "block")] + \
    [("conformance.adapters.transformers_fp8:dequantize_backward_block", "fp8_block")]


def main() -> None:
    out = {}
    for entry, fmt in RUNS:
        r = run_kernel(entry, fmt=fmt, op="dequantize", jobs=1, timeout=300)
        out[f"{entry} {fmt}"] = {"level": r.level(), "cases": {
            c.id: [c.status, c.attributed[0] if c.attributed else "", c.misreading] for c in r.cases}}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
