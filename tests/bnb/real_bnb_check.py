"""Run under .venv/real (bitsandbytes 0.50.2): bitsandbytes' quantize_4bit / dequantize_4bit / int8 dequantize
against qformats' reference codecs on fresh seeded inputs; prints a JSON object of mismatch counts per case."""

from __future__ import annotations

import json
import sys

import bitsandbytes.functional as F
import numpy as np
import torch

from qformats.formats import bnb

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def _np(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return (t.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return t.numpy()


def _zero_sign_only(ours: np.ndarray, theirs: np.ndarray) -> int:
    """Mismatching bits that are not the FP4 code-8 zero sign (BNB-2.3)."""
    a, b = ours.astype(np.float32), theirs.astype(np.float32)
    diff = a.view(np.uint32) != b.view(np.uint32)
    return int(np.count_nonzero(diff & ~((a == 0) & (b == 0))))


def four_bit(seed: int, blocksize: int, quant_type: str, nested: bool, shape: tuple[int, ...], dtype: str) -> dict:
    torch.manual_seed(seed)
    x = (torch.randn(shape) * torch.rand(shape) * 3).to(DTYPES[dtype])
    q, state = F.quantize_4bit(x, blocksize=blocksize, quant_type=quant_type, compress_statistics=nested)
    packed, absmax = bnb.quantize_4bit(_np(x), quant_type=quant_type, blocksize=blocksize)
    out = {"bytes": int(np.count_nonzero(packed != q.numpy()))}
    if nested:
        codes, nested_absmax, offset = bnb.quantize_absmax(absmax)
        out["absmax_codes"] = int(np.count_nonzero(codes != state.absmax.numpy()))
        out["nested_absmax"] = int(np.count_nonzero(nested_absmax != state.state2.absmax.numpy()))
        out["offset"] = int(np.float32(offset) != state.offset.item())
        scales = bnb.scales(state.absmax.numpy(), state.state2.absmax.numpy(), state.state2.code.numpy(),
                            state.offset.item())
    else:
        out["absmax"] = int(np.count_nonzero(absmax != state.absmax.numpy()))
        scales = state.absmax.numpy()
    ours = bnb.dequantize_4bit(q.numpy(), scales, quant_type=quant_type, blocksize=blocksize, shape=shape,
                               dtype=dtype)
    out["decode"] = _zero_sign_only(np.asarray(ours, np.float32), _np(F.dequantize_4bit(q, state)))
    return out


def int8(seed: int, shape: tuple[int, int], dtype: str) -> dict:
    torch.manual_seed(seed)
    w = torch.randint(-127, 128, shape, dtype=torch.int8)
    scb = (torch.rand(shape[0]) * 3).to(torch.float16).float()
    theirs = _np(F.int8_vectorwise_dequant(w, scb).to(DTYPES[dtype]))
    ours = bnb.dequantize_int8(w.numpy(), scb.numpy(), dtype=dtype)
    mismatch = np.asarray(ours, np.float32).view(np.uint32) != np.asarray(theirs, np.float32).view(np.uint32)
    return {"decode": int(np.count_nonzero(mismatch))}


def main() -> None:
    results = {}
    for i, blocksize in enumerate(bnb.codec.BLOCKSIZES):
        for quant_type in ("nf4", "fp4"):
            for nested in (False, True):
                for dtype, shape in (("bfloat16", (9, 2 * blocksize // 3 + 2)), ("float16", (3 * blocksize // 2 + 1,)),
                                     ("float32", (5, blocksize // 4 + 3))):
                    key = f"bs{blocksize}_{quant_type}{'_dq' if nested else ''}_{dtype}_{'x'.join(map(str, shape))}"
                    results[key] = four_bit(i, blocksize, quant_type, nested, shape, dtype)
    for dtype in DTYPES:
        results[f"int8_{dtype}"] = int8(7, (13, 29), dtype)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
