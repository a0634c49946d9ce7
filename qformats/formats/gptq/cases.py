"""GPTQ conformance cases (spec/gptq.md): the reader matrix, non-conforming v1 zero-0 layers, writer cases.

Reader cases (``dequantize``, ``matmul``; subject formats ``gptq_v1`` and ``gptq_v2``) cover
bits 2/3/4/8 x sym/asym x group layout x g_idx x version::

    layout   K    group_size  groups                      g_idx modes
    g-1      64   -1          one group of 64 rows        trivial
    g32      64   32          2 x 32                      trivial, act_order, static_groups
    g128     256  128         2 x 128                     trivial, act_order, static_groups
    short    160  128         128 + 32 (K % gs != 0)      trivial, act_order, static_groups

with N = 32 output columns (whole words at every width), codes 0 and maxq present, zero points 1
and maxq present (and 0 in v2, where it is representable). ``static_groups`` layers were quantized
in act order with groups fixed beforehand, so their g_idx is trivial (GPTQ-5.3). v1 layers whose
zero point 0 was written as an all-ones field (the ``masked`` writer) in the lowest field, the top
field and the 3-bit word-straddling fields 10 and 21 are non-conforming: a validating reader rejects
them (GPTQ-3.4), a decoder may instead decode them by a named reading (:func:`readings`: the field-local
wrap, or GPTQModel's word borrow; spec/kernels.md KC-4.5). Layers without ``g_idx`` are passed
``g_idx=None``, which a reader must accept (GPTQ-2.1). Signed-zero layers hold negative and zero scales
with ``q == z`` and whole output rows of zeros (KC-2.4: ``s * (q - z)`` is -0.0 there). Non-conforming
layers, one per MUST-reject rule (``g_idx`` out of range, uneven groups, non-finite scales, wrong dtypes,
shapes and widths), are the validating level's cases (KC-4.2). Writer cases (``pack``) hand the same
logical layers to a packer; a v1 packer must refuse zero points of 0.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ... import bits as bitpack
from ...cases import Case, judge_packed
from ...errors import QFormatsError
from . import codec
from .layout import BITS, n_groups

__all__ = ["cases", "reference", "logical_weight", "judge_pack", "readings", "misreadings", "FORMATS"]

FORMATS = ("gptq_v1", "gptq_v2")
N = 32
LAYOUTS = (("g-1", 64, -1), ("g32", 64, 32), ("g128", 256, 128), ("short", 160, 128))
G_IDX_MODES = ("trivial", "act_order", "static_groups")
# (bits, field index within a row of qzeros) of v1 zero-0 fields: lowest, top, and 3-bit straddling
ZERO0_FIELDS = ((2, 0), (2, 15), (3, 10), (3, 21), (4, 0), (4, 7), (8, 0), (8, 3))


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _g_idx(rng: np.random.Generator, k: int, group_size: int, mode: str) -> np.ndarray:
    rows = k if group_size == -1 else group_size
    if mode != "act_order":
        return (np.arange(k) // rows).astype(np.int32)
    order = rng.permutation(k)                       # quantization order, most important first
    g_idx = np.empty(k, np.int32)
    g_idx[order] = np.arange(k) // rows              # g_idx[k] = invperm[k] // group_size (GPTQ-5.3)
    return g_idx


def _logical(case_id: str, bits: int, k: int, group_size: int, sym: bool, mode: str, version: str) -> dict:
    """codes (K, N), zeros and float16 scales (G, N), g_idx (K,) with the extremes the matrix promises."""
    rng = _rng(case_id)
    maxq, g = (1 << bits) - 1, n_groups(k, group_size)
    codes = rng.integers(0, maxq + 1, (k, N), dtype=np.int32)
    codes[0, 0], codes[-1, -1] = 0, maxq
    if sym:
        zeros = np.full((g, N), 1 << (bits - 1), np.int32)
    else:
        zeros = rng.integers(1, maxq + 1, (g, N), dtype=np.int32)
        zeros[0, 0], zeros[-1, -1] = 1, maxq
        if version == "v2":
            zeros[0, 1] = 0                          # representable in v2 only (GPTQ-3.3)
    scales = rng.uniform(2.0 ** -10, 0.25, (g, N)).astype(np.float16)
    return {"codes": codes, "zeros": zeros, "scales": scales, "g_idx": _g_idx(rng, k, group_size, mode)}


def _features(bits: int, sym: bool, layout: str, group_size: int, mode: str, version: str) -> tuple[str, ...]:
    tags = [f"bits:{bits}", f"sym:{str(sym).lower()}", f"group_size:{group_size}", f"g_idx:{mode}",
            f"version:{version}"]
    if layout == "short":
        tags.append("group:short_last")
    if not sym and version == "v2":
        tags.append("zero:0")
    return tuple(tags)


def _packed(t: dict, bits: int, group_size: int, version: str, writer: str | None = None) -> dict:
    layer = codec.pack(t["codes"], t["zeros"], t["scales"], bits=bits, g_idx=t["g_idx"], version=version,
                       group_size=group_size, writer=writer)
    return {name: np.asarray(layer.tensors[name]) for name in ("qweight", "qzeros", "scales", "g_idx")}


def _matrix() -> Iterator[tuple[int, bool, str, int, int, str]]:
    for bits in BITS:
        for sym in (True, False):
            for layout, k, group_size in LAYOUTS:
                for mode in G_IDX_MODES[:1] if group_size == -1 else G_IDX_MODES:
                    yield bits, sym, layout, k, group_size, mode


def _read_clauses(layout: str, mode: str) -> tuple[str, ...]:
    """A read case's clauses, the one its features isolate first (the attribution fallback, KC-5)."""
    first = (("GPTQ-5.3",) if mode == "act_order" else ()) + (("GPTQ-5.5",) if layout == "short" else ())
    return first + ("GPTQ-3.2", "GPTQ-3.3", "GPTQ-2.3", "GPTQ-2.1") + (() if first else ("GPTQ-5.3",))


