"""What the stored zeros say about the v1/v2 label, and which real readers would misread them.

:func:`label_evidence` implements GPTQ-8: the tensors of one layer, read without trusting
``checkpoint_format``, testify for v1 (field = zero - 1) or v2 (field = zero).

* **symmetric-exact** (GPTQ-8.1). A symmetric layer has zero ``2^(b-1)`` everywhere, so every
  field is ``2^(b-1) - 1`` (v1) or ``2^(b-1)`` (v2); one word decides. With ``sym`` unknown a
  layer whose fields are *all* one of those two values is taken as symmetric: an asymmetric
  layer of any real size never has one zero everywhere.
* **asymmetric-statistical** (GPTQ-8.2, 2/3/4 bits). For weights symmetric about their group
  mean, the mean code of a group sits at the zero. ``d`` = mean over (group, column) of
  ``mean_k q[k, n] - f[g, n]`` is about 0 for v2 and about +1 for v1.
* **none** (GPTQ-8.4): 8-bit asymmetric layers, or no qweight to compare against.

Decision rule for the statistic, and why:

* verdict v2 if ``|d| <= 0.25``, v1 if ``|d - 1| <= 0.25``, otherwise undetermined. RTN
  simulations (notes §8; our tests) put d within 0.03 of 0 or 1, so 0.25 is about ten times the
  observed scatter, and the middle half of the gap between the hypotheses stays undecided.
* only if the per-(group, column) values are consistent: their standard deviation must not
  exceed ``2^b / 8`` (0.5, 1, 2 code steps at 2/3/4 bits). Real quantized groups scatter well
  below that (the mean of gs codes); codes unrelated to their zeros, such as uniformly random
  test codes, scatter by about the zero range itself and get "undetermined" instead of a coin
  flip that happens to land near 0 or 1.
* all-ones fields are left out of d: in v1 they are the non-conforming wrapped zero 0
  (GPTQ-3.4), whose true value is unknown, and in either label they would swamp the mean.

Signatures (GPTQ-8.5) name writer fingerprints: ``all-ones-fields`` (any field ``2^b - 1``),
``autogptq-or-bleed`` (a word whose upper half, from a field boundary to bit 31, is all
ones: AutoGPTQ's ``0xFFFFFFFF << shift``, or, far less likely, a run of wrapped zeros) and
``gptqmodel-legacy-int3`` (the GPTQModel v0.9-v6.x symmetric 3-bit words ``0x00000000,
0xb6db6db7, 0x49249249``, GPTQ-4.5), which also decides v1 exactly.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from ... import SPEC_VERSION
from ...bits import field_positions, unpack
from ...errors import QFormatsError, fail
from ...tensors import as_array, check_finite, check_tensor
from .checks import check_g_idx_range, check_qzeros
from .layout import check_bits, check_version
from .quirks import READERS

__all__ = ["LabelEvidence", "label_evidence", "reader_disagreements", "MARGIN", "SIGNATURES"]

MARGIN = 0.25
SIGNATURES = ("all-ones-fields", "autogptq-or-bleed", "gptqmodel-legacy-int3")
_LEGACY_SYM_WORDS = (0x00000000, 0xB6DB6DB7, 0x49249249)  # sym zero 4 packed, minus LEGACY_INT3


class LabelEvidence(BaseModel):
    """The v1/v2 testimony of one layer's zeros (GPTQ-8)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = SPEC_VERSION

    verdict: Literal["v1", "v2", "undetermined"]
    method: Literal["symmetric-exact", "asymmetric-statistical", "none"]
    statistic: float | None = None
    detail: str
    signatures: tuple[str, ...] = ()
    all_ones_fields: int = 0


def _qweight(qweight, b: int, n: int) -> np.ndarray:
    qw = as_array(qweight, "qweight")
    if qw.dtype != np.int32:
        raise fail("tensor.dtype", "qweight", "int32", qw.dtype.name)
    if qw.ndim != 2 or qw.shape[1] != n or (qw.shape[0] * 32) % b or qw.shape[0] == 0:
        raise fail("tensor.shape", "qweight", f"2-D (K*{b}/32, {n})", tuple(qw.shape))
    return qw


