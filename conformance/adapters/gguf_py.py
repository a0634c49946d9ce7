"""gguf-py (``pip install gguf``, llama.cpp's Python package) as a q4_K subject.

``gguf.quants.dequantize(data, GGMLQuantizationType.Q4_K)`` takes the raw uint8 rows and returns
float32 ``(rows, n)``; ``gguf.quants.quantize`` has no q4_K encoder (it raises NotImplementedError),
which the runner reports as an error per case rather than hiding.
"""

from __future__ import annotations

import numpy as np


def q4_k_dequantize(*, blocks, rows, n):
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize

    return dequantize(np.asarray(blocks, np.uint8), GGMLQuantizationType.Q4_K)


def q4_k_quantize(*, x):
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import quantize

    return quantize(np.asarray(x, np.float32), GGMLQuantizationType.Q4_K)
