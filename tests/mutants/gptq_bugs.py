"""Deliberately wrong GPTQ kernels and writers, each imitating a bug real tools shipped (tests/mutants/README.md).

Every function has the conformance call contract (DESIGN.md §6). Several are qformats' own
emulations of real readers and writers (spec/gptq.md GPTQ-4), run as if they were kernels.
"""

from __future__ import annotations

import numpy as np

from qformats.formats import gptq
from qformats.formats.gptq.codec import _decode


def _layer(qweight, qzeros, scales, g_idx):
    return {"qweight": qweight, "qzeros": qzeros, "scales": scales, "g_idx": g_idx}


def _as_reader(reader: str, version: str = "v1"):
    def dequantize(*, qweight, qzeros, scales, g_idx, bits, group_size):
        return gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version=version, reader=reader,
                               group_size=group_size)
    return dequantize


def v1_without_plus_one(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """Reads v1 zero fields as the zero point itself (the pre-#325 AutoGPTQ / v2 reader on a v1 file)."""
    return gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v2", group_size=group_size)


def v2_read_as_v1(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """vLLM gptq_gemm told "gptq" for gptq_v2 zeros: adds the v1 offset again (vLLM #26343, "!!!!" output)."""
    return gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v1",
                           reader="vllm_gptq_gemm", group_size=group_size)


plus_one_without_wrap = _as_reader("autogptq_cuda")       # (f & maxq) + 1: all-ones v1 field read as 2^b
autogptq_cuda_kernel_0x0f = _as_reader("autogptq_cuda_kernel")   # ((f & mask) + 1) & 0x0F, wrong at 8 bits
gptqmodel_legacy_int3 = _as_reader("gptqmodel_legacy_int3")  # GPTQModel v0.9-v6 3-bit word constants
exllama_wrap = _as_reader("exllama")                       # (f + 1) & 0x0F: 4-bit only, decodes zero-0 silently
marlin_fixed_zero = _as_reader("marlin")                   # qzeros ignored, zero 2^(b-1): wrong for asym
autogptq_cuda_old_ignores_g_idx = _as_reader("autogptq_cuda_old")   # g = k // group_size under act-order


def g_idx_ignored(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """Decodes with g = k // group_size whatever g_idx says (act-order layers decode with wrong groups)."""
    k = np.asarray(g_idx).shape[0]
    rows = k if group_size == -1 else group_size
    trivial = (np.arange(k) // rows).astype(np.int32)
    return gptq.dequantize(_layer(qweight, qzeros, scales, trivial), bits=bits, version="v1",
                           group_size=group_size)


def _unpack_within_word(words: np.ndarray, bits: int, count: int, axis: int) -> np.ndarray:
    """Field i read from word (i*b)//32 alone: the bits a 3-bit field spills into the next word are lost."""
    w = np.moveaxis(np.asarray(words).view(np.uint32), axis, 0).astype(np.uint64)
    i = np.arange(count)
    fields = (w[(i * bits) // 32] >> ((i * bits) % 32)[:, None].astype(np.uint64)) & ((1 << bits) - 1)
    return np.moveaxis(fields.astype(np.int64), 0, axis)


def straddle_fields_lost(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """A 3-bit unpacker that reads each field inside one word: fields 10 and 21 of every 32 lose their top bits."""
    scales = np.asarray(scales)
    k, n = np.asarray(g_idx).shape[0], scales.shape[1]
    codes = _unpack_within_word(qweight, bits, k, axis=0)
    zeros = _unpack_within_word(qzeros, bits, n, axis=1) + 1
    return _decode(codes, zeros, scales, np.asarray(g_idx, np.intp))



def _unpack_msb_first(words: np.ndarray, bits: int, axis: int) -> np.ndarray:
    """Field i of each word read at shift 32 - b(i + 1), the top field first (a packing read big-end first)."""
    w = np.moveaxis(np.asarray(words).view(np.uint32), axis, 0)
    per = 32 // bits
    shifts = (32 - bits * (np.arange(per) + 1)).astype(np.uint32)
    fields = (w[:, None] >> shifts[None, :, None]) & np.uint32((1 << bits) - 1)
    return np.moveaxis(fields.reshape(-1, w.shape[1]).astype(np.int64), 0, axis)


def fields_msb_first(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """2/4/8-bit qweight and qzeros fields unpacked top field first (shift 28 - 4i at 4 bits), where GPTQ
    puts field i at bits bi .. bi + b - 1 (GPTQ-2.3); 3-bit layers decode right."""
    if 32 % bits:
        return gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v1", group_size=group_size)
    scales = np.asarray(scales)
    codes = _unpack_msb_first(qweight, bits, axis=0)
    zeros = _unpack_msb_first(qzeros, bits, axis=1)[:, :scales.shape[1]] + 1
    k = codes.shape[0]
    groups = np.arange(k) // (k if group_size == -1 else group_size) if g_idx is None else np.asarray(g_idx, np.intp)
    return _decode(codes, zeros, scales, groups)


def transposed_output(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """The weight returned as unpacked, (in, out), without the final transpose to torch.nn.Linear's (out, in)."""
    w = gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v1", group_size=group_size)
    return np.ascontiguousarray(np.asarray(w).T)

def matmul_fp16_accumulation(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    """y accumulated in float16, one term at a time (a GEMV loop with a half-precision accumulator)."""
    w = np.ascontiguousarray(gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v1",
                                             group_size=group_size)).astype(np.float16)
    x = np.asarray(x, np.float16)
    acc = np.zeros((x.shape[0], w.shape[0]), np.float16)
    for k in range(w.shape[1]):
        acc = (acc + x[:, k:k + 1] * w[:, k]).astype(np.float16)
    return acc


def _writer(name: str):
    def pack(*, codes, zeros, scales, g_idx, bits, group_size):
        layer = gptq.pack(codes, zeros, scales, bits=bits, g_idx=g_idx, version="v1", writer=name,
                          group_size=group_size)
        return {t: layer.tensors[t] for t in ("qweight", "qzeros", "scales", "g_idx")}
    return pack


autogptq_writer_or_bleed = _writer("autogptq")       # zero 0 written, -1 bleeding into the next fields
gptqmodel_writer_wraps = _writer("gptqmodel")         # zero 0 written as an all-ones field


def v2_zeros_labelled_v1(*, codes, zeros, scales, g_idx, bits, group_size):
    """Writes v2 zero fields into a v1 (checkpoint_format "gptq") layer: the mislabelled-checkpoint bug."""
    layer = gptq.pack(codes, zeros, scales, bits=bits, g_idx=g_idx, version="v2", group_size=group_size)
    return {t: layer.tensors[t] for t in ("qweight", "qzeros", "scales", "g_idx")}


def matmul_w_float16(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    """W rounded to float16 with no check that it fits: |s (q - z)| past 65504 becomes inf, then inf - inf."""
    w = np.ascontiguousarray(gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v1",
                                             group_size=group_size))
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float16).astype(np.float32) @ w.astype(np.float16).astype(np.float32).T


def _positive_zeros(version: str):
    def dequantize(*, qweight, qzeros, scales, g_idx, bits, group_size):
        """The spec decode, then ``+ 0.0``: every -0.0 (a negative scale times q - z = 0) becomes +0.0."""
        w = gptq.dequantize(_layer(qweight, qzeros, scales, g_idx), bits=bits, version=version, group_size=group_size)
        return np.ascontiguousarray(w) + np.float32(0)
    return dequantize


v1_positive_zeros = _positive_zeros("v1")
v2_positive_zeros = _positive_zeros("v2")


def v2_scale_times_q_minus_scale_times_z(*, qweight, qzeros, scales, g_idx, bits, group_size):
    """``s*q - s*z`` (a precomputed ``s*z`` offset, as fused kernels do): the same values, but +0.0 where
    ``s * (q - z)`` is -0.0 (KC-2.4)."""
    codes, zeros = gptq.unpack(_layer(qweight, qzeros, scales, g_idx), bits=bits, version="v2", group_size=group_size)
    k = codes.shape[0]
    gi = np.arange(k) // (k if group_size == -1 else group_size) if g_idx is None else np.asarray(g_idx, np.intp)
    s = np.asarray(scales, np.float32)[gi]
    return np.ascontiguousarray((s * codes.astype(np.float32) - s * zeros.astype(np.float32)[gi]).T)