def _read_cases(version: str) -> Iterator[Case]:
    fmt = f"gptq_{version}"
    for bits, sym, layout, k, group_size, mode in _matrix():
        name = f"b{bits}_{'sym' if sym else 'asym'}_{layout}_{mode}"
        t = _logical(f"{fmt}/{name}", bits, k, group_size, sym, mode, version)
        clauses = _read_clauses(layout, mode)
        feats = _features(bits, sym, layout, group_size, mode, version)
        yield Case(id=f"{fmt}/read/{name}", format=fmt, ops=("dequantize", "matmul"),
                   inputs=_packed(t, bits, group_size, version), params={"bits": bits, "group_size": group_size},
                   clauses=clauses, features=feats, aux=t)
        yield Case(id=f"{fmt}/pack/{name}", format=fmt, ops=("pack",), inputs=t,
                   params={"bits": bits, "group_size": group_size}, clauses=clauses + ("GPTQ-3.1",),
                   features=feats)


def _zero0_cases() -> Iterator[Case]:
    """v1 zero point 0 in one chosen field: a masked all-ones field to read, a zero 0 to write."""
    for bits, field_index in ZERO0_FIELDS:
        name = f"b{bits}_asym_g32_zero0_field{field_index}"
        t = _logical(f"gptq_v1/{name}", bits, 64, 32, False, "trivial", "v1")
        t["zeros"][0, field_index] = 0
        feats = (f"bits:{bits}", "sym:false", "group_size:32", "g_idx:trivial", "version:v1", "zero:0",
                 f"zero0_field:{field_index}")
        yield Case(id=f"gptq_v1/read/{name}", format="gptq_v1", ops=("dequantize", "matmul"),
                   inputs=_packed(t, bits, 32, "v1", writer="masked"), params={"bits": bits, "group_size": 32},
                   clauses=("GPTQ-3.4", "GPTQ-4.1"), features=feats, expect="reject", aux=t,
                   description="non-conforming: v1 zero point 0 stored as an all-ones field")
        yield Case(id=f"gptq_v1/pack/{name}", format="gptq_v1", ops=("pack",), inputs=t,
                   params={"bits": bits, "group_size": 32}, clauses=("GPTQ-3.4",), features=feats,
                   expect="reject", description="unrepresentable: a v1 writer must refuse zero point 0")


