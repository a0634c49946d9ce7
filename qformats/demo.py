"""``make demo``: validate the bundled sample checkpoints, then show the GPTQ codec at work.

The samples (``fixtures/checkpoints/``, made by :mod:`qformats.samples`) are one valid
checkpoint per format plus the two GPTQ failures the field meets most; the validator must call
each exactly as its name says.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .formats import gptq
from .formats.gptq.evidence import label_evidence
from .report import to_text
from .samples import SAMPLES
from .validate import validate

SAMPLE_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


def validate_samples() -> bool:
    print(f"== qformats validate --deep on the bundled samples ({SAMPLE_ROOT})\n")
    all_as_expected = True
    for name, (_, verdict, codes) in SAMPLES.items():
        report = validate(str(SAMPLE_ROOT / name), deep=True)
        print(to_text(report), end="")
        seen = {f.code for f in report.findings if f.severity == "error"}
        ok = report.verdict == verdict and seen == set(codes)
        all_as_expected &= ok
        print(f"  -> expected {verdict}{' with ' + ', '.join(codes) if codes else ''}: "
              f"{'as expected' if ok else 'NOT AS EXPECTED'}\n")
    return all_as_expected


def codec_round_trip() -> None:
    rng = np.random.default_rng(0)
    weight = rng.normal(0.0, 0.02, size=(256, 512)).astype(np.float32)  # (out, in), LLM-like scale
    print("== GPTQ round trip of a random 256x512 layer, group size 32, RTN min-max\n")
    for bits in (2, 3, 4, 8):
        for sym in (True, False):
            version = "v1" if sym else "v2"  # asymmetric groups may need zero 0, which only v2 stores
            layer = gptq.quantize(weight, bits=bits, group_size=32, sym=sym, version=version)
            w_hat = gptq.dequantize(layer, bits=bits, version=version)
            rel = float(np.linalg.norm(w_hat - weight) / np.linalg.norm(weight))
            ev = label_evidence(layer.qzeros, bits, qweight=layer.qweight, g_idx=layer.g_idx, sym=sym)
            stat = "" if ev.statistic is None else f", d = {ev.statistic:+.3f}"
            print(f"  {bits}-bit {'sym ' if sym else 'asym'} {version}: relative error {rel:.4f}, "
                  f"max |w - w_hat| {np.abs(w_hat - weight).max():.5f}; zeros say {ev.verdict} ({ev.method}{stat})")


def main() -> int:
    ok = validate_samples()
    codec_round_trip()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
