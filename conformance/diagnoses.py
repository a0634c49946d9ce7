"""Diagnoses of the misreadings people write (spec/kernels.md KC-5.1 to KC-5.5).

A failing answer is compared, bit for bit (+0 == -0), with the case's values recomputed under each
candidate misreading: the case's input rewritten so that the reference codec, reading it correctly,
reads what the wrong kernel reads (fields reversed, scale and min exchanged), or the reference values
moved as the wrong kernel moves them (halves swapped, transposed). No subject code runs here: every
candidate is the format's own reference decode of rewritten bytes.

    for clause, sentence, w, name in candidates(case, face): ...

``name`` is one of :data:`NAMES` (the reading alone, what the run's diagnosis counts across cases);
``sentence`` says what this candidate rewrote. The per-format misreadings of the formats' ``cases``
modules (``misreadings(case)``: the v1 zero offset, ``g_idx`` ignored, ...) come first; these follow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from qformats.cases import READ_OPS, Case
from qformats.errors import QFormatsError
from qformats.formats.registry import Face

__all__ = ["NAMES", "CLAUSES", "ZERO_SIGNS", "candidates", "transposed", "reverse_fields", "PLANES", "HALVES", "SCALE_MIN"]

FIELDS, HALVES_NAME, SCALE_MIN_NAME, TRANSPOSED = "KC-5.1", "KC-5.2", "KC-5.3", "KC-5.4"
NAMES = {
    FIELDS: "field order reversed within each byte or word",
    HALVES_NAME: "low and high halves of the block swapped",
    SCALE_MIN_NAME: "scale and min swapped",
    TRANSPOSED: "transposed output",
}
# KC-2.4's own diagnosis: right values, wrong signs of zero (a rewritten formula, w + 0.0 after the decode)
ZERO_SIGNS = "only the sign of zero differs"
CLAUSES = {name: clause for clause, name in NAMES.items()} | {ZERO_SIGNS: "KC-2.4"}

# GGUF code planes (KC-5.1): (first byte, bytes, field bits) of each run of packed sub-byte fields in a
# block, from ggml-common.h's block structs (spec/ggml_*.md). Types whose codes are whole bytes (q8_0)
# or grid indices and base-3 digits (iq1_*, iq2_*, iq3_*, tq1_0) have no field order within a byte.
PLANES: dict[str, tuple[tuple[int, int, int], ...]] = {
    "q4_0": ((2, 16, 4),), "q4_1": ((4, 16, 4),), "q5_0": ((6, 16, 4),), "q5_1": ((8, 16, 4),),
    "q1_0": ((2, 16, 1),), "q2_0": ((2, 16, 2),),
    "q2_k": ((16, 64, 2),), "q3_k": ((32, 64, 2), (0, 32, 1)), "q4_k": ((16, 128, 4),),
    "q5_k": ((48, 128, 4), (16, 32, 1)), "q6_k": ((0, 128, 4), (128, 64, 2)),
    "iq4_nl": ((2, 16, 4),), "iq4_xs": ((8, 128, 4), (4, 4, 4)), "mxfp4": ((1, 16, 4),), "nvfp4": ((4, 32, 4),),
    "tq2_0": ((0, 64, 2),),
}
# GGUF halves (KC-5.2): (weights, parts): each run of ``weights`` consecutive weights is ``parts`` runs
# whose codes share bytes (q4_0: weight j in the low nibble, j + 16 in the high one; 2-bit planes hold
# four parts, 32 apart). Swapped: the parts in reverse order, each weight keeping its scale.
HALVES: dict[str, tuple[int, int]] = {
    "q4_0": (32, 2), "q4_1": (32, 2), "q5_0": (32, 2), "q5_1": (32, 2), "iq4_nl": (32, 2), "iq4_xs": (32, 2),
    "mxfp4": (32, 2), "nvfp4": (16, 2), "q4_k": (64, 2), "q5_k": (64, 2), "q6_k": (128, 2),
    "q2_k": (128, 4), "q3_k": (128, 4), "tq2_0": (128, 4),
}


def _swap_bytes(a: int, b: int, n: int) -> Callable[[np.ndarray], None]:
    def swap(blk: np.ndarray) -> None:
        blk[:, a:a + n], blk[:, b:b + n] = blk[:, b:b + n].copy(), blk[:, a:a + n].copy()
    return swap


def _nibbles(a: int, n: int) -> Callable[[np.ndarray], None]:
    def swap(blk: np.ndarray) -> None:
        blk[:, a:a + n] = (blk[:, a:a + n] << 4) | (blk[:, a:a + n] >> 4)
    return swap


def _k4_scales(offset: int) -> Callable[[np.ndarray], None]:
    """get_scale_min_k4's 12 bytes with every sc and m exchanged: bytes 0-3 hold sc (j < 4) and the top
    bits of sc (j >= 4), bytes 4-7 the same of m, bytes 8-11 the low nibbles of sc | m << 4."""
    swap_words, swap_nibbles = _swap_bytes(offset, offset + 4, 4), _nibbles(offset + 8, 4)

    def swap(blk: np.ndarray) -> None:
        swap_words(blk)
        swap_nibbles(blk)
    return swap


# Scale and min swapped (KC-5.3): (what was exchanged, rewrite of the blocks in place), per type with a min.
SCALE_MIN: dict[str, tuple[tuple[str, Callable[[np.ndarray], None]], ...]] = {
    "q4_1": (("d with m", _swap_bytes(0, 2, 2)),),
    "q5_1": (("d with m", _swap_bytes(0, 2, 2)),),
    "q2_k": (("the sub-block scale with its min (sc = byte >> 4, m = byte & 15)", _nibbles(0, 16)),
             ("the super-scales d with dmin", _swap_bytes(80, 82, 2))),
    "q4_k": (("each 6-bit sub-block scale with its min", _k4_scales(4)), ("the super-scales d with dmin", _swap_bytes(0, 2, 2))),
    "q5_k": (("each 6-bit sub-block scale with its min", _k4_scales(4)), ("the super-scales d with dmin", _swap_bytes(0, 2, 2))),
}


def reverse_fields(data: np.ndarray, bits: int, unit: int) -> np.ndarray:
    """``data`` (any integer dtype of ``unit`` bits) with the ``bits``-wide fields of every element in
    reverse order: field i moved to field unit / bits - 1 - i."""
    u = np.asarray(data).view(f"u{unit // 8}")
    n, mask = unit // bits, (1 << bits) - 1
    out = np.zeros_like(u)
    for i in range(n):
        out |= ((u >> u.dtype.type(i * bits)) & u.dtype.type(mask)) << u.dtype.type((n - 1 - i) * bits)
    return out.view(np.asarray(data).dtype)


def _words(case: Case, names: tuple[str, ...], bits: int) -> Iterator[tuple[str, dict]]:
    """Fields reversed within each 32-bit word of the packed tensors, all of them, then each alone."""
    if 32 % bits:
        return
    present = [n for n in names if n in case.inputs]
    for chosen in [present] + ([[n] for n in present] if len(present) > 1 else []):
        inputs = dict(case.inputs)
        for name in chosen:
            inputs[name] = reverse_fields(inputs[name], bits, 32)
        yield f"{' and '.join(chosen)}: {bits}-bit fields read in reverse order within each 32-bit word", inputs


def _blocks(case: Case, rewrite: Callable[[np.ndarray], None]) -> dict:
    blocks = np.asarray(case.inputs["blocks"])
    blk = blocks.reshape(-1, _type_size(case.format)).copy()
    rewrite(blk)
    return dict(case.inputs) | {"blocks": blk.reshape(blocks.shape)}


def _type_size(fmt: str) -> int:
    from qformats.containers.ggml_types import GGML_TYPES

    return next(t.type_size for t in GGML_TYPES.values() if t.name.lower() == fmt)


def _plane_rewrite(planes: tuple[tuple[int, int, int], ...]) -> Callable[[np.ndarray], None]:
    def rewrite(blk: np.ndarray) -> None:
        for start, count, bits in planes:
            blk[:, start:start + count] = reverse_fields(blk[:, start:start + count], bits, 8)
    return rewrite


def _block_fields(case: Case) -> Iterator[tuple[str, dict]]:
    planes = PLANES.get(case.format, ())
    for chosen in [planes] + ([(p,) for p in planes] if len(planes) > 1 else []):
        where = ", ".join(f"bytes {s}-{s + n - 1} ({b}-bit)" for s, n, b in chosen)
        yield f"the fields of each byte read in reverse order ({where} of each block)", _blocks(case, _plane_rewrite(chosen))


def _rewritten_inputs(case: Case, face: Face) -> Iterator[tuple[str, str, dict]]:
    """(clause, sentence, inputs) of each input-side misreading of ``case``."""
    bits = case.params.get("bits") or case.params.get("num_bits")
    if face.name == "gptq" and bits:
        for sentence, inputs in _words(case, ("qweight", "qzeros"), int(bits)):
            yield FIELDS, sentence, inputs
    elif face.name == "awq":
        for sentence, inputs in _words(case, ("qweight", "qzeros"), 4):
            yield FIELDS, sentence, inputs
    elif face.name == "ctensors" and bits:
        for sentence, inputs in _words(case, ("weight_packed", "weight_zero_point"), int(bits)):
            yield FIELDS, sentence, inputs
    elif "blocks" in case.inputs:
        for sentence, inputs in _block_fields(case):
            yield FIELDS, sentence, inputs
        for what, rewrite in SCALE_MIN.get(case.format, ()):
            yield SCALE_MIN_NAME, f"{what} exchanged", _blocks(case, rewrite)


def _decoded(case: Case, face: Face, inputs: dict) -> np.ndarray | None:
    """The reference decode of ``inputs`` in place of the case's (a real tool's expected values dropped)."""
    aux = {k: v for k, v in case.aux.items() if k != "expected"}
    try:
        with np.errstate(all="ignore"):
            return np.asarray(face.reference(replace(case, inputs=inputs, aux=aux)))
    except (QFormatsError, ValueError, IndexError):
        return None


def _halves(case: Case, w: np.ndarray) -> np.ndarray | None:
    if case.format not in HALVES or w.ndim != 2:
        return None
    weights, parts = HALVES[case.format]
    rows, n = w.shape
    if n % weights:
        return None
    return np.ascontiguousarray(w.reshape(rows, n // weights, parts, weights // parts)[:, :, ::-1].reshape(rows, n))


def candidates(case: Case, face: Face) -> Iterator[tuple[str, str, np.ndarray, str]]:
    """(clause, sentence, W, name) of every generic misreading of a read case (KC-5.1 to KC-5.4) whose
    reference is the chapter's decode of its input."""
    # GGUF blocks decode as ggml evaluates them whatever they hold (non-finite super-scales: the reading
    # 'evaluation', KC-4.5); other formats' non-conforming cases have the meant layer as reference, not a decode
    if (case.expect == "reject" and "blocks" not in case.inputs) or not set(case.ops) & set(READ_OPS):
        return
    for clause, sentence, inputs in _rewritten_inputs(case, face):
        w = _decoded(case, face, inputs)
        if w is not None:
            yield clause, f"{NAMES[clause]}: {sentence}", w, NAMES[clause]
    w = face.reference(case)
    swapped = _halves(case, w)
    if swapped is not None:
        weights, parts = HALVES[case.format]
        yield HALVES_NAME, (f"{NAMES[HALVES_NAME]}: the {parts} runs of {weights // parts} weights that share code bytes "
                            f"in each {weights}-weight run written in reverse order"), swapped, NAMES[HALVES_NAME]
    if w.ndim == 2 and w.shape[0] == w.shape[1]:
        yield TRANSPOSED, f"{NAMES[TRANSPOSED]}: W.T, (in, out) where the contract is (out, in)", \
            np.ascontiguousarray(w.T), NAMES[TRANSPOSED]


def transposed(arr: np.ndarray, w: np.ndarray, same: Callable[[np.ndarray], bool]) -> str | None:
    """A result of the transposed shape whose transpose is the reference (``same`` judges equality): the
    sentence naming KC-5.4, else None."""
    if arr.ndim == 2 and w.ndim == 2 and arr.shape == w.shape[::-1] and arr.shape != w.shape and same(arr.T):
        return f"{NAMES[TRANSPOSED]} ({TRANSPOSED}): returned W.T, shape {tuple(arr.shape)}, where the contract is (out, in) {tuple(w.shape)}"
    return None
