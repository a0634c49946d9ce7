"""GPTQ v1/v2 reference codec (spec/gptq.md GPTQ-2, GPTQ-3, GPTQ-7, GPTQ-9).

    decode:  W[n, k] = scales[g_idx[k], n] * (q[k, n] - Z[g_idx[k], n])      (float32, exact)
             Z = f + 1 for v1 (f = stored field), Z = f for v2

The product is exact in float32: an fp16 scale has an 11-bit significand and |q - Z| < 2^9,
so the result needs at most 20 significant bits. A v1 field of all ones would mean zero 0,
which v1 cannot represent (GPTQ-3.4); the strict writer refuses it and the spec reader rejects
it. Real tools' handling of that case lives in :mod:`.quirks` and is selected by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import bits as bitpack
from ...errors import fail
from ...numerics import round_half_even
from ...tensors import Layer, as_array, check_finite, check_tensor
from . import checks
from .layout import Version, check_bits, check_version, group_rows, n_groups
from .quirks import get_reader, get_writer

__all__ = ["GPTQLayer", "pack", "unpack", "dequantize", "quantize", "convert", "stored_fields", "zeros_from_fields"]

SPEC_READER = "spec"


class GPTQLayer(Layer):
    """One packed GPTQ layer: ``qweight``, ``qzeros``, ``scales``, ``g_idx`` and optional ``bias``.

    Parameters ``bits``, ``version`` and ``group_size`` travel with the tensors.
    """

    @classmethod
    def _optional_tensors(cls) -> tuple[str, ...]:
        return ("bias",)


def _maxq(bits: int) -> int:
    return (1 << bits) - 1


def stored_fields(zeros: np.ndarray, bits: int, version: Version) -> np.ndarray:
    """Zero points -> stored fields: ``zero - 1`` for v1 (zero 0 refused, GPTQ-3.4), ``zero`` for v2."""
    if version == "v2":
        return zeros
    at_zero = zeros == 0
    if at_zero.any():
        idx = [int(i) for i in np.argwhere(at_zero)[0]]
        raise fail("gptq.zero.v1_unrepresentable", "zeros",
                   "in [1, 2^b - 1] for a v1 writer: zero 0 has no v1 field",
                   f"0 at {idx} ({int(at_zero.sum())} zero points are 0; use version='v2')")
    return zeros - 1


def zeros_from_fields(fields: np.ndarray, bits: int, version: Version, *, tensor: str = "qzeros") -> np.ndarray:
    """Stored fields -> zero points under the spec reader (GPTQ-3.3, GPTQ-3.4)."""
    z = fields.astype(np.int64)
    if version == "v2":
        return z
    all_ones = fields == _maxq(bits)
    if all_ones.any():
        idx = [int(i) for i in np.argwhere(all_ones)[0]]
        raise fail("gptq.zero.v1_unrepresentable", tensor,
                   f"free of all-ones v1 fields ({_maxq(bits)}): zero 0 is not representable in v1",
                   f"{int(all_ones.sum())} such fields, first at {idx}; choose a real-tool reader to emulate it")
    return z + 1


def pack(codes: Any, zeros: Any, scales: Any, *, bits: int, g_idx: Any = None, version: str = "v1",
         writer: str | None = None, group_size: int | None = None, bias: Any = None) -> GPTQLayer:
    """Pack codes ``(in, out)``, zero points and scales ``(groups, out)`` into a GPTQ layer.

    ``writer`` (v1 only) emulates a real tool's qzeros bit for bit (GPTQ-4.1): "autogptq",
    "gptqmodel", "gptqmodel_legacy_int3", "masked". Without it the strict writer refuses zero 0.
    """
    bits = check_bits(bits)
    version = check_version(version)
    q = checks.check_codes(codes, bits)
    k, n = q.shape
    z = checks.check_zeros(zeros, bits)
    if group_size is None:
        group_size = checks.infer_group_size(g_idx, k, z.shape[0])   # g_idx knows a short last group
    g = n_groups(k, group_size)
    if z.shape != (g, n):
        raise fail("tensor.shape", "zeros", f"of shape {(g, n)} (groups, out_features)", tuple(z.shape))
    s = check_tensor("scales", scales, "float16", (g, n))
    check_finite("scales", s, code="gptq.scales.nonfinite")
    if g_idx is None:
        gi = checks.trivial_g_idx(k, group_size)
    else:
        gi = check_tensor("g_idx", g_idx, ("int32", "int64"), (k,)).astype(np.int32)
        checks.check_g_idx(gi, g, group_size)
    tensors = {
        "qweight": bitpack.pack(q, bits, axis=0),
        "qzeros": _pack_zeros(z, bits, version, writer),
        "scales": s,
        "g_idx": gi,
    }
    if bias is not None:
        tensors["bias"] = check_tensor("bias", bias, "float16", (n,))
    return GPTQLayer(tensors, bits=bits, version=version, group_size=group_size)


def _pack_zeros(z: np.ndarray, bits: int, version: Version, writer: str | None) -> np.ndarray:
    if writer is None or writer == SPEC_READER:
        return bitpack.pack(stored_fields(z, bits, version), bits, axis=1)
    if version != "v1":
        raise fail("argument.invalid", "writer", "None for v2 (the quirk writers emulate v1 qzeros)", writer)
    return get_writer(writer)(z, bits)


def unpack(layer: Any, *, bits: int, version: str, group_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Codes ``(in, out)`` uint8 and zero points ``(groups, out)`` int64 of a layer (spec reader)."""
    version = check_version(version)
    dims, t = checks.checked_tensors(layer, bits, group_size)
    codes = bitpack.unpack(t["qweight"], bits, axis=0)
    fields = bitpack.unpack(t["qzeros"], bits, axis=1)
    return codes, zeros_from_fields(fields, bits, version)


