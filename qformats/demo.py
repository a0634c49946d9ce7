"""``make demo``: encode a small random layer in every GPTQ width, decode it, show what the zeros say.

Later revisions of the demo validate the bundled sample checkpoints; for now it exercises the
reference codec end to end and prints figures a reader can check by hand.
"""

from __future__ import annotations

import numpy as np

from .formats import gptq
from .formats.gptq.evidence import label_evidence


def _row(bits: int, sym: bool, version: str, weight: np.ndarray) -> str:
    layer = gptq.quantize(weight, bits=bits, group_size=32, sym=sym, version=version)
    w_hat = gptq.dequantize(layer, bits=bits, version=version)
    rel = float(np.linalg.norm(w_hat - weight) / np.linalg.norm(weight))
    scale = float(np.median(layer.scales.astype(np.float32)))
    evidence = label_evidence(layer.qzeros, bits, qweight=layer.qweight, g_idx=layer.g_idx, sym=sym)
    stat = "" if evidence.statistic is None else f" (d = {evidence.statistic:+.3f})"
    return (f"  {bits}-bit {'sym ' if sym else 'asym'} {version}: max |w - w_hat| = {np.abs(w_hat - weight).max():.4f}"
            f" (median scale {scale:.4f}), relative error {rel:.4f}; zeros say {evidence.verdict}"
            f" by {evidence.method}{stat}")


def main() -> int:
    rng = np.random.default_rng(0)
    weight = rng.normal(0.0, 0.02, size=(256, 512)).astype(np.float32)  # (out, in), LLM-like scale
    print("qformats demo: GPTQ round trip of a random 256x512 layer, group size 32, RTN min-max")
    for bits in (2, 3, 4, 8):
        for sym in (True, False):
            version = "v1" if sym else "v2"  # asymmetric layers may need zero 0: v2 stores it
            print(_row(bits, sym, version, weight))
    mislabelled = gptq.quantize(weight, bits=4, group_size=32, sym=True, version="v2")
    ev = label_evidence(mislabelled.qzeros, 4, sym=True)
    print(f"\nA symmetric 4-bit v2 layer has qzeros words 0x{int(mislabelled.qzeros.view(np.uint32)[0, 0]):08x}; "
          f"labelled 'gptq' it would be read as zero 9. Evidence: {ev.verdict} ({ev.detail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
