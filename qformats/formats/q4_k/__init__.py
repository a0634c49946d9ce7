"""llama.cpp / ggml ``q4_K``: 256 weights in 144-byte blocks (spec/q4_k.md).

``quantize(x, importance=None)`` and ``dequantize(blocks)`` are bit-identical to llama.cpp's
``quantize_row_q4_K_ref`` / ``quantize_row_q4_K_impl`` and ``dequantize_row_q4_K``.
"""

from .checks import check_blocks
from .codec import dequantize, quantize
from .layout import BLOCK_BYTES, GGML_TYPE_Q4_K, K_SCALE_SIZE, QK_K, SCHEMA_MODELS, Q4KTensor

__all__ = [
    "quantize",
    "dequantize",
    "check_blocks",
    "QK_K",
    "K_SCALE_SIZE",
    "BLOCK_BYTES",
    "GGML_TYPE_Q4_K",
    "Q4KTensor",
    "SCHEMA_MODELS",
]
