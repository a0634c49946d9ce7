"""Deliberately wrong NVFP4 / MXFP4 decoders, each imitating a real bug (tests/mutants/README.md; spec/fp4.md
FP4-7.2). Each has the nvfp4_packed or mxfp4_packed call contract (spec/kernels.md KC-1.12) and must fail the
case named in ``MUTANTS``. They decode without checking anything, as the readers they imitate do; the element
values are written out here (FP4-1.2), not taken from qformats' codec."""

from __future__ import annotations

import ml_dtypes
import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
GGUF_DOUBLED = E2M1 * 2                         # llama.cpp's kvalues_mxfp4: the table doubled, the scale halved


def _codes(packed, *, split: int = 0) -> np.ndarray:
    """Codes in the layout's order (element 2j the low nibble of byte j), or, with ``split`` = g, GGUF's: in each
    block of g codes, byte j holds element j (low) and j + g/2 (high) (kekzl/imp#567)."""
    p = np.asarray(packed, np.uint8)
    if not split:
        return np.stack([p & 15, p >> 4], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])
    blocks = p.reshape(*p.shape[:-1], -1, split // 2)
    return np.concatenate([blocks & 15, blocks >> 4], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])


def _ue4m3(b) -> np.ndarray:
    return np.asarray(b, np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)


def _bf16(w) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(w, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _nvfp4(*, multiply=False, drop_scale=False):
    def dequantize(*, weight_packed, weight_scale, weight_global_scale):
        g = np.float32(np.asarray(weight_global_scale).reshape(-1)[0])
        s = np.ones(np.shape(weight_scale), np.float32) if drop_scale else _ue4m3(weight_scale)
        s32 = (s * g if multiply else s / g).astype(np.float32)
        return _bf16(E2M1[_codes(weight_packed)] * np.repeat(s32, 16, axis=-1))
    return dequantize


def _mxfp4(*, split=False, table=E2M1, ff_inf=False):
    def dequantize(*, weight_packed, weight_scale):
        e = np.asarray(weight_scale, np.uint8).astype(np.int32)
        scale = np.ldexp(np.float32(1), e - 127).astype(np.float32)
        if ff_inf:                                   # 2^(255 - 127) computed in bfloat16: inf, not NaN
            scale = np.where(e == 255, np.float32(np.inf), scale)
        with np.errstate(all="ignore"):
            return _bf16(table[_codes(weight_packed, split=32 if split else 0)] * np.repeat(scale, 32, axis=-1))
    return dequantize


# compressed-tensors' weight_global_scale used as a multiplier, as ModelOpt's weight_scale_2 is (MAX, modular#6600)
global_scale_not_inverted = _nvfp4(multiply=True)
# the UE4M3 block scales never applied: e2m1 / weight_global_scale
block_scale_dropped = _nvfp4(drop_scale=True)
# GGUF's split nibble order (element j and j + 16 in byte j) read on the linear safetensors layout (kekzl/imp#567)
nibbles_split_order = _mxfp4(split=True)
# GGUF's doubled E2M1 table (kvalues_mxfp4) with the full E8M0 scale instead of the half one (tinygrad#14849)
gguf_table_full_scale = _mxfp4(table=GGUF_DOUBLED)
# E8M0 0xFF computed as 2^128 (inf in bfloat16) instead of NaN: compressed-tensors' decompress_mx_scale, ModelOpt
e8m0_ff_as_inf = _mxfp4(ff_inf=True)

MUTANTS = [
    ("fp4_bugs:global_scale_not_inverted", "nvfp4_packed", "dequantize",
     "NVFP4 weight_global_scale multiplied where compressed-tensors divides (MAX on RedHatAI checkpoints, "
     "modular#6600)", r"nvfp4_packed/read/n7_k48"),
    ("fp4_bugs:block_scale_dropped", "nvfp4_packed", "dequantize",
     "NVFP4 block scales never applied (e2m1 / global scale)", r"nvfp4_packed/read/n7_k48"),
    ("fp4_bugs:nibbles_split_order", "mxfp4_packed", "dequantize",
     "GGUF's split nibble order (j and j + 16 in byte j) read on the linear layout (kekzl/imp#567)",
     r"mxfp4_packed/read/n7_k96"),
    ("fp4_bugs:gguf_table_full_scale", "mxfp4_packed", "dequantize",
     "GGUF's doubled E2M1 table with the full E8M0 scale: every weight twice its value (tinygrad#14849)",
     r"mxfp4_packed/read/n7_k96"),
    ("fp4_bugs:e8m0_ff_as_inf", "mxfp4_packed", "dequantize",
     "E8M0 0xFF read as 2^128 (inf) instead of NaN (compressed-tensors 0.20.0, ModelOpt 0.47.0)",
     r"mxfp4_packed/read/invalid/e8m0_nan"),
]
