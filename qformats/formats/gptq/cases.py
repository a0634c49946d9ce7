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
field and the 3-bit word-straddling fields 10 and 21 are non-conforming: a reader must reject them
(GPTQ-3.4). Writer cases (``pack``) hand the same logical layers to a packer; a v1 packer must
refuse zero points of 0.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case
from ...errors import QFormatsError
from . import codec
from .layout import BITS, n_groups

__all__ = ["cases", "reference", "logical_weight", "judge_pack", "FORMATS"]

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


def _read_cases(version: str) -> Iterator[Case]:
    fmt = f"gptq_{version}"
    for bits, sym, layout, k, group_size, mode in _matrix():
        name = f"b{bits}_{'sym' if sym else 'asym'}_{layout}_{mode}"
        t = _logical(f"{fmt}/{name}", bits, k, group_size, sym, mode, version)
        clauses = ("GPTQ-2.1", "GPTQ-3.2", "GPTQ-5.3") + (("GPTQ-5.5",) if layout == "short" else ())
        feats = _features(bits, sym, layout, group_size, mode, version)
        yield Case(id=f"{fmt}/read/{name}", format=fmt, ops=("dequantize", "matmul"),
                   inputs=_packed(t, bits, group_size, version), params={"bits": bits, "group_size": group_size},
                   clauses=clauses + ("GPTQ-3.3" if version == "v2" else "GPTQ-3.4",), features=feats, aux=t)
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


def cases() -> Iterator[Case]:
    """Every reference-made GPTQ case, in a fixed order."""
    for version in ("v1", "v2"):
        yield from _read_cases(version)
        yield _accumulation_case(version)
        yield from _large_scale_cases(version)
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
    missing = [name for name in TENSORS if name not in arrays]
    if kind != "mapping" or missing:
        return "error", f"returned a {kind} without {', '.join(missing) or 'named tensors'}; expected a mapping " \
                        "of qweight, qzeros, scales, g_idx"
    version, bits, group_size = case.format.removeprefix("gptq_"), case.params["bits"], case.params["group_size"]
    layer = {name: arrays[name] for name in TENSORS}
    try:
        decoded = np.ascontiguousarray(codec.dequantize(layer, bits=bits, version=version, group_size=group_size))
    except QFormatsError as err:
        return "fail", f"wrote a non-conforming layer: {err}"
    expected = reference(case)
    bad = decoded != expected
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return "fail", (f"{int(bad.sum())} / {bad.size} weights decode differently; first at {list(i)}: "
                        f"{decoded[i]!r}, expected {expected[i]!r}")
    own = _packed(dict(case.inputs), bits, group_size, version)
    same = all(np.array_equal(np.asarray(arrays[n]).view(np.uint8), own[n].view(np.uint8)) for n in TENSORS
               if np.asarray(arrays[n]).dtype == own[n].dtype)
    return "pass", f"decodes to the reference values{'; bytes identical to the reference packer' if same else ''}"