def _accumulation_case(version: str) -> Case:
    """K = 4096 non-negative weights (codes >= zero > 0, scales > 0): long positive sums for matmul."""
    fmt = f"gptq_{version}"
    t = _logical(f"{fmt}/accumulation", 4, 4096, 128, False, "trivial", version)
    t["zeros"][:] = 1
    t["codes"] = np.maximum(t["codes"], 1)
    return Case(id=f"{fmt}/read/b4_asym_g128_k4096_nonnegative", format=fmt, ops=("matmul",),
                inputs=_packed(t, 4, 128, version), params={"bits": 4, "group_size": 128},
                clauses=("GPTQ-3.2", "QF-4.6"), features=("bits:4", "sym:false", "group_size:128", "g_idx:trivial",
                                                          f"version:{version}", "x:nonnegative", "k:4096"), aux=t)


def _large_scale_cases(version: str) -> Iterator[Case]:
    """Scales near the float16 maximum: |W| = |s (q - z)| reaches 65504 * maxq, beyond float16, so a
    kernel that rounds W to float16 overflows (dequantize: inf is the correctly rounded value)."""
    fmt = f"gptq_{version}"
    for bits in (4, 8):
        name = f"b{bits}_asym_g32_scales_max"
        t = _logical(f"{fmt}/{name}", bits, 64, 32, False, "trivial", version)
        t["scales"] = np.where(np.arange(N) % 2 == 0, 65504.0, -61440.0).astype(np.float16)[None, :].repeat(2, 0)
        yield Case(id=f"{fmt}/read/{name}", format=fmt, ops=("dequantize", "matmul"),
                   inputs=_packed(t, bits, 32, version), params={"bits": bits, "group_size": 32},
                   clauses=("GPTQ-3.2", "GPTQ-3.5", "QF-4.3", "QF-4.6"),
                   features=(f"bits:{bits}", "sym:false", "group_size:32", "g_idx:trivial", f"version:{version}",
                             "scales:max"), aux=t)


def _no_g_idx_cases(version: str) -> Iterator[Case]:
    """Layers without g_idx (2023 "old format" files): the kernel gets ``g_idx=None`` and must use the
    trivial map k // group_size (GPTQ-2.1)."""
    fmt = f"gptq_{version}"
    for bits, sym, layout, k, group_size in ((4, False, "g32", 64, 32), (3, True, "short", 160, 128)):
        name = f"b{bits}_{'sym' if sym else 'asym'}_{layout}_no_g_idx"
        t = _logical(f"{fmt}/{name}", bits, k, group_size, sym, "trivial", version)
        tensors = _packed(t, bits, group_size, version)
        del tensors["g_idx"]
        yield Case(id=f"{fmt}/read/{name}", format=fmt, ops=("dequantize", "matmul"), inputs=tensors,
                   params={"bits": bits, "group_size": group_size, "g_idx": None},
                   clauses=("GPTQ-2.1", "KC-1.3", "GPTQ-5.3", "GPTQ-3.2"),
                   features=_features(bits, sym, layout, group_size, "none", version), aux=t)


def _signed_zero_layers(case_id: str, kind: str, version: str) -> tuple[dict, int]:
    """Logical layers whose decode holds -0.0 (KC-2.4: ``s * (q - z)`` evaluated as written)."""
    bits = 3 if kind == "all_zero_rows" else 4
    t = _logical(case_id, bits, 64, 32, kind != "all_zero_rows", "trivial", version)
    rng = _rng(case_id + "/zeros")
    z = t["zeros"][t["g_idx"]]                                   # (K, N): each row's zero point
    if kind == "negative_scales":            # q == z under negative scales: -0.0; under positive ones +0.0
        t["scales"][:, ::2] = -t["scales"][:, ::2]
        same = rng.random(t["codes"].shape) < 0.4
        t["codes"] = np.where(same, z, t["codes"]).astype(np.int32)
    elif kind == "zero_scales":              # +0 * (q - z < 0) and -0 * (q - z > 0) are -0.0 too
        t["scales"][0, :16], t["scales"][1, 16:] = np.float16(0.0), np.float16(-0.0)
    else:                                    # output rows 0..7 all zero: codes == zero point, signed scales
        t["codes"][:, :8] = z[:, :8]
        t["scales"][:, :8] = np.where(np.arange(8) % 2 == 0, -0.125, 0.125).astype(np.float16)
    return t, bits


