"""bitsandbytes NF4 / FP4 in Triton: dequantize and fused dequantize-and-multiply (spec/bnb.md), with and
without double quantization.

Reads top to bottom: the contract's entry points (KC-1.10), the load-time checks, the launchers, the
kernels.

Layout (BNB-1.2, BNB-3.2): the codes run over the *flattened* row-major weight, element ``i`` of ``W (N, K)``
at ``i = n K + k``. Byte ``i // 2`` of ``packed`` holds it, in the high nibble for even ``i``::

    byte j   [ c[2j] : bits 7..4 | c[2j+1] : bits 3..0 ]

Its block is ``i // B`` over the whole tensor, not per row (the last block may be partial and a block may
span rows). The value is ``table[c] * absmax_f32[i // B]`` in float32, rounded once to the quant_state's
``dtype``; the table is the one of ``quant_type`` (BNB-2.4: the stored ``quant_map`` only has to agree,
which prepare checks), FP4 code 8 being ``-0.0`` (BNB-2.3).

Double quantization (BNB-4.3): ``absmax_f32[j] = f32(f32(map[absmax_u8[j]] * nested_absmax[j // 256]) +
nested_offset)``: the product rounded to float32, then the offset added and rounded again. A GPU compiler
would contract that multiply-add into one fused operation (one rounding, not two), so every launch passes
``enable_fp_fusion=False``.

Numerics: ``dequantize`` returns W in the quant_state's dtype (float16, bfloat16, float32), the reference
values bit for bit; NumPy callers get bfloat16 as float32 holding its values (NumPy has none). ``matmul``
(``x @ W.T``, float16 ``x``, float16 out) multiplies those same W values: float16 W on tensor cores,
bfloat16 and float32 W as float32 operands (IEEE, no TF32; bfloat16 times float16 is exact in float32),
float32 accumulation (QF-4.6).

Validation (KC-4.2, KC-7.1): before any launch ``prepare`` runs the reference's own checks
(``qformats.formats.bnb.cases.checked``: quant_type, blocksize, dtype, shape, the packed byte count, the
quant_map against quant_type, absmax length, dtype and finiteness, the nested state complete, of its
shapes and finite) on host copies, so a kernel never reads past a tensor and never decodes a layer the
spec says a reader MUST reject.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from qformats.formats.bnb import codec
from qformats.formats.bnb.cases import checked

from ._arrays import Inputs, host_copy
from ._prepared import Prepared as _Base
from ._prepared import matmul_output
from ._tiles import dot_w

__all__ = ["dequantize", "matmul", "prepare", "Prepared", "dequantize_prepared", "matmul_prepared"]

# the quant_state's dtype names (BNB-5.2): the torch dtype of the result and the kernels' rounding code
DTYPES = {"float32": (torch.float32, 0), "float16": (torch.float16, 1), "bfloat16": (torch.bfloat16, 2)}
NESTED = ("nested_absmax", "nested_quant_map", "nested_offset")


# -- entry points (DESIGN.md §6, KC-1.10) ---------------------------------------------------------------

def dequantize(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
               nested_quant_map=None, nested_offset=None):
    layer, inputs = _prepare(locals())
    return _out(inputs, dequantize_prepared(layer))


def matmul(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, x, nested_absmax=None,
           nested_quant_map=None, nested_offset=None):
    call = dict(locals())
    x = call.pop("x")
    layer, inputs = _prepare(call, x=x)
    return _out(inputs, matmul_prepared(layer, inputs.t["x"].to(torch.float16)))


def _out(inputs: Inputs, result: torch.Tensor) -> Any:
    """The caller's kind: NumPy has no bfloat16, so a NumPy caller gets its values in float32 (exact)."""
    if inputs.numpy and result.dtype == torch.bfloat16:
        result = result.float()
    return inputs.out(result)


# -- load-time preparation (KC-7) ----------------------------------------------------------------------

def prepare(*, packed, absmax, quant_map, quant_type, blocksize, shape, dtype, nested_absmax=None,
            nested_quant_map=None, nested_offset=None) -> Prepared:
    """Check the layer once (the validating checks of KC-4.2, on host copies) and keep it on its device."""
    return _prepare(locals())[0]


class Prepared(_Base):
    """A checked layer on its device: the tensors the kernels read, its dimensions and dtype; frozen."""

    def __init__(self, t: dict[str, torch.Tensor], n_out: int, k: int, quant_type: str, blocksize: int,
                 dtype: str) -> None:
        self.packed, self.absmax = t["packed"], t["absmax"]
        self.device = self.packed.device
        self.nested = "nested_absmax" in t
        # never read without NESTED: any tensor stands in for the pointers
        self.nested_absmax, self.nested_map, self.offset = (t[name] for name in NESTED) if self.nested else \
            (self.absmax,) * 3
        # the table of quant_type (BNB-2.4), the spec's values; FP4 code 8 is -0.0 (BNB-2.3)
        self.table = torch.from_numpy(codec.TABLES[quant_type].copy()).to(self.device)
        self.n, self.k, self.blocksize = n_out, k, blocksize
        self.out_dtype, self.rounding = DTYPES[dtype]
        self._freeze("packed", "absmax", *(("nested_absmax", "nested_map", "offset") if self.nested else ()))


def _prepare(call: dict[str, Any], **extra: Any) -> tuple[Prepared, Inputs]:
    given = {name: value for name, value in call.items() if not (name in NESTED and value is None)}
    host = {name: host_copy(value) for name, value in given.items()}
    n_out, k, _ = checked(**host)
    arrays = {name: given[name] for name in ("packed", "absmax", *NESTED) if name in given}
    inputs = Inputs(**arrays, **extra)
    return Prepared(inputs.t, n_out, k, call["quant_type"], call["blocksize"], call["dtype"]), inputs


