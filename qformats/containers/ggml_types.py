"""The ggml tensor types a GGUF file may name, with their block geometry (spec/containers.md, GGUF-4).

A ggml type stores ``block_size`` consecutive elements of a row in ``type_size`` bytes; a row of
``ne[0]`` elements therefore takes ``ne[0] // block_size * type_size`` bytes and ``ne[0]`` must be a
multiple of ``block_size``. The sizes below are written as field arithmetic so each line reads as the
C struct it describes (``Q4_K``: fp16 d + fp16 dmin + 12 scale bytes + 256 four-bit codes).

Facts from ggml ``include/ggml.h`` (``enum ggml_type``; ids are never reused, removed ids stay gaps)
and gguf-py 0.19.0 ``gguf/constants.py`` (``GGMLQuantizationType``, ``GGML_QUANT_SIZES``); Q2_0 (id 42)
is from ggml 0.25.3 ``include/ggml.h`` and ``src/ggml-common.h`` (``block_q2_0``): gguf-py 0.19.0 and
ggml 0.10.1 end at Q1_0 (41).
Removed ids: 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8), 36-38 (IQ4_NL_4_4/4_8/8_8);
ggml rejects them in GGUF files because their block size is 0.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["QK_K", "GGMLType", "GGML_TYPES", "GGML_REMOVED_TYPE_IDS"]

QK_K = 256  # elements per k-quant super-block
QK4_0 = 32  # elements per legacy-quant block
QK_MXFP4 = 32
QK_NVFP4 = 64   # 4 sub-blocks of QK_NVFP4_SUB = 16, one UE4M3 scale each
QK1_0 = 128
QK2_0 = 64      # ggml 0.25.3 (absent from 0.10.1)


class GGMLType(NamedTuple):
    """One ggml tensor type: id, name, elements per block, bytes per block."""

    type_id: int
    name: str
    block_size: int
    type_size: int

    def row_bytes(self, ne0: int) -> int:
        """Bytes of one row of ``ne0`` elements (``ne0`` a multiple of ``block_size``)."""
        return ne0 // self.block_size * self.type_size


_TABLE: tuple[tuple[int, str, int, int], ...] = (
    # id  name        block     bytes per block
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", QK4_0, 2 + QK4_0 // 2),                                   # d, 32 nibbles
    (3, "Q4_1", QK4_0, 2 + 2 + QK4_0 // 2),                               # d, m, 32 nibbles
    (6, "Q5_0", QK4_0, 2 + 4 + QK4_0 // 2),                               # d, qh[4], nibbles
    (7, "Q5_1", QK4_0, 2 + 2 + 4 + QK4_0 // 2),                           # d, m, qh[4], nibbles
    (8, "Q8_0", QK4_0, 2 + QK4_0),                                        # d, 32 int8
    # ggml-common.h: fp16 d + fp16 s + 32 int8 = 36. gguf-py 0.19.0 still says 4 + 4 + 32 = 40 (the
    # pre-2024 fp32 d/s struct); ggml's GGUF reader uses sizeof(block_q8_1), so we follow ggml.
    (9, "Q8_1", QK4_0, 2 + 2 + QK4_0),
    (10, "Q2_K", QK_K, 2 + 2 + QK_K // 16 + QK_K // 4),
    (11, "Q3_K", QK_K, 2 + QK_K // 4 + QK_K // 8 + 12),
    (12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K // 2),                           # d, dmin, scales[12], qs[128]
    (13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K // 8 + QK_K // 2),
    (14, "Q6_K", QK_K, 2 + QK_K // 16 + QK_K // 4 + QK_K // 2),
    (15, "Q8_K", QK_K, 4 + QK_K + QK_K // 16 * 2),                        # fp32 d, int8 qs, int16 bsums
    (16, "IQ2_XXS", QK_K, 2 + QK_K // 4),
    (17, "IQ2_XS", QK_K, 2 + QK_K // 4 + QK_K // 32),
    (18, "IQ3_XXS", QK_K, 2 + QK_K // 4 + QK_K // 8),
    (19, "IQ1_S", QK_K, 2 + QK_K // 8 + QK_K // 16),
    (20, "IQ4_NL", QK4_0, 2 + QK4_0 // 2),
    (21, "IQ3_S", QK_K, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    (22, "IQ2_S", QK_K, 2 + QK_K // 4 + QK_K // 16),
    (23, "IQ4_XS", QK_K, 2 + 2 + QK_K // 2 + QK_K // 64),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", QK_K, QK_K // 8 + QK_K // 16 + QK_K // 32),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", QK_K, 2 + 4 * 13),
    (35, "TQ2_0", QK_K, 2 + QK_K // 4),
    (39, "MXFP4", QK_MXFP4, 1 + QK_MXFP4 // 2),                           # e8m0 scale, 32 fp4
    (40, "NVFP4", QK_NVFP4, 4 + QK_NVFP4 // 2),                           # ue4m3 d[4], 64 fp4
    (41, "Q1_0", QK1_0, 2 + QK1_0 // 8),                                  # d, 128 sign bits
    (42, "Q2_0", QK2_0, 2 + QK2_0 // 4),                                  # d, 64 two-bit codes
)

GGML_TYPES: dict[int, GGMLType] = {row[0]: GGMLType(*row) for row in _TABLE}
GGML_REMOVED_TYPE_IDS: frozenset[int] = frozenset({4, 5, 31, 32, 33, 36, 37, 38})
