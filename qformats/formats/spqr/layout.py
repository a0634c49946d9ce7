"""SpQR release layout: geometry, tensor specs, the config model and the frozen layer (spec/spqr.md).

The release layout (spqr_quant 0.2.0, HuggingFace ``quant_method: "spqr"``) holds four 1-D tensors
per linear layer of m outputs and n inputs, all in *permuted* column space::

    dense_weights  int64  [m*n/16]          one word per (16x16 tile, row in tile)   SPQR-2
    row_offsets    int32  [m+1] | [m/16+1]  CSR or PTCSR, told apart by length only SPQR-3
    col_vals       int32  [entries]         fp16 bits << 16 | column                SPQR-3
    in_perm        int32  [n/2]             uint16 pairs perm[2i] | perm[2i+1] << 16 SPQR-4
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ...errors import fail
from ...tensors import Layer, TensorSpec

__all__ = [
    "SPEC_VERSION", "BITS", "TILE", "MAX_N", "SIGNED_COLUMN_LIMIT", "TENSOR_NAMES", "DTYPES",
    "SpQRConfig", "SpQRLayerParams", "SpQRLayer", "tensor_specs", "dim_arg", "check_dims", "SCHEMA_MODELS",
]

SPEC_VERSION = "0.1.0"

BITS = 3                       # SPQR-2.1: the release layout is 3-bit only
TILE = 16                      # beta1 = beta2 = 16: tiles of 16 rows x 16 permuted columns
MAX_N = 1 << 16                # in_perm holds uint16 indices
SIGNED_COLUMN_LIMIT = 1 << 15  # spqr_quant reads columns as signed int16 (SPQR-7.1)

# one 64-bit word of dense_weights, from bit 0 up (SPQR-2.2); bits 0..2 hold the first-level scale code
Z_SHIFT = BITS                 # bits 3..5    first-level zero code
Q_SHIFT = 2 * BITS             # bits 6..53   sixteen weight codes, 3 bits each
SO_SHIFT = Q_SHIFT + TILE * BITS   # bits 54..61  one byte of the tile's second-order word
RESERVED_SHIFT = SO_SHIFT + 8      # bits 62..63  reserved, zero

TENSOR_NAMES = ("dense_weights", "row_offsets", "col_vals", "in_perm")

# dtypes a reader accepts, the spec's own first: int64 in_perm is SpQR PR #47's variant (SPQR-7.3);
# float32[0] col_vals (SPQR-7.2) is allowed by the checks only when empty and CSR
DTYPES: dict[str, tuple[str, ...]] = {"dense_weights": ("int64",), "row_offsets": ("int32",),
                                      "col_vals": ("int32",), "in_perm": ("int32", "int64")}


def tensor_specs(m: int, n: int, entries: int, *, sparse: Literal["csr", "ptcsr"] = "csr") -> tuple[TensorSpec, ...]:
    """The four tensors of one layer in the spec's form (SPQR-2.1, SPQR-3.1, SPQR-4.1).

    ``entries`` is the length of ``col_vals``: nnz for CSR, 16 * sum of block widths for PTCSR.
    """
    lengths = {"dense_weights": m * n // TILE, "row_offsets": m + 1 if sparse == "csr" else m // TILE + 1,
               "col_vals": entries, "in_perm": n // 2}
    return tuple(TensorSpec(name=k, dtype=DTYPES[k][0], shape=(lengths[k],)) for k in TENSOR_NAMES)


def dim_arg(name: str, value: Any) -> int | None:
    """A caller's ``m`` / ``n``: None or an integer (bool, float and str are refused)."""
    if value is None or (isinstance(value, (int, np.integer)) and not isinstance(value, bool)):
        return None if value is None else int(value)
    raise fail("argument.invalid", name, "an integer or None", value)


def check_dims(m: int, n: int, tensor: str, code: str = "spqr.dims") -> None:
    """m and n positive multiples of 16 with n <= 65536, the only shapes the layout holds (SPQR-2.1)."""
    if m <= 0 or n <= 0 or m % TILE or n % TILE or n > MAX_N:
        raise fail(code, tensor, f"of shape (m, n) with m, n positive multiples of {TILE} and n <= {MAX_N}",
                   (m, n))


class SpQRConfig(BaseModel):
    """``quantization_config`` of a HuggingFace SpQR checkpoint (SPQR-6).

    ``beta1`` is the statistics group (rows) and ``beta2`` the weight group (columns): the release
    code's names, swapped relative to the paper (SPQR-7.6). ``shapes`` maps
    ``"<module>.<tensor>.shape"`` to the 1-D length of that tensor.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = SPEC_VERSION

    quant_method: Literal["spqr"]
    bits: Literal[3] = 3
    beta1: Literal[16] = 16
    beta2: Literal[16] = 16
    shapes: dict[str, int] = Field(description="required: HF builds its placeholders from it (SPQR-6.1)")
    modules_to_not_convert: list[str] | None = None
    linear_weights_not_to_quantize: list[str] | None = Field(
        default=None, description="name used before SpQR PR #52; same meaning as modules_to_not_convert")

    def not_converted(self) -> list[str]:
        """Parameter names kept in float16, whichever key spelled them."""
        return list(self.modules_to_not_convert or self.linear_weights_not_to_quantize or [])

    def module_lengths(self, module: str) -> dict[str, int] | None:
        """The four declared tensor lengths of ``module``, or None when the config lists none."""
        got = {t: self.shapes.get(f"{module}.{t}.shape") for t in TENSOR_NAMES}
        return None if all(v is None for v in got.values()) else got  # type: ignore[return-value]


class SpQRLayerParams(BaseModel):
    """Dimensions of one release layer; what a reader needs beside the four tensors."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    spec_version: ClassVar[str] = SPEC_VERSION

    m: int = Field(gt=0, multiple_of=TILE, description="out_features (rows)")
    n: int = Field(gt=0, multiple_of=TILE, le=MAX_N, description="in_features (columns)")
    sparse: Literal["csr", "ptcsr"] = "csr"


class SpQRLayer(Layer):
    """A validated release-layout layer: ``dense_weights``, ``row_offsets``, ``col_vals``, ``in_perm``.

    Construction runs :func:`qformats.formats.spqr.checks.check_layer`; params ``m``, ``n`` and
    ``sparse`` ("csr" | "ptcsr") are inferred from the tensors when not given.
    """

    __slots__ = ()

    def __init__(self, tensors: Mapping[str, Any], *, m: int | None = None, n: int | None = None,
                 config: SpQRConfig | Mapping[str, Any] | None = None, module: str | None = None) -> None:
        from .checks import _validate  # checks imports this module

        arrays, params = _validate(tensors, m=m, n=n, config=config, module=module)
        super().__init__(arrays, **params)


SCHEMA_MODELS = (SpQRConfig, SpQRLayerParams)
