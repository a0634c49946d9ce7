"""AutoAWQ 0.2.9's GEMM layer as an awq_gemm subject (CPU path, no kernels).

``make real-subjects`` downloads the AutoAWQ sdist (pinned by sha256) into ``.venv/real/src``; its
package ``__init__`` imports the whole quantization pipeline (``datasets`` ...), so only the modules
used are imported from the unpacked sdist: ``awq.modules.linear.gemm`` and ``awq.utils.packing_utils``.
Without the CUDA extension or Triton, ``WQLinear_GEMM.forward`` runs ``packing_utils.dequantize_gemm``
(float16 ``(q - z) * s``) and multiplies by it; ``dequantize`` calls that function itself. ``pack`` is
``WQLinear_GEMM.from_linear`` given a Linear whose weight is exactly ``s * (q - z)`` (float32), with
``scales``/``zeros`` (G, out) as AutoAWQ's quantizer hands them over.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np

SDIST = Path(os.environ.get("QFORMATS_AUTOAWQ_SRC", Path(__file__).resolve().parents[2] / ".venv/real/src/autoawq-0.2.9"))


def _awq():
    root = SDIST / "awq"
    if not root.is_dir():
        raise ImportError(f"AutoAWQ sdist not found at {SDIST} (make real-subjects, or set QFORMATS_AUTOAWQ_SRC)")
    for name, path in (("awq", root), ("awq.modules", root / "modules"), ("awq.modules.linear", root / "modules/linear")):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(path)]
            sys.modules[name] = module
    return importlib.import_module("awq.modules.linear.gemm")


GEMM = _awq()


def _module(qweight, qzeros, scales, group_size):
    import torch

    qweight = torch.as_tensor(np.asarray(qweight))
    k, n = qweight.shape[0], qweight.shape[1] * 8
    module = GEMM.WQLinear_GEMM(4, group_size, k, n, False, "cpu")
    module.qweight = qweight.clone()
    module.qzeros = torch.as_tensor(np.asarray(qzeros)).clone()
    module.scales = torch.as_tensor(np.asarray(scales)).clone()
    return module, k, n


def dequantize(*, qweight, qzeros, scales, group_size):
    """``packing_utils.dequantize_gemm`` on the module's tensors: the decode its CPU forward multiplies by.
    Not the forward of an identity: that sum turns every -0.0 of the decode into +0.0 (KC-2.4)."""
    import torch

    module, _, _ = _module(qweight, qzeros, scales, group_size)    # its constructor's checks (gemm.py:132)
    with torch.no_grad():
        w = GEMM.dequantize_gemm(module.qweight, module.qzeros, module.scales, module.w_bit, module.group_size)
    return w.t().contiguous()


def matmul(*, qweight, qzeros, scales, group_size, x):
    import torch

    module, k, n = _module(qweight, qzeros, scales, group_size)
    with torch.no_grad():
        return module(torch.as_tensor(np.asarray(x))).reshape(-1, n)


def pack(*, codes, zeros, scales, group_size):
    import torch

    codes, zeros = np.asarray(codes, np.float32), np.asarray(zeros, np.float32)
    s = np.asarray(scales).astype(np.float32)
    k, n = codes.shape
    rows = np.arange(k) // (k if group_size == -1 else group_size)
    linear = torch.nn.Linear(k, n, bias=False)
    linear.weight.data = torch.from_numpy(np.ascontiguousarray((s[rows] * (codes - zeros[rows])).T))
    module = GEMM.WQLinear_GEMM.from_linear(linear, 4, group_size, scales=torch.from_numpy(s),
                                            zeros=torch.from_numpy(zeros))
    return {"qweight": module.qweight, "qzeros": module.qzeros, "scales": module.scales}