def dequantize(layer: Any, *, bits: int, version: str, reader: str = SPEC_READER,
               group_size: int | None = None) -> np.ndarray:
    """The weight ``(out_features, in_features)`` as float32, exactly ``s * (q - Z)`` (GPTQ-3.2).

    ``reader`` selects the spec reader or a real tool's emulation (GPTQ-4.2), e.g.
    "autogptq_cuda_old", "vllm_gptq_gemm", "gptqmodel", "marlin".
    """
    version = check_version(version)
    dims, t = checks.checked_tensors(layer, bits, group_size)
    codes = bitpack.unpack(t["qweight"], bits, axis=0)
    g_idx = t["g_idx"].astype(np.intp)
    if reader == SPEC_READER:
        checks.check_g_idx(t["g_idx"], dims.n_groups, dims.group_size)
        zeros = zeros_from_fields(bitpack.unpack(t["qzeros"], bits, axis=1), bits, version)
    else:
        emulated = get_reader(reader)
        zeros = emulated.effective_zeros(t["qzeros"], bits, dims.out_features, version)
        g_idx = emulated.groups(g_idx, dims.in_features, dims.group_size).astype(np.intp)
        checks.check_g_idx_range(g_idx, dims.n_groups)   # GPTQ-5.1: never gather past the stored groups
    return _decode(codes, zeros, t["scales"], g_idx)


