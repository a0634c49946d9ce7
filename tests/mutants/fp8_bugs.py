"""Deliberately wrong FP8 decoders, each imitating a real bug class (tests/mutants/README.md; spec/fp8.md FP8-9.4).
Each has the fp8_* call contract (spec/kernels.md KC-1.11) and must fail the case named in ``MUTANTS``. They
decode without checking anything, as the readers they imitate do.
"""

from __future__ import annotations

import numpy as np

from qformats.elements import E4M3FN, E4M3FNUZ, table
from qformats.layers import round_to


def _out(v: np.ndarray, dtype: str) -> np.ndarray:
    v = v.astype(np.float32)
    return v.astype(np.float16) if dtype == "float16" else round_to(v, dtype)


def _mutant(*, element=E4M3FN, scale=lambda s: s, block_from_grid=False, divide=False):
    def dequantize(*, weight, weight_scale, block_size, dtype):
        w = np.asarray(weight, np.uint8)
        n, k = w.shape
        s = scale(np.asarray(weight_scale, np.float64))
        s = s.reshape(1, 1) if s.size == 1 else s.reshape(s.shape[0], -1)
        bn, bk = (n // s.shape[0], k // s.shape[1]) if block_from_grid else (min(block_size[0], n), block_size[1])
        cells = np.repeat(np.repeat(s, bn, axis=0)[:n], bk, axis=1)[:, :k]
        if s.shape == (1, 1):                    # one scale for the whole tensor
            cells = np.broadcast_to(s, (n, k))
        with np.errstate(all="ignore"):
            values = table(element)[w].astype(np.float64)
            return _out(values / cells if divide else values * cells, dtype)
    return dequantize


# the scale never applied (read as 1.0): the bare E4M3 values, up to 448 (transformers on a missing
# weight_scale_inv, NVIDIA/TensorRT-Model-Connect#1115)
scale_dropped = _mutant(scale=np.ones_like)
# E4M3FN bytes decoded with the E4M3FNUZ table (bias 8): every value halved and 0x80 read as NaN, the confusion
# vLLM's ROCm path converts away (normalize_e4m3fn_to_e4m3fnuz doubles the scale)
fn_read_as_fnuz = _mutant(element=E4M3FNUZ)
# the block taken from the grid, rows // scale_rows and cols // scale_cols, not the config's
# weight_block_size (transformers 5.24.0 Fp8Dequantize, spec/fp8.md FP8-6.8)
block_from_grid = _mutant(block_from_grid=True)
# weight_scale_inv taken at its name: the weight divided by the scale instead of multiplied (FP8-2.1)
scale_inverted = _mutant(divide=True)

MUTANTS = [
    ("fp8_bugs:scale_dropped", "fp8_block", "dequantize",
     "the weight scale dropped (read as 1.0): the bare E4M3 values, transformers on a missing weight_scale_inv "
     "(NVIDIA/TensorRT-Model-Connect#1115)", r"fp8_block/read/random_256x128_b128x128_f32_to_f32"),
    ("fp8_bugs:fn_read_as_fnuz", "fp8_tensor", "dequantize",
     "E4M3FN bytes decoded with the E4M3FNUZ table (bias 8: values halved, 0x80 NaN), the FN / FNUZ confusion "
     "vLLM's ROCm path normalizes", r"fp8_tensor/read/every_code_f32_to_f32"),
    ("fp8_bugs:block_from_grid", "fp8_block", "dequantize",
     "the block derived from the grid (rows // scale_rows), not weight_block_size (transformers 5.24.0 "
     "Fp8Dequantize): 65-row blocks for a 130-row weight", r"fp8_block/read/random_130x200_b128x128_f32_to_bf16"),
    ("fp8_bugs:scale_inverted", "fp8_channel", "dequantize",
     "weight_scale_inv taken at its name: the weight divided by the scale, not multiplied (DeepSeek-V3 "
     "README_WEIGHTS.md: dequantized by multiplying)", r"fp8_channel/read/random_64x96_f32_to_f32"),
]