# -- launchers ---------------------------------------------------------------------------------------

def _pointers(p: Prepared) -> tuple:
    return p.packed, p.table, p.absmax, p.nested_absmax, p.nested_map, p.offset


def dequantize_prepared(p: Prepared) -> torch.Tensor:
    """W (N, K) in the quant_state's dtype, exactly the reference values; no host work (KC-7.2)."""
    p.check_unchanged()
    out = torch.empty((p.n, p.k), dtype=p.out_dtype, device=p.device)
    n = p.n * p.k
    _dequantize_kernel[(triton.cdiv(n, BLOCK),)](*_pointers(p), out, n, p.blocksize, NESTED=p.nested,
                                                 ROUNDING=p.rounding, BLOCK=BLOCK, enable_fp_fusion=False)
    return out


def matmul_prepared(p: Prepared, xt: torch.Tensor) -> torch.Tensor:
    """y = x @ W.T, float16 (batch, N), for contiguous float16 ``xt`` (batch, K); no host work (KC-7.2)."""
    m, y = matmul_output(p, xt)
    if not m:
        return y
    bm = 16 if m <= 16 else 64
    _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(p.n, BLOCK_N))](
        xt, *_pointers(p), y, m, p.n, p.k, p.blocksize, NESTED=p.nested, ROUNDING=p.rounding, BM=bm, BN=BLOCK_N,
        BK=BLOCK_K, enable_fp_fusion=False)
    return y


# -- kernels -----------------------------------------------------------------------------------------

@triton.jit
def _weights(i, mask, packed_ptr, table_ptr, absmax_ptr, nabs_ptr, nmap_ptr, off_ptr, blocksize,
             NESTED: tl.constexpr, ROUNDING: tl.constexpr):
    """W at flattened indices ``i`` (BNB-3.2), rounded to the quant_state's dtype and held in float32."""
    byte = tl.load(packed_ptr + i // 2, mask=mask, other=0).to(tl.int32)
    code = tl.where(i % 2 == 0, byte >> 4, byte & 0xF)              # element 2j in the high nibble (BNB-1.2)
    value = tl.load(table_ptr + code, mask=mask, other=0.0)
    j = i // blocksize                                              # blocks over the flattened tensor
    if NESTED:                                                      # BNB-4.3: product, then offset, each rounded
        q = tl.load(absmax_ptr + j, mask=mask, other=0).to(tl.int32)
        scale = tl.load(nmap_ptr + q, mask=mask, other=0.0) * tl.load(nabs_ptr + j // 256, mask=mask, other=0.0)
        scale = scale + tl.load(off_ptr)
    else:
        scale = tl.load(absmax_ptr + j, mask=mask, other=0.0)
    w = value * scale
    if ROUNDING == 1:
        w = w.to(tl.float16).to(tl.float32)
    elif ROUNDING == 2:
        w = _round_bfloat16(w)
    return w


@triton.jit
def _round_bfloat16(w):
    """float32 to the nearest bfloat16 (ties to even), as float32; NaN stays NaN. In integer arithmetic, not
    ``.to(tl.bfloat16)``: Triton's interpreter truncates that conversion (and its "rtne" rounds ties up)."""
    bits = w.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return tl.where(w != w, w, rounded.to(tl.float32, bitcast=True))


@triton.jit
def _dequantize_kernel(packed_ptr, table_ptr, absmax_ptr, nabs_ptr, nmap_ptr, off_ptr, out_ptr, n, blocksize,
                       NESTED: tl.constexpr, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    w = _weights(i, mask, packed_ptr, table_ptr, absmax_ptr, nabs_ptr, nmap_ptr, off_ptr, blocksize, NESTED, ROUNDING)
    tl.store(out_ptr + i, w.to(out_ptr.dtype.element_ty), mask=mask)          # exact: w holds a dtype value


@triton.jit
def _matmul_kernel(x_ptr, packed_ptr, table_ptr, absmax_ptr, nabs_ptr, nmap_ptr, off_ptr, y_ptr, M, N, K, blocksize,
                   NESTED: tl.constexpr, ROUNDING: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr):
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k = k0 + tl.arange(0, BK)
        mask = (k < K)[:, None] & (n < N)[None, :]
        i = n.to(tl.int64)[None, :] * K + k[:, None]                # the (BK, BN) tile of W^T
        w = _weights(i, mask, packed_ptr, table_ptr, absmax_ptr, nabs_ptr, nmap_ptr, off_ptr, blocksize, NESTED,
                     ROUNDING)
        xt = tl.load(x_ptr + m[:, None] * K + k[None, :], mask=(m < M)[:, None] & (k < K)[None, :], other=0.0)
        acc = dot_w(acc, xt, w, ROUNDING == 1)                      # float16 W: exact in float16
    tl.store(y_ptr + m[:, None] * N + n[None, :], acc.to(tl.float16), mask=(m < M)[:, None] & (n < N)[None, :])


# -- tile configurations ------------------------------------------------------------------------------
# dequantize: BLOCK consecutive elements of the flattened W per program (BLOCK / 2 bytes of packed, the
# absmax of at most BLOCK / 32 + 1 blocks). matmul: BN outputs by BK inputs of W^T per step; a row of W
# crosses block boundaries anywhere (blocks run over the flattened tensor), so the scale is gathered per
# element rather than once per tile.

BLOCK = 1024
BLOCK_N = 64
BLOCK_K = 64
