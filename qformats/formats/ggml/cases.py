"""Conformance cases of the GGUF block types (spec/ggml.md GGML-5), made for every registered type.

Decoder cases (``dequantize``, ``matmul``) are 2 rows of random bytes, 512 weights each (two super-
blocks, or sixteen 32-weight blocks), with the float16 super-scales (``fp16_offsets``) forced into
one class per case::

    class        super-scales (float16)             clause
    random_bits  random finite, small               GGML-3.4: every other bit pattern is valid
    subnormal    2^-24 .. 2^-15                     GGML-2.3: float16 widens exactly
    zero         +0 / -0                            GGML-2.3
    negative     negative normals                   GGML-3.2: decodes (a warning in files)
    max          +-65504                            GGML-2.3
    nonfinite    inf / -inf / NaN (non-conforming)  GGML-3.1

Types without float16 scale fields (mxfp4's E8M0, plain types) get random bits only. One matmul case
per type is 8 rows x 4096 weights with non-negative scales, for long sums (QF-4.6). Non-finite
super-scales are non-conforming (GGML-3.1): a decoder may reject them or evaluate ggml's decode on them
(GGML-2.4, :func:`readings`). Each type with float16 scales also has a ``signed_zeros`` case (±0 and
negative scales, whose decode holds -0.0: spec/kernels.md KC-2.4), and every type one non-conforming
input per MUST-reject rule of GGML-1 (wrong dtype, rows not whole blocks, n not a multiple of the block
size; the validating level, KC-4.2). Encoder cases
(``quantize``) are float32 rows of the q4_K chapter's input kinds; the reference bytes are what ggml's
``quantize_<type>`` writes without an importance vector.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case, judge_blocks
from ..q4_k.cases import ROWS as Q4K_ROWS, N as Q4K_N, _scale_class as q4k_scale_class, _x as q4k_input
from .base import BlockType
from .checks import first_bad_scale
from .codec import check_blocks, dequantize, quantize

__all__ = ["cases", "reference", "judge_quantize", "random_blocks", "SCALE_CLASSES", "FP16_MAX", "subject_types",
           "readings"]

ROWS, N = Q4K_ROWS, Q4K_N          # 2 rows of 512: the shape of q4_K's cases, whose input kinds these share
FP16_MAX = 65504.0
SCALE_CLASSES = {"random_bits": "GGML-3.4", "subnormal": "GGML-2.3", "zero": "GGML-2.3", "negative": "GGML-3.2",
                 "max": "GGML-2.3", "nonfinite": "GGML-3.1"}


def subject_types() -> list[BlockType]:
    """The types judged as conformance subjects here: every block type but the plain ones and q4_K
    (which has its own cases in qformats.formats.q4_k), and not the informative dot-product types."""
    from . import TYPES

    return [bt for bt in TYPES.values() if not bt.plain and not bt.informative and bt.name != "q4_k"]


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _scale_class(rng: np.random.Generator, name: str, size: int) -> np.ndarray:
    """``size`` float16 values of one class: q4_K's classes (qformats.formats.q4_k.cases), and small
    non-negative scales for long sums."""
    if name == "nonnegative":
        return rng.uniform(2.0 ** -12, 2.0 ** -8, size).astype(np.float16)
    return q4k_scale_class(rng, name, size)


def random_blocks(bt: BlockType, rng: np.random.Generator, rows: int, n: int, scale_class: str = "random_bits") -> np.ndarray:
    """uint8 ``(rows, n // block_size * type_size)``: random bytes with every float16 super-scale field of
    the type set to values of ``scale_class`` (see the module docstring)."""
    nb = rows * n // bt.block_size
    blk = rng.integers(0, 256, (nb, bt.type_size), dtype=np.uint8)
    for offset in (bt.fp16_offsets or {}).values():
        values = _scale_class(rng, scale_class, nb)
        blk[:, offset:offset + 2] = np.ascontiguousarray(values.astype("<f2")).view(np.uint8).reshape(nb, 2)
    if bt.set_scale is not None and scale_class != "random_bits":
        bt.set_scale(blk, _scale_class(rng, scale_class, nb))
    return blk.reshape(rows, n // bt.block_size * bt.type_size)


def _read_cases(bt: BlockType) -> Iterator[Case]:
    classes = SCALE_CLASSES if bt.fp16_offsets or bt.set_scale else {"random_bits": "GGML-3.4"}
    for scale_class, clause in classes.items():
        for seed in range(2):
            case_id = f"{bt.name}/read/{scale_class}_{seed}"
            blocks = random_blocks(bt, _rng(case_id), ROWS, N, scale_class)
            nonfinite = scale_class == "nonfinite"
            if nonfinite and first_bad_scale(bt, blocks) is None:
                # a type whose scales have no non-finite code (nvfp4's UE4M3, MX-2.2): the bytes written for
                # inf and NaN are valid blocks that decode finite, so a decoder must decode them
                yield Case(id=f"{bt.name}/read/nonfinite_bytes_{seed}", format=bt.name, ops=("dequantize", "matmul"),
                           inputs={"blocks": blocks}, params={"rows": ROWS, "n": N}, clauses=(bt.clause, "GGML-2.2"),
                           features=("d:nonfinite_bytes",),
                           description="the scale bytes written for inf and NaN: finite values of this type")
                continue
            yield Case(id=case_id, format=bt.name, ops=("dequantize", "matmul"),
                       inputs={"blocks": blocks},
                       params={"rows": ROWS, "n": N},
                       clauses=("GGML-3.1", "GGML-2.4", bt.clause) if nonfinite else (bt.clause, "GGML-2.2", clause),
                       features=(f"d:{scale_class}",), expect="reject" if nonfinite else "values",
                       description="non-conforming: inf/NaN super-scales (GGML-3.1)" if nonfinite else "")
    if bt.fp16_offsets or bt.set_scale:
        yield from _signed_zero_case(bt)
    yield from _invalid_cases(bt)
    case_id = f"{bt.name}/read/n4096_nonnegative"
    blocks = random_blocks(bt, _rng(case_id), 8, 4096, "nonnegative" if bt.fp16_offsets or bt.set_scale else "random_bits")
    yield Case(id=case_id, format=bt.name, ops=("matmul",), inputs={"blocks": blocks}, params={"rows": 8, "n": 4096},
               clauses=(bt.clause, "QF-4.6"), features=("d:nonnegative", "k:4096"))


def _signed_zero_case(bt: BlockType) -> Iterator[Case]:
    """Half the blocks with ±0 super-scales, half negative ones: the decode holds -0.0 (KC-2.4), which a
    decoder adding a zero matrix flips. Made only where the type's decode can give -0.0 at all."""
    case_id = f"{bt.name}/read/signed_zeros"
    rng = _rng(case_id)
    zero, negative = (random_blocks(bt, rng, 1, N, c) for c in ("zero", "negative"))
    blocks = np.concatenate([zero, negative])
    w = dequantize(bt.name, blocks)
    if (np.signbit(w) & (w == 0)).any():
        yield Case(id=case_id, format=bt.name, ops=("dequantize",), inputs={"blocks": blocks},
                   params={"rows": ROWS, "n": N}, clauses=("KC-2.4", bt.clause, "GGML-2.3"),
                   features=("d:zero", "zeros:signed"))


# (name, clause, description): one non-conforming input per MUST-reject rule of GGML-1 (KC-4.2)
INVALID = (
    ("blocks_int8", "GGML-1.1", "blocks as int8, not uint8"),
    ("row_bytes", "GGML-1.1", "rows two blocks longer than n / block_size blocks"),
    ("n_not_multiple", "GGML-1.2", "n not a multiple of the block size"),
)


def _invalid_cases(bt: BlockType) -> Iterator[Case]:
    for name, clause, description in INVALID:
        blocks = random_blocks(bt, _rng(f"{bt.name}/invalid/{name}"), ROWS, N)
        n = N
        if name == "blocks_int8":
            blocks = blocks.view(np.int8)
        elif name == "row_bytes":
            n = N - 2 * bt.block_size
        else:
            n = N - bt.block_size // 2
        yield Case(id=f"{bt.name}/read/invalid/{name}", format=bt.name, ops=("dequantize", "matmul"),
                   inputs={"blocks": blocks}, params={"rows": ROWS, "n": n}, clauses=(clause, "KC-4.2"),
                   features=("input:nonconforming",), expect="reject",
                   aux={"nominal_shape": np.array([ROWS, n], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """Blocks with inf/NaN super-scales (GGML-3.1): a decoder may reject them or evaluate ggml's decode on
    them (GGML-2.4)."""
    if "d:nonfinite" not in case.features or "quantize" in case.ops:
        return None
    return "nonfinite_scales", "GGML-3.1", {"evaluation": ("ggml's dequantize_row_<type> evaluated as written, "
                                                           "inf * 0 = NaN included (GGML-2.4)", reference(case))}


def _x(kind: str, rng: np.random.Generator) -> np.ndarray:
    """Encoder input of one kind: q4_K's kinds (qformats.formats.q4_k.cases), and ties."""
    shape = (ROWS, N)
    if kind == "ties":                  # values on the half-way points of a coarse grid
        return (rng.integers(-16, 16, shape) + 0.5) / 8
    if kind == "exact_ties":            # each 32-weight block spans +-127/8 and holds (k + 0.5) / 8: the q8_0
        x = (rng.integers(-127, 127, shape) + 0.5) / 8     # scale is exactly 1/8, so every x / d is a tie
        x[:, ::32] = np.where(rng.random((ROWS, N // 32)) < 0.5, 127 / 8, -127 / 8)
        x[:, 1::32] = np.float32(0.5 - 2.0 ** -25) / 8    # just below a tie: floor(v + 0.5) rounds it up
        return x
    return q4k_input(kind, rng)


X_KINDS = ("gaussian", "gaussian_outliers", "all_positive", "all_negative", "zeros", "constants", "ties", "exact_ties",
           "tiny", "huge")


def _quantize_cases(bt: BlockType) -> Iterator[Case]:
    if bt.quantize is None or bt.requires_importance:
        return
    for kind in X_KINDS:
        case_id = f"{bt.name}/quantize/{kind}"
        x = _x(kind, _rng(case_id)).astype(np.float32)
        yield Case(id=case_id, format=bt.name, ops=("quantize",), inputs={"x": x}, params={},
                   clauses=(bt.clause, "GGML-4.4", "GGML-5.3"), features=(f"x:{kind}",))


def cases() -> Iterator[Case]:
    """Every reference-made case of every subject type, in registry order."""
    for bt in subject_types():
        yield from _read_cases(bt)
        yield from _quantize_cases(bt)


def reference(case: Case) -> np.ndarray:
    """Decoder cases: ggml's float32 ``(rows, n)``; encoder cases: the reference bytes; a real tool's
    case carries its own expected values."""
    if "expected" in case.aux:
        return case.aux["expected"]
    if "quantize" in case.ops:
        return quantize(case.format, case.inputs["x"])
    return dequantize(case.format, case.inputs["blocks"])


def judge_quantize(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """An encoder's answer (GGML-5.3): the reference bytes are the reference-equivalent level; other
    valid blocks conform; quality is informative (a warning, never a failure)."""
    return judge_blocks(case, arrays, kind, reference(case),
                        check=lambda b: check_blocks(case.format, b, tensor="blocks", finite=True),
                        decode=lambda b: dequantize(case.format, b),
                        equivalent=f"ggml's quantize_{case.format} (reference-equivalent, GGML-5.3)",
                        conforming="GGML-5.3")
