"""q4_K conformance cases (spec/q4_k.md): decoder blocks no encoder makes, and encoder inputs.

Decoder cases (``dequantize``, ``matmul``) are 2 rows x 512 weights (four 144-byte blocks) of random
bytes with ``d`` / ``dmin`` forced into one class each::

    class              d, dmin (fp16)                       clause
    random_bits        random finite                        Q4K-5.5: every scales/qs pattern is valid
    subnormal          2^-24 .. 2^-15 (fp16 subnormals)     Q4K-3.2
    zero               +0 / -0                              Q4K-3.2
    negative           negative normals                     Q4K-5.4: negative scales are valid
    max                +-65504                              Q4K-3.2
    zero_scale_codes   finite d, sc = 0 with codes != 0     Q4K-5.5
    nonfinite          inf / -inf / NaN (non-conforming)    Q4K-5.4

plus an n = 4096 case of non-negative weights (dmin = 0) for long matmul sums, blocks whose decode holds
-0.0 (negative and -0 ``d`` over codes 0 with ``m = 0``: ``-0 - +0``, spec/kernels.md KC-2.4), and one
non-conforming input per MUST-reject rule (Q4K-5.1 to 5.4; the validating level, KC-4.2). Non-finite
scales are non-conforming: a decoder may reject them or evaluate Q4K-3.1 on them, the reading llama.cpp
follows (:func:`readings`). Encoder cases
(``quantize``) are float32 rows of the shapes llama.cpp's golden categories name; the reference
bytes (``quantize_row_q4_K_ref``) are the byte-identity level, valid blocks the conformance level.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np

from ...cases import Case, judge_blocks
from ...numerics import fp16_from_bits
from .checks import check_blocks
from .codec import dequantize, pack_scales, quantize
from .layout import BLOCK_BYTES, QK_K, SCALES_OFFSET

__all__ = ["cases", "reference", "judge_quantize", "readings", "misreadings", "FORMATS"]

FORMATS = ("q4_k",)
ROWS, N = 2, 512
FP16_MAX = 65504.0


def _rng(case_id: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case_id.encode()))


def _fp16_bytes(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values.astype("<f2")).view(np.uint8).reshape(*values.shape, 2)


def _scale_class(rng: np.random.Generator, name: str, size: int) -> np.ndarray:
    """``size`` float16 values of one class of ``d`` / ``dmin``."""
    if name == "subnormal":
        return fp16_from_bits(rng.integers(1, 0x0400, size).astype(np.uint16))
    if name == "zero":
        return np.where(rng.random(size) < 0.5, np.float16(0.0), np.float16(-0.0)).astype(np.float16)
    if name == "negative":
        return -rng.uniform(2.0 ** -14, 1.0, size).astype(np.float16)
    if name == "max":
        return np.where(rng.random(size) < 0.5, FP16_MAX, -FP16_MAX).astype(np.float16)
    if name == "nonfinite":
        return rng.choice(np.array([np.inf, -np.inf, np.nan], np.float16), size)
    return rng.uniform(-1.0, 1.0, size).astype(np.float16) * np.float16(2.0 ** -4)


def _blocks(case_id: str, d_class: str, rows: int = ROWS, n: int = N) -> np.ndarray:
    rng = _rng(case_id)
    nb = rows * n // QK_K
    blk = rng.integers(0, 256, (nb, BLOCK_BYTES), dtype=np.uint8)
    blk[:, 0:2] = _fp16_bytes(_scale_class(rng, d_class, nb))
    blk[:, 2:4] = _fp16_bytes(_scale_class(rng, d_class if d_class != "random_bits" else "normal", nb))
    if d_class == "zero_scale_codes":       # sub-blocks 0 and 5 get sc = 0; the codes stay random
        sc = rng.integers(1, 64, (nb, 8), dtype=np.uint8)
        sc[:, [0, 5]] = 0
        blk[:, SCALES_OFFSET:SCALES_OFFSET + 12] = pack_scales(sc, rng.integers(0, 64, (nb, 8), dtype=np.uint8))
    return blk.reshape(rows, n // QK_K * BLOCK_BYTES)


D_CLASSES = {"random_bits": "Q4K-5.5", "subnormal": "Q4K-3.2", "zero": "Q4K-3.2", "negative": "Q4K-5.4",
             "max": "Q4K-3.2", "zero_scale_codes": "Q4K-5.5", "nonfinite": "Q4K-5.4"}


def _read_cases() -> Iterator[Case]:
    for d_class, clause in D_CLASSES.items():
        for seed in range(2):
            case_id = f"q4_k/read/{d_class}_{seed}"
            nonfinite = d_class == "nonfinite"
            yield Case(id=case_id, format="q4_k", ops=("dequantize", "matmul"),
                       inputs={"blocks": _blocks(case_id, d_class)}, params={"rows": ROWS, "n": N},
                       clauses=("Q4K-5.4", "Q4K-3.3", "Q4K-3.1") if nonfinite else (clause, "Q4K-3.1", "Q4K-1.4", "Q4K-1.5"),
                       features=(f"d:{d_class}",), expect="reject" if nonfinite else "values",
                       description="non-conforming: inf/NaN d or dmin (Q4K-5.4)" if nonfinite else "")
    yield _signed_zero_case()
    rng = _rng("q4_k/accumulation")
    blocks = _blocks("q4_k/accumulation", "random_bits", rows=8, n=4096).reshape(-1, BLOCK_BYTES)
    blocks[:, 0:2] = _fp16_bytes(rng.uniform(2.0 ** -12, 2.0 ** -8, blocks.shape[0]).astype(np.float16))
    blocks[:, 2:4] = 0                       # dmin = 0: every weight d*sc*q >= 0
    yield Case(id="q4_k/read/n4096_nonnegative", format="q4_k", ops=("matmul",),
               inputs={"blocks": blocks.reshape(8, -1)}, params={"rows": 8, "n": 4096},
               clauses=("Q4K-3.1", "QF-4.6"), features=("d:random_bits", "x:nonnegative", "k:4096"))


def _signed_zero_case() -> Case:
    """Negative and -0 ``d``, positive ``dmin``; sub-blocks 0 and 2 hold codes 0 and m = 0 (sub-block 4 m = 0
    too): ``dj * q`` is -0.0 there and ``mj = +0``, so ``y = -0 - +0`` is -0.0 (KC-2.4); a decoder adding a zero
    matrix flips it."""
    case_id = "q4_k/read/signed_zeros_negative_d"
    rng = _rng(case_id)
    blk = _blocks(case_id, "negative").reshape(-1, BLOCK_BYTES)
    nb = blk.shape[0]
    blk[::2, 0:2] = _fp16_bytes(np.full(nb // 2, -0.0, np.float16))
    blk[:, 2:4] = _fp16_bytes(rng.uniform(2.0 ** -10, 1.0, nb).astype(np.float16))    # dmin > 0: mj = +0 where m = 0
    sc, m = rng.integers(1, 64, (nb, 8), dtype=np.uint8), rng.integers(0, 64, (nb, 8), dtype=np.uint8)
    m[:, [0, 2, 4]] = 0
    blk[:, SCALES_OFFSET:SCALES_OFFSET + 12] = pack_scales(sc, m)
    qs = blk[:, SCALES_OFFSET + 12:].reshape(nb, 4, 32)
    qs[:, 0:2] &= 0xF0                          # low nibbles of chunks 0 and 1: sub-blocks 0 and 2 all code 0
    return Case(id=case_id, format="q4_k", ops=("dequantize",), inputs={"blocks": blk.reshape(ROWS, -1)},
                params={"rows": ROWS, "n": N}, clauses=("KC-2.4", "Q4K-3.1", "Q4K-3.2"),
                features=("d:negative", "zeros:signed"))


# (name, clause, description): one non-conforming input per MUST-reject rule of Q4K-5 (KC-4.2)
INVALID = (
    ("blocks_int8", "Q4K-5.1", "blocks as int8, not uint8"),
    ("row_bytes", "Q4K-5.2", "rows of 288 bytes for n = 256 (two blocks where one is due)"),
    ("n_not_multiple", "Q4K-5.3", "n = 320, not a multiple of 256"),
)


def _invalid_cases() -> Iterator[Case]:
    for name, clause, description in INVALID:
        blocks = _blocks(f"q4_k/invalid/{name}", "random_bits")
        rows, n = ROWS, N
        if name == "blocks_int8":
            blocks = blocks.view(np.int8)
        elif name == "row_bytes":
            n = 256
        else:
            n = 320
        yield Case(id=f"q4_k/read/invalid/{name}", format="q4_k", ops=("dequantize", "matmul"),
                   inputs={"blocks": blocks}, params={"rows": rows, "n": n}, clauses=(clause, "KC-4.2"),
                   features=("input:nonconforming",), expect="reject",
                   aux={"nominal_shape": np.array([rows, n], np.int64)},
                   description=f"non-conforming: {description} ({clause})")


# Encoder inputs, after the golden set's categories (fixtures/third_party/llama.cpp/q4_k).
def _x(kind: str, rng: np.random.Generator) -> np.ndarray:
    shape = (ROWS, N)
    if kind == "gaussian":
        return rng.normal(0, 1, shape)
    if kind == "gaussian_outliers":
        x = rng.normal(0, 0.02, shape)
        x[rng.random(shape) < 0.01] *= 200
        return x
    if kind == "all_positive":
        return rng.exponential(0.1, shape)
    if kind == "all_negative":
        return -rng.exponential(0.1, shape)
    if kind == "zeros":
        x = rng.normal(0, 1, shape)
        x[:, :QK_K] = 0.0
        x[:, QK_K:QK_K + 32] = -0.0
        return x
    if kind == "constants":
        return np.repeat(rng.normal(0, 1, (ROWS, N // 32, 1)), 32, axis=2).reshape(shape)
    if kind == "tiny":
        return rng.normal(0, 2.0 ** -20, shape)
    return rng.normal(0, 1000.0, shape)        # "huge": large but valid scales


X_KINDS = ("gaussian", "gaussian_outliers", "all_positive", "all_negative", "zeros", "constants", "tiny", "huge")


def _quantize_cases() -> Iterator[Case]:
    for kind in X_KINDS:
        case_id = f"q4_k/quantize/{kind}"
        x = _x(kind, _rng(case_id)).astype(np.float32)
        yield Case(id=case_id, format="q4_k", ops=("quantize",), inputs={"x": x}, params={},
                   clauses=("Q4K-4.3", "Q4K-5.4", "Q4K-6.3"), features=(f"x:{kind}",))


def cases() -> Iterator[Case]:
    """Every reference-made q4_K case, in a fixed order."""
    yield from _read_cases()
    yield from _invalid_cases()
    yield from _quantize_cases()


def reference(case: Case) -> np.ndarray:
    """Decoder cases: ``dequantize_row_q4_K``'s float32 ``(rows, n)``; encoder cases: the reference bytes.
    A real tool's case carries its own expected values (llama.cpp's output)."""
    if "expected" in case.aux:
        return case.aux["expected"]
    if "quantize" in case.ops:
        return quantize(case.inputs["x"])
    return dequantize(case.inputs["blocks"])


def judge_quantize(case: Case, op: str, arrays: dict[str, np.ndarray], kind: str) -> tuple[str, str]:
    """An encoder's answer: the reference bytes are the reference-equivalent level (Q4K-6.2), even where
    they are invalid for non-finite or huge input (informative cases, Q4K-4.5); other valid blocks
    (Q4K-5) conform (Q4K-6.3); quality is informative (a warning, never a failure)."""
    return judge_blocks(case, arrays, kind, reference(case),
                        check=lambda b: check_blocks(b, tensor="blocks", finite=True), decode=dequantize,
                        equivalent="quantize_row_q4_K_ref (reference-equivalent, Q4K-6.2)", conforming="Q4K-6.3")


# -- named readings and known misreadings (spec/kernels.md KC-4.5, KC-5) -------------------------------


def readings(case: Case) -> tuple[str, str, dict[str, tuple[str, np.ndarray]]] | None:
    """Blocks with inf/NaN ``d`` or ``dmin`` (Q4K-5.4): a decoder may reject them or evaluate Q4K-3.1 on
    them, as llama.cpp's ``dequantize_row_q4_K`` does (Q4K-3.3)."""
    if "d:nonfinite" not in case.features or "quantize" in case.ops:
        return None
    return "nonfinite_scales", "Q4K-5.4", {"evaluation": ("Q4K-3.1 evaluated as written, inf * 0 = NaN included, "
                                                          "as ggml's dequantize_row_q4_K (Q4K-3.3)", reference(case))}