def _signed_zero_cases(version: str) -> Iterator[Case]:
    fmt = f"gptq_{version}"
    for kind in ("negative_scales", "zero_scales", "all_zero_rows"):
        name = f"signed_zeros_{kind}"
        t, bits = _signed_zero_layers(f"{fmt}/{name}", kind, version)
        sym = kind == "all_zero_rows"
        yield Case(id=f"{fmt}/read/b{bits}_{'sym' if sym else 'asym'}_g32_{name}", format=fmt, ops=("dequantize",),
                   inputs=_packed(t, bits, 32, version), params={"bits": bits, "group_size": 32},
                   clauses=("KC-2.4", "GPTQ-3.2", "GPTQ-3.5"),
                   features=_features(bits, sym, "g32", 32, "trivial", version) + ("zeros:signed",), aux=t)


# Non-conforming layers, one per MUST-reject rule of the chapter (the validating level, KC-4.2):
# (name, clause, description, how the layer of the 4-bit asym g32 case is spoiled)
INVALID = (
    ("g_idx_out_of_range", "GPTQ-5.1", "g_idx[5] = G, past the last group", "g_idx_past"),
    ("g_idx_negative", "GPTQ-5.1", "g_idx[0] = -1", "g_idx_negative"),
    ("g_idx_uneven_groups", "GPTQ-5.2", "g_idx in range, but group 0 holds 33 rows and group 1 31", "g_idx_uneven"),
    ("scales_nan", "GPTQ-3.5", "a NaN scale", "scales_nan"),
    ("scales_inf", "GPTQ-3.5", "an infinite scale", "scales_inf"),
    ("scales_float32", "QF-2.2", "scales stored as float32, not float16", "scales_float32"),
    ("scales_rows", "GPTQ-2.2", "scales with G + 1 rows", "scales_rows"),
    ("qzeros_columns", "GPTQ-2.2", "qzeros one word short of N * b / 32", "qzeros_columns"),
    ("bits_5", "QF-3.1", "a 5-bit layer: GPTQ widths are 2, 3, 4 and 8", "bits_5"),
)


def _spoiled(t: dict, tensors: dict, how: str) -> dict:
    out = dict(tensors)
    if how.startswith("g_idx"):
        g = np.array(out["g_idx"])
        if how == "g_idx_past":
            g[5] = t["scales"].shape[0]
        elif how == "g_idx_negative":
            g[0] = -1
        else:
            g[32] = 0
        out["g_idx"] = g
    elif how.startswith("scales"):
        sc = np.array(out["scales"])
        if how == "scales_nan":
            sc[1, 17] = np.nan
        elif how == "scales_inf":
            sc[0, 3] = -np.inf
        elif how == "scales_float32":
            sc = sc.astype(np.float32)
        else:
            sc = np.concatenate([sc, sc[-1:]])
        out["scales"] = sc
    elif how == "qzeros_columns":
        out["qzeros"] = np.ascontiguousarray(out["qzeros"][:, :-1])
    return out


def _bits5_layer(t: dict) -> dict:
    """The logical layer packed at 5 bits by QF-3 (a well-formed bit stream of a width GPTQ excludes)."""
    codes, zeros = t["codes"] % 32, np.clip(t["zeros"], 1, 31)
    return {"qweight": bitpack.pack(codes, 5, axis=0).view(np.int32), "qzeros": bitpack.pack(zeros - 1, 5, axis=1).view(np.int32),
            "scales": t["scales"], "g_idx": t["g_idx"]}


