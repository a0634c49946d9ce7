"""Re-record the expected bytes of ``kmachinery_teeth_ggml.npz`` from ggml's C encoders (issue 33 item 3).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_kmachinery_teeth.py

The file holds one super-block row per case (``<case>.x``, float32 (1, 256)), its importance vector where the
case has one (``<case>.w``, float32 (256,)), the ggml type (``<case>.type``) and what ggml 0.10.1's
``quantize_<type>(x, y, 1, 256, w)`` wrote (``<case>.expected``, uint8). The rows were found by searching random
rows (gaussian, heavy-tailed, one-signed, grid, tiny and special values; importance vectors with zeros, tiny or
mixed-sign values) for ones on which a deliberate change to the shared K-quant machinery changes the bytes; the
expected bytes come only from ggml. tests/ggml/test_kmachinery_teeth.py reads them, and checks them against the
live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("kmachinery_teeth_ggml.npz")


def cases(data) -> list[str]:
    return sorted({key.rsplit(".", 1)[0] for key in data.files})


def record(data, quantize) -> dict[str, np.ndarray]:
    """Every case's arrays with ``expected`` replaced by ``quantize(type, x, w)``."""
    out = {}
    for case in cases(data):
        t, x = str(data[f"{case}.type"]), data[f"{case}.x"]
        w = data[f"{case}.w"] if f"{case}.w" in data.files else None
        out.update({k: data[k] for k in data.files if k.startswith(case + ".")})
        out[f"{case}.expected"] = quantize(t, x, w)
    return out


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from conformance.adapters import ggml as ggml_lib

    with np.load(DATA) as data:
        arrays = record(data, ggml_lib.quantize)
    np.savez_compressed(DATA, **arrays)
    print(f"{DATA}: {len(arrays)} arrays, ggml {ggml_lib.version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