def _codes(qweight, b: int, n: int) -> np.ndarray:
    return unpack(_qweight(qweight, b, n), b, axis=0)   # uint8: arithmetic below widens as it needs


def _groups(g_idx, k: int, g: int) -> np.ndarray:
    if g_idx is None:
        if g != 1 and k % g:
            raise fail("argument.invalid", "g_idx", f"given when K={k} is not a multiple of G={g}", None)
        return np.arange(k, dtype=np.int64) // (k // g)
    gi = check_tensor("g_idx", g_idx, ("int32", "int64"), (k,))
    check_g_idx_range(gi, g)
    return gi.astype(np.int64)


def _bleed_words(qz: np.ndarray, b: int) -> int:
    """Words whose upper half, from a field boundary up to bit 31, is all ones.

    AutoGPTQ's ``0xFFFFFFFF << s`` does that whenever the zero-0 field starts in the lower half
    of a word; independent all-ones fields (v2 zero ``2^b - 1``, a masked v1 zero 0) do it only
    with probability ``p^(16/b)``.
    """
    u = qz.view(np.uint32)
    hits = 0
    for w in range(b if b == 3 else 1):  # 2/4/8-bit words all share one field layout
        s = max(s for ww, s in field_positions(b) if ww == w and s <= 16)
        col = u[:, w::b] if b == 3 else u  # at 3 bits the word's place in its triple matters
        hits += int(np.count_nonzero((col >> np.uint32(s)) == np.uint32(0xFFFFFFFF >> s)))
    return hits


def _legacy_int3(qz: np.ndarray, b: int) -> bool:
    if b != 3 or qz.shape[1] % 3:
        return False
    want = np.array(_LEGACY_SYM_WORDS, np.uint32)[np.arange(qz.shape[1]) % 3]
    return bool(np.array_equal(qz.view(np.uint32), np.broadcast_to(want, qz.shape)))


def label_evidence(qzeros, bits: int, *, qweight=None, g_idx=None, sym: bool | None = None) -> LabelEvidence:
    """Judge from the tensors alone whether ``qzeros`` holds v1 or v2 fields (GPTQ-8.1-8.5)."""
    b = check_bits(bits)
    qz = check_qzeros(qzeros, b)
    f = unpack(qz, b, axis=1).astype(np.int64)
    maxq, half = (1 << b) - 1, 1 << (b - 1)
    n_ones = int(np.count_nonzero(f == maxq))
    bleed = _bleed_words(qz, b)
    sigs = tuple(name for name, hit in zip(SIGNATURES, (n_ones > 0, bleed > 0, _legacy_int3(qz, b))) if hit)
    common = {"signatures": sigs, "all_ones_fields": n_ones}

    if "gptqmodel-legacy-int3" in sigs:
        return LabelEvidence(verdict="v1", method="symmetric-exact", **common, detail=(
            "every word triple is 0x00000000 0xb6db6db7 0x49249249: symmetric zero 4 written as v1 by "
            "GPTQModel v0.9.0-v6.x legacy int3 constants (GPTQ-4.5); canonical readers misread it"))
    if sym is not False:
        for version, value in (("v1", half - 1), ("v2", half)):
            if np.all(f == value):
                return LabelEvidence(verdict=version, method="symmetric-exact", **common, detail=(
                    f"every field is {value} = symmetric zero {half} stored as {version} (GPTQ-8.1)"))
    sym_note = ("declared symmetric, but fields are not uniformly "
                f"{half - 1} (v1) or {half} (v2); " if sym else "")

    stat = spread = None
    if qweight is not None:
        stat, spread = _mean_code_offset(qweight, f, g_idx, b)
    if b == 8:
        return LabelEvidence(verdict="undetermined", method="none", statistic=stat, **common, detail=(
            sym_note + "8-bit asymmetric zeros cannot be judged from code statistics (GPTQ-8.4)"))
    if qweight is None:
        return LabelEvidence(verdict="undetermined", method="none", **common,
                             detail=sym_note + "asymmetric zeros need qweight for the statistical test (GPTQ-8.2)")
    if stat is None:
        return LabelEvidence(verdict="undetermined", method="asymmetric-statistical", **common,
                             detail=sym_note + "no field outside all-ones to compare against (GPTQ-8.2)")
    limit = (1 << b) / 8
    if spread > limit:
        verdict, why = "undetermined", f"per-group offsets scatter too much (std {spread:.3f} > {limit:g})"
    elif abs(stat) <= MARGIN:
        verdict, why = "v2", f"|d| <= {MARGIN}"
    elif abs(stat - 1) <= MARGIN:
        verdict, why = "v1", f"|d - 1| <= {MARGIN}"
    else:
        verdict, why = "undetermined", f"d is not within {MARGIN} of 0 (v2) or 1 (v1)"
    return LabelEvidence(verdict=verdict, method="asymmetric-statistical", statistic=stat, **common, detail=(
        f"{sym_note}mean code minus stored field d = {stat:.4f} (std {spread:.3f}); {why} (GPTQ-8.2)"))


