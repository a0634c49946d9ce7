"""llama.cpp ``q4_K`` block geometry and tensor model (spec/q4_k.md, Q4K-1 .. Q4K-2).

One block holds 256 weights in 144 bytes (4.5 bits per weight), ggml ``block_q4_K``::

    offset  size  field
    0       2     d        fp16 LE  super-block scale of the 6-bit sub-block scales
    2       2     dmin     fp16 LE  super-block scale of the 6-bit sub-block mins
    4       12    scales   8 x (6-bit sc, 6-bit m), packed (see ``codec.unpack_scales``)
    16      128   qs       256 x 4-bit codes, chunk c = bytes 32c..32c+31:
                           low nibbles = weights 64c..64c+31, high nibbles = 64c+32..64c+63
    144

A row of ``n`` weights (``n % 256 == 0``) is ``n // 256`` consecutive blocks; rows never share
a block. Geometry is written as field arithmetic so that it reads like the C struct.
"""

from __future__ import annotations

import operator
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from ...containers.ggml_types import GGML_TYPES, QK_K
from ...errors import fail
from ...tensors import TensorSpec

__all__ = [
    "QK_K",
    "K_SCALE_SIZE",
    "SUB_BLOCK",
    "N_SUB_BLOCKS",
    "BLOCK_BYTES",
    "D_OFFSET",
    "DMIN_OFFSET",
    "SCALES_OFFSET",
    "QS_OFFSET",
    "GGML_TYPE_Q4_K",
    "Q4KTensor",
    "SCHEMA_MODELS",
    "blocks_per_row",
    "row_bytes",
]

# The type id, QK_K and the 144-byte block size are the ggml type table's (containers/ggml_types.py).
_GGML_Q4_K = next(t for t in GGML_TYPES.values() if t.name == "Q4_K")
GGML_TYPE_Q4_K = _GGML_Q4_K.type_id   # enum ggml_type, also the GGUF tensor type id
BLOCK_BYTES = _GGML_Q4_K.type_size    # = 144, static_assert in ggml-common.h
K_SCALE_SIZE = 12               # bytes of packed 6-bit scales and mins (ggml-common.h)
SUB_BLOCK = 32                  # weights per sub-block (one 6-bit scale and one 6-bit min)
N_SUB_BLOCKS = QK_K // SUB_BLOCK

D_OFFSET = 0
DMIN_OFFSET = D_OFFSET + 2
SCALES_OFFSET = DMIN_OFFSET + 2
QS_OFFSET = SCALES_OFFSET + K_SCALE_SIZE
assert QS_OFFSET + QK_K // 2 == BLOCK_BYTES  # noqa: S101 - import-time geometry invariant, not validation


def blocks_per_row(n: int, *, tensor: str = "n") -> int:
    """Blocks in a row of ``n`` weights; ``n`` must be a positive multiple of 256 (Q4K-1.3).

    Any integer type is accepted (``np.int64`` from a shape included); ``bool`` is not a length.
    """
    try:
        value = None if isinstance(n, bool) else operator.index(n)
    except TypeError:
        value = None
    if value is None or value <= 0 or value % QK_K:
        raise fail("q4k.n.not_multiple_of_256", tensor, f"a positive multiple of {QK_K}", n)
    return value // QK_K


def row_bytes(n: int, *, tensor: str = "n") -> int:
    """Bytes of one row of ``n`` weights: ``n // 256 * 144``."""
    return blocks_per_row(n, tensor=tensor) * BLOCK_BYTES


class Q4KTensor(BaseModel):
    """A q4_K weight matrix of ``rows`` rows of ``n`` weights (GGUF ``ne = [n, rows]``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = "0.1"

    format: Literal["q4_k"] = "q4_k"
    rows: int = Field(ge=0, description="number of rows (out_features; GGUF ne[1])")
    n: int = Field(gt=0, multiple_of=QK_K, description="weights per row (in_features; GGUF ne[0])")

    def tensor_specs(self, name: str = "blocks") -> tuple[TensorSpec, ...]:
        """The one on-disk tensor: uint8 ``(rows, n // 256 * 144)``."""
        return (TensorSpec(name=name, dtype="uint8", shape=(self.rows, row_bytes(self.n))),)


SCHEMA_MODELS = (Q4KTensor,)