def _decode(codes: np.ndarray, zeros: np.ndarray, scales: np.ndarray, g_idx: np.ndarray) -> np.ndarray:
    """s * (q - z) computed in the stored (in, out) orientation, returned as its (out, in) view.

    Working along the stored axis avoids a strided transpose of every code; callers that need
    C order call ``np.ascontiguousarray`` on the result.
    """
    k = codes.shape[0]
    groups = scales.shape[0]
    size = -(-k // groups)
    if k == size * groups and np.array_equal(g_idx, np.arange(k) // size):
        # Contiguous groups: broadcast each (group, out) statistic over its rows, no gather.
        q = codes.reshape(groups, size, -1).astype(np.float32)
        q -= zeros.astype(np.float32)[:, None, :]
        q *= scales.astype(np.float32)[:, None, :]
        return q.reshape(k, -1).T
    q = codes.astype(np.float32)
    q -= zeros.astype(np.float32)[g_idx]
    q *= scales.astype(np.float32)[g_idx]
    return q.T


def convert(layer: Any, *, bits: int, to: str = "v2", group_size: int | None = None,
            reader: str | None = None) -> GPTQLayer:
    """Re-express the zero fields of a layer in the other version, field by field (GPTQ-7).

    v1 -> v2 adds 1 per field and rejects all-ones v1 fields (GPTQ-3.4); v2 -> v1 subtracts 1
    and refuses zero points of 0 with their count (GPTQ-7.2). Other tensors are untouched.

    ``reader`` (v1 -> v2 only) stores instead the zero points that real reader uses (GPTQ-4.2), so
    that the spec reading of the v2 layer equals that reader's decode of the v1 one: how a
    GPTQModel-written v1 checkpoint keeps its zero points 0 (``reader="gptqmodel"``). Refused when
    that reader's zero points do not fit the field, or it ignores a non-trivial g_idx.
    """
    target = check_version(to, "to")
    source: Version = "v1" if target == "v2" else "v2"
    dims, t = checks.checked_tensors(layer, bits, group_size)
    checks.check_g_idx(t["g_idx"], dims.n_groups, dims.group_size)
    if reader is not None:
        return _convert_as_read(t, dims, bits, target, reader)
    zeros = zeros_from_fields(bitpack.unpack(t["qzeros"], bits, axis=1), bits, source)
    if target == "v1" and (zeros == 0).any():
        count = int((zeros == 0).sum())
        idx = [int(i) for i in np.argwhere(zeros == 0)[0]]
        raise fail("gptq.zero.v2_not_representable_in_v1", "qzeros",
                   "free of zero points 0 to convert to v1", f"{count} zero points of 0, first at {idx}")
    out = dict(t)
    out["qzeros"] = bitpack.pack(stored_fields(zeros, bits, target), bits, axis=1)
    return GPTQLayer(out, bits=bits, version=target, group_size=dims.group_size)


def _convert_as_read(t: dict[str, np.ndarray], dims: Any, bits: int, target: str, reader: str) -> GPTQLayer:
    emulated = get_reader(reader)
    if target != "v2":
        raise fail("argument.invalid", "reader", "given only to convert v1 to v2 (the zero points a reader "
                   "uses are stored exactly only in v2)", reader)
    zeros = emulated.effective_zeros(t["qzeros"], bits, dims.out_features, "v1")
    bad = (zeros < 0) | (zeros > _maxq(bits))
    if bad.any():
        idx = [int(i) for i in np.argwhere(bad)[0]]
        raise fail("gptq.quirk.unsupported", "qzeros", f"zero points in [0, {_maxq(bits)}] as {reader} reads them, "
                   "to store them as v2", f"{int(bad.sum())} outside, first {int(zeros[tuple(idx)])} at {idx}")
    rows = emulated.groups(t["g_idx"], dims.in_features, dims.group_size)
    if not np.array_equal(rows, t["g_idx"]):
        raise fail("gptq.quirk.unsupported", "g_idx", f"the k // group_size layout that {reader} assumes "
                   "(it ignores g_idx)", "a non-trivial g_idx")
    out = dict(t)
    out["qzeros"] = bitpack.pack(zeros, bits, axis=1)
    return GPTQLayer(out, bits=bits, version="v2", group_size=dims.group_size)


def quantize(weight: Any, *, bits: int, group_size: int, sym: bool, version: str = "v1",
             act_order: Any = None) -> GPTQLayer:
    """Round-to-nearest min-max quantization with the real quantizer's rules (GPTQ-9, informative).

    ``weight`` is ``(out, in)``. ``act_order`` is an optional per-input-column importance (e.g.
    ``diag(H)``): columns are grouped in descending importance order (ties by column index) and
    ``g_idx[k] = invperm[k] // group_size`` (GPTQ-5.3). Scales are stored as float16 and codes
    are rounded against the stored scale, so ``|w - dequant| <= scale / 2`` inside the clamp range.
    """
    bits = check_bits(bits)
    version = check_version(version)
    w = as_array(weight, "weight")
    if w.dtype.kind != "f" or w.ndim != 2:
        raise fail("tensor.dtype", "weight", "a two-dimensional float array (out, in)", f"{w.dtype.name}{list(w.shape)}")
    if 0 in w.shape:
        raise fail("tensor.shape", "weight", "non-empty (out, in)", tuple(w.shape))
    w = w.astype(np.float32)
    check_finite("weight", w)
    n, k = w.shape
    g = n_groups(k, group_size)
    size = group_rows(k, group_size)
    order = _act_order_permutation(act_order, k)
    g_idx = (np.argsort(order) // size).astype(np.int32)  # invperm[k] // gs; identity order -> trivial
    scales, zeros = _minmax_params(w, g_idx, g, bits, sym)
    codes = _codes(w, scales, zeros, g_idx, bits)
    return pack(codes.T, zeros.T, scales.T, bits=bits, g_idx=g_idx, version=version, group_size=group_size)


def _act_order_permutation(act_order: Any, k: int) -> np.ndarray:
    if act_order is None or act_order is False:
        return np.arange(k)
    importance = as_array(act_order, "act_order")
    if importance.shape != (k,) or importance.dtype.kind not in "fiu":
        raise fail("argument.invalid", "act_order", f"a numeric importance vector of shape ({k},)",
                   f"{importance.dtype.name}{list(importance.shape)}")
    check_finite("act_order", importance.astype(np.float64))
    return np.argsort(-importance.astype(np.float64), kind="stable")


def _group_reduce(w: np.ndarray, g_idx: np.ndarray, groups: int, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc`` over each group's columns of every row: (rows, groups)."""
    order = np.argsort(g_idx, kind="stable")
    starts = np.searchsorted(g_idx[order], np.arange(groups))
    return ufunc.reduceat(w[:, order], starts, axis=1)


def _minmax_params(w: np.ndarray, g_idx: np.ndarray, groups: int, bits: int, sym: bool):
    """AutoGPTQ/GPTQModel ``Quantizer.find_params`` per (row, group), in float32 (GPTQ-9.1)."""
    maxq = np.float32(_maxq(bits))
    xmin = np.minimum(_group_reduce(w, g_idx, groups, np.minimum), 0)
    xmax = np.maximum(_group_reduce(w, g_idx, groups, np.maximum), 0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    degenerate = (xmin == 0) & (xmax == 0)
    xmin = np.where(degenerate, np.float32(-1), xmin)
    xmax = np.where(degenerate, np.float32(1), xmax)
    scale32 = (xmax - xmin) / maxq
    if sym:
        zeros = np.full(scale32.shape, (_maxq(bits) + 1) // 2, np.int64)
    else:
        zeros = round_half_even(-xmin / scale32).astype(np.int64)
    with np.errstate(over="ignore"):
        scales = scale32.astype(np.float16)
    check_finite("scales", scales, code="gptq.scales.nonfinite")
    return scales, zeros


def _codes(w, scales, zeros, g_idx, bits) -> np.ndarray:
    s = scales.astype(np.float32)[:, g_idx]
    safe = np.where(s == 0, np.float32(1), s)  # a scale that underflowed fp16 decodes to 0 anyway
    q = round_half_even(w / safe) + zeros[:, g_idx]
    q = np.where(s == 0, zeros[:, g_idx], q)
    return np.clip(q, 0, _maxq(bits)).astype(np.int64)
