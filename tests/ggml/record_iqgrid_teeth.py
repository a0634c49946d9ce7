"""Record ``iqgrid_teeth_ggml.npz``: what ggml's C code decodes from blocks of the grid i-quants (issue 33 item 3,
``qformats/formats/ggml/iqgrid.py``; spec/ggml_iquants.md IQ-4 .. IQ-10).

    QFORMATS_GGML_LIB=.venv/ggml/libggml-base.so .venv/bin/python tests/ggml/record_iqgrid_teeth.py

For each type ``dec_<type>.blocks``: one row of 32 blocks of random bytes whose float16 super-scale cycles through
zero, both signed zeros, subnormals, negatives, the largest finite, +-inf and NaN (iq1_m's D written into the top
nibbles of its four scale words, IQ-10.1), and ``dec_<type>.expected``: ``dequantize_row_<type>``'s float32 output.
The blocks are built here by rule; the expected arrays come only from ggml. tests/ggml/test_iqgrid_teeth.py reads
the file and checks it against the live library when QFORMATS_GGML_LIB is set.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("iqgrid_teeth_ggml.npz")
SIZE = {"iq2_xxs": 66, "iq2_xs": 74, "iq2_s": 82, "iq3_xxs": 98, "iq3_s": 110, "iq1_s": 50, "iq1_m": 56}
HALVES = np.array([0x3C00, 0x0001, 0x8001, 0x03FF, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01,
                   0x0000, 0x8000, 0x2E66, 0xC4D2, 0x5A1F], np.uint16)
BLOCKS = 32


def decoder_blocks(name: str) -> np.ndarray:
    """(1, 32 * type_size) uint8: random bytes, the super-scale of block i HALVES[i % 16]."""
    size = SIZE[name]
    blk = np.random.default_rng(size).integers(0, 256, (BLOCKS, size), dtype=np.uint8)
    halves = np.resize(HALVES, BLOCKS).astype(np.int64)
    if name == "iq1_m":             # IQ-10.1: nibble w of D is the top nibble of scale word w (byte 49 + 2w)
        for w in range(4):
            blk[:, 49 + 2 * w] = (blk[:, 49 + 2 * w] & 0x0F) | (((halves >> (4 * w)) & 15) << 4)
    else:                           # d: the block's first two bytes, little-endian
        blk[:, 0], blk[:, 1] = halves & 255, halves >> 8
    return blk.reshape(1, -1)


def record(lib_module) -> dict[str, np.ndarray]:
    out = {}
    for name in SIZE:
        blk = decoder_blocks(name)
        out[f"dec_{name}.blocks"] = blk
        out[f"dec_{name}.expected"] = lib_module.dequantize(name, blk)
    return out


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ggml_recording import oracle, write

    lib = oracle()
    with np.errstate(all="ignore"):
        return write(DATA, record(lib), lib)


if __name__ == "__main__":
    sys.exit(main())
