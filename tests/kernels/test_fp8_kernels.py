"""reference_kernels.fp8 against the NumPy codec, in the interpreter (TRITON_INTERPRET=1 on the CPU).

Called in process (no runner, no subprocess: the interpreter is slow enough): every conforming case of the
three subject formats decodes to the reference bit for bit, every must-reject case is refused with the
reference's own error (KC-4.2), matmul stays within the QF-4.6 bound, and a hypothesis property holds the
kernel to ``qformats.formats.fp8.dequantize`` (FP8-5.1) rounded to the dtype on layouts beyond the matrix. The
prepared path runs the whole matrix through the runner in test_prepared.py (KC-7).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.fp8")   # before triton: it selects the interpreter without a GPU

from conformance import compare  # noqa: E402
from conformance.runner import matmul_input  # noqa: E402
from qformats import elements  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats import fp8  # noqa: E402
from qformats.formats.fp8 import cases as fp8_cases  # noqa: E402
from qformats.layers import round_to  # noqa: E402
from reference_kernels import fp8 as kfp8  # noqa: E402

CASES = list(fp8_cases.cases())
VALUES = [c for c in CASES if c.expect == "values"]
REJECT = [c for c in CASES if c.expect == "reject"]


def _strategy(case) -> str:
    return case.format.removeprefix("fp8_")


def _same_bits(got: np.ndarray, ref: np.ndarray) -> bool:
    """Same dtype, shape and bits: the sign of zero counts (KC-2.4)."""
    return got.dtype == ref.dtype and got.shape == ref.shape and np.array_equal(got.view(np.uint8), ref.view(np.uint8))


def test_every_conforming_case_decodes_to_the_reference_bit_for_bit():
    """FP8-9.1, KC-2.3: each of the 30 conforming cases (every E4M3FN byte, ragged grids, three scale and three
    output dtypes) through the public entry points equals the reference, bfloat16 as float32 holding its values."""
    bad = [c.id for c in VALUES if not _same_bits(getattr(kfp8, f"dequantize_{_strategy(c)}")(**c.inputs, **c.params),
                                                  fp8_cases.reference(c))]
    assert not bad and len(VALUES) == 30, bad


def test_every_byte_decodes_to_the_element_table():
    """FE-2.3: with a scale of 1.0 in float32 the kernel's bit arithmetic gives every non-NaN E4M3FN value of the
    table (subnormals 2^-9 .. 7 * 2^-9, -0 at 0x80, +-448 at 0x7E, 0xFE)."""
    codes = np.array([c for c in range(256) if c not in (0x7F, 0xFF)], np.uint8).reshape(2, 127)
    w = kfp8.dequantize_tensor(weight=codes, weight_scale=np.ones(1, np.float32), block_size=[2, 127],
                               dtype="float32")
    assert _same_bits(w, elements.table(elements.E4M3FN)[codes])
    assert w[0, 1] == 2.0 ** -9 and w[0, 0x7E] == 448 and np.signbit(w[1, 0]) and w[1, 0] == 0


@pytest.mark.parametrize("case", REJECT, ids=[c.id for c in REJECT])
def test_each_invalid_case_is_refused_with_the_reference_error(case):
    """KC-4.2, KC-7.1: the kernel's prepare raises exactly the reference's QFormatsError (code, clause, tensor,
    value) before any launch."""
    with pytest.raises(QFormatsError) as ours:
        fp8_cases.checked_call(case.format, **case.inputs, **case.params)
    with pytest.raises(QFormatsError) as kernel:
        getattr(kfp8, f"dequantize_{_strategy(case)}")(**case.inputs, **case.params)
    e, r = kernel.value, ours.value
    assert (e.code, e.clause, e.tensor, e.actual) == (r.code, r.clause, r.tensor, r.actual) and e.clause == \
        case.clauses[0]


@pytest.mark.parametrize("case", VALUES[::4], ids=[c.id for c in VALUES[::4]])
def test_matmul_is_within_the_forward_error_bound(case):
    """QF-4.6: x @ W.T of float16 x against the reference W (tensor-core float16 W allowed, w_rounding)."""
    x = matmul_input(case, case.inputs["weight"].shape[1])
    y = getattr(kfp8, f"matmul_{_strategy(case)}")(**case.inputs, **case.params, x=x)
    judged = compare.within_bound(y, y.dtype.name, x, fp8_cases.reference(case), w_rounding=True)
    assert y.shape == (x.shape[0], case.inputs["weight"].shape[0]) and judged.ok, judged.detail


def test_torch_in_bfloat16_out():
    """KC-1.11: torch tensors in, a torch tensor of the requested dtype out (bfloat16 stays bfloat16); a
    bfloat16 scale tensor is read as the exact float32 it widens to."""
    case = next(c for c in VALUES if c.id == "fp8_block/read/random_129x128_b128x128_bf16_to_bf16")
    t = {k: torch.from_numpy(np.array(v)) for k, v in case.inputs.items()}
    t["weight_scale"] = t["weight_scale"].to(torch.bfloat16)             # its values are bfloat16's
    w = kfp8.dequantize_block(**t, **case.params)
    assert w.dtype == torch.bfloat16 and np.array_equal(w.float().numpy(), fp8_cases.reference(case))


@st.composite
def layers(draw):
    """A random FP8 layer of any strategy, ragged shapes and blocks, scales of any dtype the writers use."""
    strategy = draw(st.sampled_from(kfp8.STRATEGIES))
    n, k = draw(st.integers(1, 70)), draw(st.integers(1, 70))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    block = (draw(st.integers(1, 40)), draw(st.integers(1, 40))) if strategy == "block" else None
    codes = rng.integers(0, 256, (n, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x00
    shape = fp8.grid(n, k, strategy, block=block)
    scale = np.exp2(rng.uniform(-20, 8, shape)).astype(np.float32)   # 448 * 2^8 passes float16
    scale = scale.astype(np.float16) if draw(st.booleans()) else scale
    cell = {"tensor": [n, k], "channel": [1, k]}.get(strategy) or list(block)
    return strategy, codes, scale, cell, draw(st.sampled_from(fp8_cases.DTYPES))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")   # the interpreter's float16 inf
@settings(max_examples=20, deadline=None)
@given(layers())
def test_kernel_equals_the_codec_on_random_layers(layer):
    """FP8-5.1, FP8-9.1: the kernel equals the NumPy codec's float32 decode rounded once to the dtype (float16
    by NumPy's cast, bfloat16 by round_to) on random shapes, blocks and scales, overflow to inf included."""
    strategy, codes, scale, cell, dtype = layer
    got = getattr(kfp8, f"dequantize_{strategy}")(weight=codes, weight_scale=scale, block_size=cell, dtype=dtype)
    v = fp8.dequantize({"weight": codes, "weight_scale": scale}, strategy=strategy,
                       block=tuple(cell) if strategy == "block" else None)
    with np.errstate(over="ignore"):
        want = v.astype(np.float16) if dtype == "float16" else round_to(v, dtype)
    assert _same_bits(got, want)