def _mean_code_offset(qweight, f: np.ndarray, g_idx, b: int) -> tuple[float | None, float | None]:
    """Mean and std over (group, column) of mean code minus stored field, all-ones fields left out.

    The per-cell code sums come from the packed words (``moments.cell_sums``), never from an
    unpacked code matrix: label evidence is part of every plain ``validate``.
    """
    from .moments import cell_sums  # moments imports the codec, which this module must not

    g, n = f.shape
    qw = _qweight(qweight, b, n)
    gi = _groups(g_idx, qw.shape[0] * 32 // b, g)
    counts, sums = cell_sums(qw, gi.astype(np.intp), b, g)
    counts = counts.astype(np.float64)
    valid = (counts[:, None] > 0) & (f != (1 << b) - 1)
    if not valid.any():
        return None, None
    d = (sums / np.maximum(counts, 1)[:, None] - f)[valid]
    return float(d.mean()), float(d.std())


def reader_disagreements(qweight, qzeros, scales, g_idx, *, bits: int, version: str,
                         group_size: int | None) -> dict[str, int]:
    """How many weights each emulated reader decodes differently from the spec reading (GPTQ-8.3).

    The spec reading is ``Z = f`` (v2) and ``Z = f + 1`` (v1); for a v1 all-ones field, which the
    spec leaves undefined (GPTQ-3.4), it is the writer-intended zero 0, i.e. ``(f + 1) mod 2^b``
    as the masked writer meant it. Readers that cannot read this bits/version combination, or
    this group layout (``gptq.quirk.unsupported``), are left out of the result.
    """
    b = check_bits(bits)
    check_version(version)
    qz = check_qzeros(qzeros, b)
    f = unpack(qz, b, axis=1).astype(np.int64)
    g, n = f.shape
    q = _codes(qweight, b, n)
    k = q.shape[0]
    s = as_array(scales, "scales")
    if s.dtype.kind != "f" or s.shape != (g, n):
        raise fail("tensor.shape", "scales", f"float of shape ({g}, {n})", f"{s.dtype.name} {tuple(s.shape)}")
    check_finite("scales", s, "gptq.scales.nonfinite")
    s = s.astype(np.float32)
    gi = _groups(g_idx, k, g)
    z_ref = (f + 1) & ((1 << b) - 1) if version == "v1" else f
    ref = s[gi] * (q - z_ref[gi]).astype(np.float32)
    out: dict[str, int] = {}
    for name, reader in READERS.items():
        if not reader.supports(b, version):
            continue
        try:
            rows = reader.groups(gi, k, group_size)
        except QFormatsError as exc:
            if exc.code == "gptq.quirk.unsupported":
                continue
            raise
        if rows.max(initial=0) >= g:
            continue  # a k // group_size reader would index past the stored groups
        z = reader.effective_zeros(qz, b, n, version)
        got = s[rows] * (q - z[rows]).astype(np.float32)
        out[name] = int(np.count_nonzero(got != ref))
    return out
