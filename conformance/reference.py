"""The NumPy reference as conformance subjects, one function per format and op, called exactly as the
contract calls any kernel (DESIGN.md §6, spec/kernels.md KC-1). The suite must pass them 100 %: they
are the ground truth run through the same door as everyone else, and they are validating decoders
(KC-4.2): they reject every non-conforming input.

    qformats conformance kernel conformance.reference:gptq_dequantize_v1 --format gptq_v1 --op dequantize

Every format's subjects: GPTQ v1/v2, q4_K, SpQR, AWQ GEMM (``awq_gemm_<op>``), compressed-tensors
(``ctensors_pack_<op>``), bitsandbytes 4-bit (``bnb_4bit_dequantize``), FP8 (``fp8_<strategy>_<op>``), NVFP4 / MXFP4
(``nvfp4_packed_<op>``, ``mxfp4_packed_<op>``) and each other GGUF block type (``<type>_dequantize``, ``_matmul``, ``_quantize``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qformats.errors import fail
from qformats.formats import awq, ctensors, ggml, gptq, q4_k, spqr
from qformats.formats.bnb.cases import dequantize_checked as _bnb_checked
from qformats.formats.fp8.cases import FORMATS as _FP8_FORMATS
from qformats.formats.fp8.cases import dequantize_checked as _fp8_checked
from qformats.formats.fp4 import cases as _fp4
from qformats.formats.ggml.cases import subject_types
from qformats.formats.ggml.codec import check_blocks as check_type_blocks
from qformats.formats.q4_k.checks import check_blocks

__all__ = ["gptq_dequantize_v1", "gptq_dequantize_v2", "gptq_matmul_v1", "gptq_matmul_v2", "gptq_pack_v1",
           "gptq_pack_v2", "q4_k_dequantize", "q4_k_matmul", "q4_k_quantize", "spqr_dequantize", "spqr_matmul",
           "awq_gemm_dequantize", "awq_gemm_matmul", "awq_gemm_pack", "ctensors_pack_dequantize",
           "ctensors_pack_matmul", "ctensors_pack_pack", "bnb_4bit_dequantize"]


def _matmul(x: Any, w: np.ndarray) -> np.ndarray:
    """float32 products and sums (QF-4.6) of float16 x and the reference W. Past float32's reach (mxfp4's
    E8M0 scales) they may overflow, as QF-4.6 allows: the judge does not judge those outputs."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, np.float16).astype(np.float32) @ np.asarray(w, np.float32).T


def _gptq_w(version: str, qweight: Any, qzeros: Any, scales: Any, g_idx: Any, bits: int, group_size: int) -> np.ndarray:
    layer = {"qweight": qweight, "qzeros": qzeros, "scales": scales, "g_idx": g_idx}
    return gptq.dequantize(layer, bits=bits, version=version, group_size=group_size)


def gptq_dequantize_v1(*, qweight, qzeros, scales, g_idx, bits, group_size):
    return _gptq_w("v1", qweight, qzeros, scales, g_idx, bits, group_size)


def gptq_dequantize_v2(*, qweight, qzeros, scales, g_idx, bits, group_size):
    return _gptq_w("v2", qweight, qzeros, scales, g_idx, bits, group_size)


