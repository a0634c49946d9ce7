"""Triton reference kernels: the second, independent implementation of every format (DESIGN.md §1).

    from reference_kernels import awq, bnb, ctensors, fp4, fp8, gptq, q4_k, q5_k, q6_k, q8_0, spqr
    w = gptq.dequantize_v1(qweight=..., qzeros=..., scales=..., g_idx=..., bits=4, group_size=128)   # (out, in) float16
    y = gptq.matmul_v2(..., x=x)                                                                     # x @ W.T
    w = awq.dequantize(qweight=..., qzeros=..., scales=..., group_size=128)     # AWQ GEMM, (out, in) float32
    w = ctensors.dequantize(weight_packed=..., weight_scale=..., weight_shape=..., num_bits=3, group_size=-1)
                                                # compressed-tensors pack-quantized, widths 1..8, (out, in) float32
    w = bnb.dequantize(packed=..., absmax=..., quant_map=..., quant_type="nf4", blocksize=64, shape=[n, k],
                       dtype="bfloat16")        # bitsandbytes NF4 / FP4 (double quant: nested_*=), in the state's dtype
    w = fp4.nvfp4_dequantize(weight_packed=..., weight_scale=..., weight_global_scale=...)   # NVFP4, bf16 values
    y = fp4.mxfp4_matmul(weight_packed=..., weight_scale=..., x=x)                       # MXFP4, x @ W.T
    w = fp8.dequantize_block(weight=..., weight_scale=..., block_size=[128, 128], dtype="bfloat16")
                                                # FP8 E4M3FN, also _tensor and _channel; matmul_<strategy>(..., x=x)

Each module also checks once and runs many times (KC-7): ``p = gptq.prepare(qweight=..., ..., version="v2")``
runs every check of the entry points once and returns a frozen layer; ``gptq.dequantize_prepared(p)`` and
``gptq.matmul_prepared(p, x)`` then do no host work and refuse a layer written to since. The entry points
are ``prepare`` plus the prepared call; ``reference_kernels.strict`` runs the prepared path as a subject.

Entry points follow the conformance call contract (DESIGN.md §6) and take NumPy arrays or torch
tensors on any device, returning the same kind. Without a CUDA device the kernels run in Triton's
interpreter on the CPU (``TRITON_INTERPRET=1``, set here before Triton is imported when no GPU is
visible), which is how CI tests them. Needs the ``kernels`` extra (torch, triton); ``qformats``
itself never imports this package.
"""

import os
import sys


def _interpret_without_gpu() -> None:
    if "TRITON_INTERPRET" in os.environ:
        return
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:  # torch missing: importing a kernel module will say so
        return
    if has_gpu:
        return
    if "triton" in sys.modules:  # its own jit helpers (tl.sum, tl.zeros) were built for a GPU already
        raise ImportError("reference_kernels: no GPU is visible, so the kernels need Triton's interpreter; "
                          "import reference_kernels before triton, or set TRITON_INTERPRET=1 first")
    os.environ["TRITON_INTERPRET"] = "1"


_interpret_without_gpu()