def _invalid_cases(version: str) -> Iterator[Case]:
    fmt = f"gptq_{version}"
    for name, clause, description, how in INVALID:
        t = _logical(f"{fmt}/invalid/{name}", 4, 64, 32, False, "trivial", version)
        bits = 5 if how == "bits_5" else 4
        tensors = _bits5_layer(t) if how == "bits_5" else _spoiled(t, _packed(t, 4, 32, version), how)
        yield Case(id=f"{fmt}/read/invalid/b{bits}_asym_g32_{name}", format=fmt, ops=("dequantize", "matmul"),
                   inputs=tensors, params={"bits": bits, "group_size": 32}, clauses=(clause, "KC-4.2"),
                   features=(f"bits:{bits}", "sym:false", "group_size:32", "g_idx:trivial", f"version:{version}",
                             "input:nonconforming"),
                   expect="reject", aux={"nominal_shape": np.array([N, 64], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


def cases() -> Iterator[Case]:
    """Every reference-made GPTQ case, in a fixed order."""
    for version in ("v1", "v2"):
        yield from _read_cases(version)
        yield _accumulation_case(version)
        yield from _large_scale_cases(version)
        yield from _no_g_idx_cases(version)
        yield from _signed_zero_cases(version)
        yield from _invalid_cases(version)
    yield from _zero0_cases()


def logical_weight(codes: np.ndarray, zeros: np.ndarray, scales: np.ndarray, g_idx: np.ndarray) -> np.ndarray:
    """``s * (q - z)`` straight from the logical arrays, (out, in) float32 (GPTQ-3.2), without packing."""
    gi = np.asarray(g_idx, np.intp)
    w = np.asarray(scales, np.float32)[gi] * (np.asarray(codes, np.float32) - np.asarray(zeros, np.float32)[gi])
    return np.ascontiguousarray(w.T)


def reference(case: Case) -> np.ndarray:
    """The reference weight (out, in) float32 of a case: the spec reader's decode of its tensors, or for
    writer and non-conforming cases the logical layer's value ``s * (q - z)`` (what was meant); a real
    tool's case carries its own expected values."""
    if "expected" in case.aux:
        return case.aux["expected"]
    if "pack" in case.ops or case.expect == "reject":
        t = case.aux or case.inputs
        return logical_weight(t["codes"], t["zeros"], t["scales"], t["g_idx"])
    version = case.format.removeprefix("gptq_")
    return np.ascontiguousarray(codec.dequantize(dict(case.inputs), bits=case.params["bits"], version=version,
                                                 group_size=case.params["group_size"]))


TENSORS = ("qweight", "qzeros", "scales", "g_idx")


def judge_pack(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """A packer's answer: a conforming layer (spec reader, GPTQ-3) that decodes to ``s * (q - z)`` of its
    inputs exactly; bytes identical to the reference packer are reported as the higher level."""
    version, bits, group_size = case.format.removeprefix("gptq_"), case.params["bits"], case.params["group_size"]
    return judge_packed(arrays, kind, TENSORS,
                        decode=lambda layer: codec.dequantize(layer, bits=bits, version=version, group_size=group_size),
                        expected=reference(case),
                        reference_packed=lambda: _packed(dict(case.inputs), bits, group_size, version))


# -- named readings and known misreadings (spec/kernels.md KC-4.5, KC-5) -------------------------------

READINGS = {
    "field_local_wrap": "the field-local wrap Z = (f + 1) & maxq: an all-ones field is zero point 0 and no other "
                        "field changes (GPTQ-4.2: exllama, AutoGPTQ qlinear_cuda_old)",
    "gptqmodel_word_borrow": "GPTQModel's word borrow: each whole word plus 0x55555555 / 0x11111111 / 0x01010101, "
                             "the carry out of an all-ones field added to the field above (GPTQ-4.1, GPTQ-4.2; "
                             "3 bits per field)",
}


def _tensors(case: Case) -> tuple[dict, int, int, str, np.ndarray]:
    t = dict(case.inputs)
    bits, group_size = case.params["bits"], case.params["group_size"]
    k = t["qweight"].shape[0] * 32 // bits
    g_idx = t.get("g_idx")
    if g_idx is None:
        rows = k if group_size == -1 else group_size
        g_idx = (np.arange(k) // rows).astype(np.int32)
    return t, bits, group_size, case.format.removeprefix("gptq_"), np.asarray(g_idx)


def _with_zeros(t: dict, bits: int, zeros: np.ndarray, g_idx: np.ndarray) -> np.ndarray:
    """``s * (q - Z)`` of the stored codes and scales with the zero points ``Z`` a reading takes."""
    codes = bitpack.unpack(t["qweight"], bits, axis=0)
    return logical_weight(codes, zeros, t["scales"], g_idx)


def _fields(t: dict, bits: int) -> np.ndarray:
    return bitpack.unpack(t["qzeros"], bits, axis=1, count=t["scales"].shape[1]).astype(np.int64)


def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """(feature, MUST-reject clause, {name: (sentence, W)}) of a v1 layer with all-ones zero fields: the
    readings a decoder may follow instead of rejecting it (GPTQ-3.4, KC-4.5); None for other cases."""
    if case.format != "gptq_v1" or case.expect != "reject" or "zero:0" not in case.features or "pack" in case.ops:
        return None
    t, bits, group_size, _, g_idx = _tensors(case)
    wrap = _with_zeros(t, bits, (_fields(t, bits) + 1) & ((1 << bits) - 1), g_idx)
    borrow = np.ascontiguousarray(codec.dequantize(t, bits=bits, version="v1", reader="gptqmodel", group_size=group_size))
    return "v1_zero_fields", "GPTQ-3.4", {"field_local_wrap": (READINGS["field_local_wrap"], wrap),
                                           "gptqmodel_word_borrow": (READINGS["gptqmodel_word_borrow"], borrow)}


def _emulated(t: dict, bits: int, group_size: int, version: str, reader: str) -> np.ndarray | None:
    try:
        return np.ascontiguousarray(codec.dequantize(t, bits=bits, version=version, reader=reader, group_size=group_size))
    except QFormatsError:
        return None


def misreadings(case: Case) -> Iterator[tuple]:
    """(clause, what the subject did, W[, the reading's name]) of real tools' wrong readings of a GPTQ read
    case, most specific first: the judge names the first one a failing answer reproduces (KC-5)."""
    if "dequantize" not in case.ops and "matmul" not in case.ops:
        return
    t, bits, group_size, version, g_idx = _tensors(case)
    if "scales" not in t or t["scales"].dtype != np.float16 or case.feature("input"):
        return
    fields = _fields(t, bits)
    maxq = (1 << bits) - 1
    if version == "v1" and (fields == maxq).any():
        name = "the f + 1 without wrap reading (AutoGPTQ qlinear_cuda, vLLM gptq_gemm)"
        yield "GPTQ-3.4", f"decoded zero point 0 as {1 << bits}: {name}", _with_zeros(t, bits, fields + 1, g_idx), name
    other = "v2" if version == "v1" else "v1"
    yield "GPTQ-3.3", f"the zero fields read as {other} (Z = f{' + 1' if other == 'v1' else ''}), not {version}", \
        _with_zeros(t, bits, fields + (other == "v1"), g_idx)
    rows = t["qweight"].shape[0] * 32 // bits
    trivial = np.arange(rows) // (rows if group_size == -1 else group_size)
    if not np.array_equal(trivial, g_idx):
        yield "GPTQ-5.3", "g_idx ignored: row k read in group k // group_size", _with_zeros(
            t, bits, fields + (version == "v1"), trivial)
    for reader, clause, what in (("autogptq_cuda_kernel", "GPTQ-3.3", "the zero point masked to 4 bits, "
                                  "((f & mask) + 1) & 0x0F (AutoGPTQ's CUDA extension, GPTQ-4.4)"),
                                 ("gptqmodel_legacy_int3", "GPTQ-3.3", "GPTQModel v0.9-v6.x's 3-bit word "
                                  "constants (GPTQ-4.5)"),
                                 ("marlin", "GPTQ-3.3", "qzeros ignored, zero point 2^(b-1) (Marlin, GPTQ-4.2)")):
        if reader == "gptqmodel_legacy_int3" and bits != 3:     # the same as GPTQModel's reader elsewhere
            continue
        w = _emulated(t, bits, group_size, version, reader)
        if w is not None:
            yield clause, what, w