def _decode_with(blocks: np.ndarray, *, plus_min: bool = False, pairs: bool = False) -> np.ndarray:
    from .codec import unpack_codes, unpack_scales

    blk = blocks.reshape(-1, BLOCK_BYTES)
    d = np.ascontiguousarray(blk[:, 0:4]).view("<f2").astype(np.float32)
    sc, m = unpack_scales(blk[:, SCALES_OFFSET:SCALES_OFFSET + 12])
    qs = blk[:, SCALES_OFFSET + 12:]
    if pairs:                                   # consecutive nibbles (q4_0's order), not 32-byte chunks
        q = np.stack([qs & 15, qs >> 4], axis=-1).reshape(-1, QK_K)
    else:
        q = unpack_codes(qs).reshape(-1, QK_K)
    dj = np.repeat(d[:, 0:1] * sc.astype(np.float32), 32, axis=1)
    mj = np.repeat(d[:, 1:2] * m.astype(np.float32), 32, axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        y = dj * q.astype(np.float32) + (mj if plus_min else -mj)
    return y.reshape(blocks.shape[0], -1)


def misreadings(case: Case) -> Iterator[tuple[str, str, np.ndarray]]:
    """(clause, what the subject did, W) of known wrong q4_K decodes (KC-5)."""
    if case.expect != "values" or "quantize" in case.ops:
        return
    blocks = case.inputs["blocks"]
    yield "Q4K-3.1", "q * scale + min, the min's sign flipped (torchao's prototype 'GGUF Q4_K')", _decode_with(blocks, plus_min=True)
    yield "Q4K-1.5", "codes read as consecutive nibble pairs (q4_0's order), not 32-byte chunks", _decode_with(blocks, pairs=True)
