"""reference_kernels q8_0, q6_k, q5_k: the Triton kernels against the NumPy reference (TRITON_INTERPRET=1
on the CPU).

Every entry point passes its whole conformance matrix (GGML-5: the runner, as any subject, every scale
class); hypothesis properties cover row counts and lengths beyond the matrix: dequantize is the
reference (GGML-2.2) rounded to float16 bit for bit, -0.0 included; matmul stays within the QF-4.6
bound, on the float16-W path (small scales) and the float32-W path (any finite float16 scale).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.q8_0")   # before triton: it selects the interpreter without a GPU

from conformance import compare, run_kernel  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats import ggml  # noqa: E402
from reference_kernels import q5_k, q6_k, q8_0  # noqa: E402

KERNELS = {"q8_0": q8_0, "q6_k": q6_k, "q5_k": q5_k}
ENTRIES = [(f"reference_kernels.{fmt}:{op}", fmt, op) for fmt in KERNELS for op in ("dequantize", "matmul")]
LENGTHS = {"q8_0": [32, 96, 288, 512], "q6_k": [256, 512, 768], "q5_k": [256, 512, 768]}


@pytest.mark.parametrize(("entry", "fmt", "op"), ENTRIES, ids=[e[0].split(".")[1] for e in ENTRIES])
def test_kernel_passes_its_whole_matrix(entry, fmt, op, public_cases):
    """GGML-5: the conformance runner passes every ggml Triton kernel 100 %, every scale class of
    GGML-2.3 / GGML-3.1 / GGML-3.2 / GGML-3.4 included (non-finite scales evaluated as ggml does)."""
    result = run_kernel(entry, fmt=fmt, op=op, jobs=1, timeout=300, pattern=public_cases(fmt, op))
    bad = [(c.id, c.status, c.detail[:200]) for c in result.cases if c.status != "pass"]
    assert not bad and result.cases, bad[:3]


def _blocks(fmt: str, rng: np.random.Generator, rows: int, n: int, scales: str) -> np.ndarray:
    """Random bytes with every float16 super-scale finite: small (|s| < 0.1, the float16-W matmul path)
    or any finite float16 bit pattern (subnormals, -0.0, 65504: mostly the float32-W path)."""
    bt = ggml.TYPES[fmt]
    nb = rows * n // bt.block_size
    blk = rng.integers(0, 256, (nb, bt.type_size), dtype=np.uint8)
    for offset in bt.fp16_offsets.values():
        if scales == "small":
            bits = rng.uniform(-0.1, 0.1, nb).astype("<f2").view(np.uint16)
        else:
            bits = (rng.integers(0, 0x7C00, nb) | (rng.integers(0, 2, nb) << 15)).astype(np.uint16)
        blk[:, offset:offset + 2] = bits.astype("<u2").view(np.uint8).reshape(nb, 2)
    return blk.reshape(rows, -1)


@st.composite
def layers(draw, fmt: str):
    rows = draw(st.integers(1, 3))
    n = draw(st.sampled_from(LENGTHS[fmt]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return _blocks(fmt, rng, rows, n, draw(st.sampled_from(["small", "finite"]))), rows, n, rng


@pytest.mark.parametrize("fmt", list(KERNELS))
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")   # the interpreter's float16 inf
@settings(max_examples=20, deadline=None)
@given(data=st.data(), batch=st.sampled_from([1, 5, 17]))
def test_kernels_on_random_finite_blocks(fmt, data, batch):
    """GGML-2.2: dequantize is ggml's float32 value rounded once to float16, bit for bit; QF-4.6: matmul
    (batch 1: the gemv kernel; 5 and 17: the tiled one) is within the forward error bound."""
    blocks, rows, n, rng = data.draw(layers(fmt))
    ref = ggml.dequantize(fmt, blocks)
    with np.errstate(over="ignore"):           # |W| past 65504 rounds to inf in float16, as it must
        want = ref.astype(np.float16)
    got = KERNELS[fmt].dequantize(blocks=blocks, rows=rows, n=n)
    assert got.dtype == np.float16 and np.array_equal(got.view(np.uint16), want.view(np.uint16))
    x = rng.uniform(-1, 1, (batch, n)).astype(np.float16)
    y = KERNELS[fmt].matmul(blocks=blocks, rows=rows, n=n, x=x)
    judgement = compare.within_bound(y, "float16", x, ref, w_rounding=True)
    assert y.shape == (batch, rows) and judgement.ok, judgement.detail


@pytest.mark.parametrize("fmt", list(KERNELS))
def test_torch_in_torch_out(fmt):
    """The launchers return the kind they were given: torch tensors stay torch, NumPy stays NumPy."""
    blocks = _blocks(fmt, np.random.default_rng(0), 1, 256, "small")
    out = KERNELS[fmt].dequantize(blocks=torch.from_numpy(blocks), rows=1, n=256)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    x = torch.ones((1, 256), dtype=torch.float16)
    assert isinstance(KERNELS[fmt].matmul(blocks=torch.from_numpy(blocks), rows=1, n=256, x=x), torch.Tensor)
    assert np.array_equal(out.numpy(), KERNELS[fmt].dequantize(blocks=blocks, rows=1, n=256))


@pytest.mark.parametrize("fmt", list(KERNELS))
def test_wrong_geometry_is_refused_before_launch(fmt):
    """GGML-1.2: n a positive multiple of the block size; GGML-1.1: blocks uint8 (rows, n // block_size *
    type_size). The kernels would read past the blocks otherwise, so they raise first."""
    bt = ggml.TYPES[fmt]
    blocks = np.zeros((2, 512 // bt.block_size * bt.type_size), np.uint8)
    with pytest.raises(QFormatsError) as exc:
        KERNELS[fmt].dequantize(blocks=blocks, rows=2, n=512 + bt.block_size // 2)
    assert exc.value.code == "ggml.n.not_multiple"
    with pytest.raises(QFormatsError) as exc:
        KERNELS[fmt].matmul(blocks=blocks[:, :-1], rows=2, n=512, x=np.zeros((1, 512), np.float16))
    assert exc.value.code == "ggml.blocks.shape"
