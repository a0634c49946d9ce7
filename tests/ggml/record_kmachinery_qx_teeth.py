"""Record the expected bytes of ``kmachinery_qx_teeth_ggml.npz`` from ggml's C encoders (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_kmachinery_qx_teeth.py

The symmetric searches of ``qformats/formats/ggml/kmachinery_qx.py`` (spec/ggml_kquants.md KQ-1.1, KQ-1.2) are
static in ggml; q3_K reaches both (``make_q3_quants`` on the reference path, ``make_qx_quants`` twice on the
importance path, KQ-3.4 / KQ-3.5). Each case is one or a few q3_K rows (``<case>.x``, float32 (rows, 256)), the
importance vector where the case has one (``<case>.w``, float32 (256,)), and what ggml 0.10.1's
``quantize_q3_K(x, y, rows, 256, w)`` wrote (``<case>.expected``, uint8):

* ``ref_six_passes``: a sub-block whose coordinate descent still changes a code in its fifth pass (KQ-1.2's
  "up to 5 times");
* ``ref_same_code_steps``: sub-blocks on which re-adding an unchanged code's terms would round the sums upward
  (KQ-1.2's ``nl != L[i]``);
* ``ref_one_live_group``: one row, 15 all-zero sub-blocks and one whose descent changes codes in two passes (the
  descent of a single group must not stop early);
* ``imp_nan_sub_scale``: a sub-block whose ``(w*x)`` overflows where its code is 0, so its scale is NaN while its
  weight sum ``sw`` stays finite: the second search (16 scales, weights ``sw``) meets a NaN with a finite weight
  (KQ-1.1: ``suml2 != 0``, NaN scale);
* ``imp_inf_sub_scale``: a sub-block of 1e18s whose ``sumlx`` overflows to -inf with finite ``suml2`` and ``sw``:
  the second search meets -inf with a finite weight, every code 0, ``suml2 = 0``, scale 0 (KQ-1.1).

The ``ref_*`` sub-blocks were found by searching 400,000 random gaussian, t(2), cubed-uniform and signed
exponential sub-blocks for ones on which a deliberate change to the descent changes the bytes; they are written
here as float32 bit patterns. The expected bytes come only from ggml. tests/ggml/test_kmachinery_qx_teeth.py reads
them, and checks them against the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ggml_recording import oracle, write  # noqa: E402

DATA = Path(__file__).with_name("kmachinery_qx_teeth_ggml.npz")

# (sub-block index, its 16 float32 bit patterns); the rest of the row is zero
_FOUND = {
    "ref_six_passes": [(3, "3faed680 befbba1d bf3a2240 bf943631 3f8977f0 be3557e3 bf83c252 3fb2b590 "
                           "3f915e58 3e65ab19 3f25c9a0 bf5a8845 3f0b801e 3e5ef887 bfb4b328 bcd2db6e")],
    "ref_same_code_steps": [
        (10, "bfbc4c38 3fa62efd bf881265 be4dde47 bfcbcafd 3fb01700 3d012496 bd9cd34b "
             "3f490653 be50e147 bf139fb7 bf1d1454 3f85fe9d bfd42eb9 3fa5c11b bfce6811"),
        (1, "be6c9850 3f76114b 3f47abb1 c0ac747d 400b2590 3c9e0673 404bbfa4 beab5d11 "
            "bf2d0dc4 3f96b2ad 3f7f634a bed82480 3f8473c6 bf495fd4 bf7cc9c8 bf0aa4ed"),
        (12, "bf9a5956 c0084c86 bfecaa50 3dcc52a4 3f846679 3f9c4320 bf001c1e 3f2ff9da "
             "bf8adacb be9c4861 bf375d21 bc37f448 bf35b54b be68bfd9 bff3e37c bf17e270")],
    "ref_one_live_group": [(0, "3faa3152 3ecea486 bf0e96b8 bf57602d 3f0fdb69 3fb28986 3eb518e2 bfc185e0 "
                               "bf8568c3 be697218 3fadb7a0 3e911bd0 3ea78ee1 3f9af1c9 be518179 bdb68274")],
}


def _rows(found: list[tuple[int, str]]) -> np.ndarray:
    x = np.zeros((len(found), 256), np.float32)
    for r, (sub, bits) in enumerate(found):
        x[r, 16 * sub:16 * sub + 16] = np.array([int(b, 16) for b in bits.split()], np.uint32).view(np.float32)
    return x


def _special_rows() -> dict[str, np.ndarray]:
    """The two importance rows, constructed (q3_K's weights: ``qw[i] * sqrt(2 * sum(x*x) / 256 + x[i]*x[i])``)."""
    rng = np.random.default_rng(3)
    out = {}
    # sub-block 0 = [40, 4, 0, ...] among 240 weights of magnitude 50..150 (sigma2 ~ 1.9e4): qw[1] = 1.5e36 gives
    # w[1] ~ 2e38 (finite), w[1] * 4 = inf, and code nearest_int(-4/40 * 4) = 0: sumlx = inf * 0 = NaN
    x = np.zeros((1, 256), np.float32)
    x[0, 16:] = rng.uniform(50, 150, 240) * rng.choice([-1, 1], 240)
    x[0, :2] = 40, 4
    w = np.ones(256, np.float32)
    w[1] = 1.5e36
    out["imp_nan_sub_scale.x"], out["imp_nan_sub_scale.w"] = x, w
    # sub-block 0 = sixteen 1e18s (x*x = 1e36, sigma2 ~ 1.25e35) weighted 10: each (w*x)*l ~ -4.2e37, their sum
    # -inf; suml2 and sw ~ 1.7e20 stay finite, so the sub-block scale is -inf
    x = np.zeros((1, 256), np.float32)
    x[0, :16] = 1e18
    x[0, 16:] = rng.standard_normal(240)
    w = np.ones(256, np.float32)
    w[:16] = 10
    out["imp_inf_sub_scale.x"], out["imp_inf_sub_scale.w"] = x, w
    return out


def inputs() -> dict[str, np.ndarray]:
    out = {f"{case}.x": _rows(found) for case, found in _FOUND.items()}
    out.update(_special_rows())
    return out


def record(arrays: dict[str, np.ndarray], lib) -> dict[str, np.ndarray]:
    out = dict(arrays)
    for key in [k for k in arrays if k.endswith(".x")]:
        case = key[:-2]
        out[f"{case}.expected"] = lib.quantize("q3_k", arrays[key], arrays.get(f"{case}.w"))
    return out


def main() -> int:
    lib = oracle()
    return write(DATA, record(inputs(), lib), lib)


if __name__ == "__main__":
    sys.exit(main())
