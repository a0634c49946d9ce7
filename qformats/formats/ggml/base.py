"""One GGUF block type: its codec, its validity fields and its encoders (spec/ggml.md, GGML-2).

Every ggml type that qformats checks is one :class:`BlockType`, declared by its family's module
(``legacy.py``, ``kquants_*.py``, ``iq*.py``, ...) the way gguf-py's ``quants.py`` declares one class
per type. Block geometry is never restated here: it comes from :mod:`qformats.containers.ggml_types`,
the one table of ``block_size`` / ``type_size``. The functions a type provides work on whole blocks,
vectorized over them; the row-level entry points (:func:`qformats.formats.ggml.dequantize`,
``quantize``, ``check_blocks``) reshape, check limits and dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ...containers.ggml_types import GGML_TYPES, GGMLType

__all__ = ["BlockType", "fp16_field", "F32"]

F32 = np.float32

_BY_NAME: dict[str, GGMLType] = {t.name.lower(): t for t in GGML_TYPES.values()}

Decode = Callable[[np.ndarray], np.ndarray]
Scales = Callable[[np.ndarray], Mapping[str, np.ndarray]]
Quantize = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]


@dataclass(frozen=True)
class BlockType:
    """What qformats knows of one ggml type (spec/ggml.md GGML-2).

    ``name``: ggml's type name in lower case (``q6_k``, ``iq4_xs``, ``bf16``), also its conformance
    subject format. ``clause``: the spec section that defines it (``KQ-6``).

    ``decode(blk)``: uint8 ``(nb, type_size)`` blocks -> float32 ``(nb, block_size)``, bit-identical to
    ggml's ``dequantize_row_*`` (``to_float``), non-finite scales evaluated as ggml evaluates them.

    ``scales(blk)``: the fields ``ggml_validate_row_data`` checks, by name (``{"d": ..., "dmin": ...}``),
    each an ``(nb, k)`` float array of the values as decoded; a non-finite value makes the block
    invalid (GGML-3.1). Plain float types return their elements. ``never_negative``: the names among
    them that no ggml encoder of this type writes below zero (GGML-3.2: a warning, not an error).
    ``fp16_offsets``: field name -> byte offset of each float16 scale field inside a block, for
    test-case generators and mutants that force scale classes.

    ``quantize(x, importance)``: float32 ``(rows, n)`` (``n`` a multiple of ``block_size``) and a
    float32 ``(n,)`` importance vector or None -> uint8 ``(rows, n // block_size * type_size)``,
    byte-identical to ggml's ``quantize_<type>(src, dst, rows, n, imatrix)``. None where qformats has
    no reference encoder (the spec says the encoder is informative, and why). ``importance``: whether
    the encoder has an importance path (``quantize`` refuses an importance vector otherwise);
    ``requires_importance``: ggml refuses to encode without one (``ggml_quantize_requires_imatrix``).
    """

    name: str
    clause: str
    decode: Decode
    scales: Scales
    never_negative: tuple[str, ...] = ()
    fp16_offsets: Mapping[str, int] | None = None
    quantize: Quantize | None = None
    importance: bool = False
    requires_importance: bool = False
    informative: bool = False     # specified for reference only (q8_1, q8_K): never found in model files
    plain: bool = False           # a plain element type (F32, F16, BF16, F64, I8..I64): block_size 1
    out_dtype: str = "float32"    # what decode returns: float32 for every block type
    # Types whose super-scale is not a float16 at a fixed offset (iq1_m's spread nibbles, mxfp4's E8M0):
    # ``set_scale(blk, fp16_values)`` writes float16 values of a case class into (nb, type_size) blocks in
    # place, as near as the field can hold them; cases use it like fp16_offsets (GGML-5.1).
    set_scale: Callable[[np.ndarray, np.ndarray], None] | None = None
    bits: int | None = None       # nominal bits of one weight's code (inspect's "bits"); None for plain types
    group: int | None = None      # weights sharing one (sub-block) scale (inspect's "gs")
    # The ggml version qformats judges the type against where the pinned oracle (0.10.1) lacks it (q2_0:
    # "0.25.3", llama.cpp's ggml, tests/llama_cpp/); None: the pinned oracle has it (spec/ggml.md type table).
    since: str | None = None

    @property
    def ggml(self) -> GGMLType:
        """The type's id and geometry from the one table (containers/ggml_types.py)."""
        return _BY_NAME[self.name]

    @property
    def block_size(self) -> int:
        return self.ggml.block_size

    @property
    def type_size(self) -> int:
        return self.ggml.type_size


def fp16_field(blk: np.ndarray, offset: int, count: int = 1) -> np.ndarray:
    """``count`` little-endian float16 values at byte ``offset`` of every block, as float32 ``(nb, count)``.

    ggml widens float16 exactly (``GGML_FP16_TO_FP32``), so the float32 values are the stored ones.
    """
    raw = np.ascontiguousarray(blk[:, offset:offset + 2 * count])
    return raw.view("<f2").astype(F32)
