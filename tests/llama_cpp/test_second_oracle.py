"""Issue 19 item 5: llama.cpp's newer ggml (0.25.3, from the llama-cpp-python 0.3.36 sdist) as a second
oracle. Its decoders and its reference and importance encoders must agree with qformats (and so with the
pinned ggml 0.10.1, which tests/ggml/test_oracle.py holds qformats to) on every type: if ggml changes
a type's bytes between versions, this is where it shows, and the spec must record the change."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_tools import LLAMA, SKIP_REASON, newer_ggml, seeded_rng  # noqa: E402
from qformats.formats import ggml  # noqa: E402
from qformats.formats.ggml.cases import SCALE_CLASSES, random_blocks, subject_types  # noqa: E402

pytestmark = pytest.mark.skipif(not LLAMA, reason=SKIP_REASON)

TYPES = [bt.name for bt in subject_types()] + ["q4_k"]
ENCODED = [n for n in TYPES if ggml.TYPES[n].quantize is not None]


@pytest.fixture(scope="module")
def newer():
    return newer_ggml()


@pytest.mark.parametrize("name", TYPES)
def test_newer_ggml_decodes_every_type_as_qformats_does(newer, name):
    """GGML-2.2 across ggml versions: random bytes of every super-scale class, bit for bit."""
    bt = ggml.TYPES[name]
    for scale_class in SCALE_CLASSES:
        blocks = random_blocks(bt, seeded_rng(name, scale_class), 16, 512, scale_class)
        ours, theirs = ggml.dequantize(name, blocks), newer.dequantize(name, blocks)
        assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), scale_class


@pytest.mark.parametrize("name", ENCODED)
def test_newer_ggml_encodes_every_type_as_qformats_does(newer, name):
    """GGML-4.4 across ggml versions: the reference path, and the importance path where the type has one."""
    bt = ggml.TYPES[name]
    rng = seeded_rng("encode", name)
    x = (rng.standard_normal((32, 512)) * 10.0 ** rng.uniform(-3, 3, (32, 1))).astype(np.float32)
    x[::7] = 0.0
    x[3, ::5] = (rng.integers(-16, 16, x[3, ::5].shape) + 0.5) / 8
    w = rng.gamma(2.0, 1.0, 512).astype(np.float32)
    if not bt.requires_importance:
        assert np.array_equal(ggml.quantize(name, x), newer.quantize(name, x))
    if bt.importance:
        assert np.array_equal(ggml.quantize(name, x, importance=w), newer.quantize(name, x, importance=w))
