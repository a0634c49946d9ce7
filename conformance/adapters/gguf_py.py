"""gguf-py (``pip install gguf``, llama.cpp's Python package) as a subject for every GGUF block type.

``gguf.quants.dequantize(data, GGMLQuantizationType.T)`` takes the raw uint8 rows and returns float32
``(rows, n)``; ``gguf.quants.quantize(x, T)`` encodes the types it has an encoder for and raises
NotImplementedError for the others (every K-quant and i-quant in 0.19.0), which the runner reports as
an error per case rather than hiding. Subjects are ``<type>_dequantize`` / ``<type>_quantize``
(``q6_k_dequantize``), one per type gguf-py names.
"""

from __future__ import annotations

import numpy as np

from . import type_subjects

TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs", "iq2_xs",
         "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "mxfp4", "nvfp4", "q1_0")


def _qtype(name: str):
    from gguf.constants import GGMLQuantizationType

    return GGMLQuantizationType[name.upper()]


def dequantize(name: str, blocks) -> np.ndarray:
    from gguf.quants import dequantize as gguf_dequantize

    return gguf_dequantize(np.asarray(blocks, np.uint8), _qtype(name))


def quantize(name: str, x) -> np.ndarray:
    from gguf.quants import quantize as gguf_quantize

    return gguf_quantize(np.asarray(x, np.float32), _qtype(name))


type_subjects(globals(), TYPES, dequantize, quantize)