def gptq_matmul_v1(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    return _matmul(x, _gptq_w("v1", qweight, qzeros, scales, g_idx, bits, group_size))


def gptq_matmul_v2(*, qweight, qzeros, scales, g_idx, bits, group_size, x):
    return _matmul(x, _gptq_w("v2", qweight, qzeros, scales, g_idx, bits, group_size))


def _pack(version: str, codes, zeros, scales, g_idx, bits, group_size) -> dict[str, np.ndarray]:
    layer = gptq.pack(codes, zeros, scales, bits=bits, g_idx=g_idx, version=version, group_size=group_size)
    return {name: layer.tensors[name] for name in ("qweight", "qzeros", "scales", "g_idx")}


def gptq_pack_v1(*, codes, zeros, scales, g_idx, bits, group_size):
    return _pack("v1", codes, zeros, scales, g_idx, bits, group_size)


def gptq_pack_v2(*, codes, zeros, scales, g_idx, bits, group_size):
    return _pack("v2", codes, zeros, scales, g_idx, bits, group_size)


def _q4_k_checked(blocks, rows, n) -> np.ndarray:
    """The validating reference decoder (spec/kernels.md KC-4.2): dtype, shape against ``rows`` and ``n``,
    finite scales (Q4K-5.1 to 5.4), then the decode."""
    check_blocks(blocks, tensor="blocks", n=n, finite=True)
    if np.asarray(blocks).shape[0] != rows:
        raise fail("q4k.blocks.shape", "blocks", f"{rows} rows", np.asarray(blocks).shape[0])
    return q4_k.dequantize(blocks, strict=True)


def q4_k_dequantize(*, blocks, rows, n):
    return _q4_k_checked(blocks, rows, n)


def q4_k_matmul(*, blocks, rows, n, x):
    return _matmul(x, _q4_k_checked(blocks, rows, n))


def q4_k_quantize(*, x):
    return q4_k.quantize(x)


def spqr_dequantize(*, dense_weights, row_offsets, col_vals, in_perm, m, n):
    layer = {"dense_weights": dense_weights, "row_offsets": row_offsets, "col_vals": col_vals, "in_perm": in_perm}
    return spqr.dequantize(layer, m=m, n=n)


def spqr_matmul(*, dense_weights, row_offsets, col_vals, in_perm, m, n, x):
    return _matmul(x, spqr_dequantize(dense_weights=dense_weights, row_offsets=row_offsets, col_vals=col_vals,
                                      in_perm=in_perm, m=m, n=n))


def awq_gemm_dequantize(*, qweight, qzeros, scales, group_size):
    return awq.dequantize({"qweight": qweight, "qzeros": qzeros, "scales": scales}, group_size=group_size)


def awq_gemm_matmul(*, qweight, qzeros, scales, group_size, x):
    return _matmul(x, awq_gemm_dequantize(qweight=qweight, qzeros=qzeros, scales=scales, group_size=group_size))


def awq_gemm_pack(*, codes, zeros, scales, group_size):
    return dict(awq.pack(codes, zeros, scales, group_size=group_size).tensors)


def ctensors_pack_dequantize(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, weight_zero_point=None):
    layer = {"weight_packed": weight_packed, "weight_scale": weight_scale, "weight_shape": weight_shape}
    if weight_zero_point is not None:
        layer["weight_zero_point"] = weight_zero_point
    return ctensors.dequantize(layer, num_bits=num_bits, group_size=group_size)


def ctensors_pack_matmul(*, weight_packed, weight_scale, weight_shape, num_bits, group_size, x, weight_zero_point=None):
    return _matmul(x, ctensors_pack_dequantize(weight_packed=weight_packed, weight_scale=weight_scale,
                                               weight_shape=weight_shape, num_bits=num_bits, group_size=group_size,
                                               weight_zero_point=weight_zero_point))


def ctensors_pack_pack(*, codes, scales, num_bits, group_size, zero_points=None):
    layer = ctensors.pack(codes, scales, num_bits=num_bits, group_size=None if group_size == -1 else group_size,
                          zero_points=zero_points)
    return dict(layer.tensors)


def bnb_4bit_dequantize(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
                        nested_quant_map=None, nested_offset=None):
    """spec/kernels.md KC-1.10: the validating decode of BNB-3.2 / BNB-4.3 in the quant_state's dtype."""
    return _bnb_checked(packed=packed, absmax=absmax, quant_map=quant_map, quant_type=quant_type, blocksize=blocksize,
                        shape=shape, dtype=dtype, nested_absmax=nested_absmax, nested_quant_map=nested_quant_map,
                        nested_offset=nested_offset)


def _fp8_subjects(namespace: dict) -> list[str]:
    """``fp8_tensor_dequantize`` .. ``fp8_block_matmul`` (KC-1.11): the validating decode of FP8-8.1."""
    names = []
    for fmt in _FP8_FORMATS:
        def deq(*, weight, weight_scale, block_size, dtype, _fmt=fmt):
            return _fp8_checked(_fmt, weight=weight, weight_scale=weight_scale, block_size=block_size, dtype=dtype)

        def mm(*, weight, weight_scale, block_size, dtype, x, _fmt=fmt):
            return _matmul(x, _fp8_checked(_fmt, weight=weight, weight_scale=weight_scale, block_size=block_size,
                                           dtype=dtype))

        for fn, op in ((deq, "dequantize"), (mm, "matmul")):
            fn.__name__ = fn.__qualname__ = f"{fmt}_{op}"
            namespace[fn.__name__] = fn
            names.append(fn.__name__)
    return names


__all__ += _fp8_subjects(globals())


# -- NVFP4 / MXFP4 (KC-1.12): the validating decode of FP4-7.1 ----------------------------------------------

def nvfp4_packed_dequantize(*, weight_packed, weight_scale, weight_global_scale):
    return _fp4.nvfp4_dequantize_checked(weight_packed=weight_packed, weight_scale=weight_scale,
                                         weight_global_scale=weight_global_scale)


def nvfp4_packed_matmul(*, weight_packed, weight_scale, weight_global_scale, x):
    return _matmul(x, nvfp4_packed_dequantize(weight_packed=weight_packed, weight_scale=weight_scale,
                                              weight_global_scale=weight_global_scale))


def mxfp4_packed_dequantize(*, weight_packed, weight_scale):
    return _fp4.mxfp4_dequantize_checked(weight_packed=weight_packed, weight_scale=weight_scale)


def mxfp4_packed_matmul(*, weight_packed, weight_scale, x):
    return _matmul(x, mxfp4_packed_dequantize(weight_packed=weight_packed, weight_scale=weight_scale))


__all__ += ["nvfp4_packed_dequantize", "nvfp4_packed_matmul", "mxfp4_packed_dequantize", "mxfp4_packed_matmul"]


# -- every other GGUF block type: <type>_dequantize, <type>_matmul, <type>_quantize (KC-1.5) ------------------

def _type_checked(name: str, blocks, rows, n) -> np.ndarray:
    """The validating reference decoder of one block type: dtype, shape against ``rows`` and ``n``, finite
    super-scales (GGML-1.1, GGML-1.2, GGML-3.1), then the decode."""
    arr = check_type_blocks(name, blocks, n=n, finite=True)
    if arr.shape[0] != rows:
        raise fail("ggml.blocks.shape", "blocks", f"{rows} rows", arr.shape[0])
    return ggml.dequantize(name, arr)


def _type_subjects(namespace: dict) -> list[str]:
    names = []
    for bt in subject_types():
        def deq(*, blocks, rows, n, _name=bt.name):
            return _type_checked(_name, blocks, rows, n)

        def mm(*, blocks, rows, n, x, _name=bt.name):
            return _matmul(x, _type_checked(_name, blocks, rows, n))

        def quant(*, x, _name=bt.name):
            return ggml.quantize(_name, x)

        fns = [(deq, "dequantize"), (mm, "matmul")]
        if bt.quantize is not None and not bt.requires_importance:
            fns.append((quant, "quantize"))
        for fn, op in fns:
            fn.__name__ = fn.__qualname__ = f"{bt.name}_{op}"
            namespace[fn.__name__] = fn
            names.append(fn.__name__)
    return names


__all__ += _type_subjects(globals())
