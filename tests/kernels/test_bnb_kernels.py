"""reference_kernels.bnb against the NumPy reference codec (TRITON_INTERPRET=1 on the CPU).

The validating entry point passes a sample of its conformance matrix (the whole matrix runs through the
prepared path in test_prepared.py). Properties cover layouts beyond the matrix: dequantize is the codec's
value bit for bit in the quant_state's dtype (BNB-3.2, BNB-4.3), matmul stays within the QF-4.6 bound of
those values; hand-worked layers pin the two roundings a GPU could get wrong: bfloat16 ties to even and the
double-quantized scale's multiply and add rounded apart (BNB-4.3).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.bnb")   # before triton: it selects the interpreter without a GPU

from conformance import compare, run_kernel  # noqa: E402
from conformance.subject import SubjectDeclaration  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats.bnb import cases as bnb_cases  # noqa: E402
from qformats.formats.bnb import codec  # noqa: E402
from reference_kernels import bnb as kbnb  # noqa: E402
from reference_kernels import strict  # noqa: E402

# BNB-2.2: FP4 code 3 is 12 / 12 = 1.0 exactly, so W = absmax there
FP4_ONE = 3


def test_dequantize_passes_its_matrix_as_a_validating_decoder(public_cases):
    """BNB-9.2, KC-4.2: every must-reject case refused with its clause and a third of the value cases passed,
    all readings rejected: level validating."""
    result = run_kernel("reference_kernels.bnb:dequantize", fmt="bnb_4bit", op="dequantize", jobs=1, timeout=300,
                        declaration=SubjectDeclaration(level="validating"),
                        pattern=public_cases("bnb_4bit", "dequantize"))
    bad = [(c.id, c.status, c.detail[:200]) for c in result.cases if c.status != "pass"]
    assert not bad and result.cases, bad[:3]
    level = result.level()
    assert (level["reached"], level["unenforced"]) == ("validating", []) and level["validation_cases"] == 11


@st.composite
def layers(draw):
    """A random layer: either type, any blocksize up to 512, double quantization on or off, ragged (N, K)
    (odd n and K, partial last blocks, blocks spanning rows), absmax of any magnitude."""
    quant_type = draw(st.sampled_from(["nf4", "fp4"]))
    blocksize = draw(st.sampled_from([32, 64, 128, 256, 512]))
    shape = (draw(st.integers(1, 40)), draw(st.integers(1, 150)))
    nested = draw(st.booleans())
    dtype = draw(st.sampled_from(codec.DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = shape[0] * shape[1]
    absmax = (2.0 ** rng.uniform(-20, 8, -(-n // blocksize))).astype(np.float32)
    call = {"packed": codec.pack_codes(rng.integers(0, 16, n + n % 2)), "quant_map": bnb_cases.STORED_MAPS[quant_type],
            "quant_type": quant_type, "blocksize": blocksize, "shape": list(shape), "dtype": dtype}
    if nested:
        codes, nested_absmax, offset = codec.quantize_absmax(absmax)
        call |= {"absmax": codes, "nested_absmax": nested_absmax, "nested_quant_map": codec.dynamic_map(),
                 "nested_offset": np.array([offset], np.float32)}
    else:
        call["absmax"] = absmax
    return call, rng


def _codec(call: dict) -> np.ndarray:
    """The NumPy codec's W: BNB-4.3's scales, then BNB-3.2 (bfloat16 as float32)."""
    scales = codec.scales(call["absmax"], call.get("nested_absmax"), call.get("nested_quant_map"),
                          float(call["nested_offset"][0]) if "nested_offset" in call else None)
    return codec.dequantize_4bit(call["packed"], scales, quant_type=call["quant_type"], blocksize=call["blocksize"],
                                 shape=tuple(call["shape"]), dtype=call["dtype"])


def _same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    """Same shape and dtype (bfloat16 held in float32) and the same bits: the sign of zero counts (KC-2.4)."""
    want_dtype = np.float16 if want.dtype == np.float16 else np.float32
    return got.dtype == want_dtype and got.shape == want.shape and \
        np.array_equal(got.view(f"u{got.itemsize}"), want.astype(want_dtype).view(f"u{got.itemsize}"))


@settings(max_examples=25, deadline=None)
@given(layers())
def test_dequantize_is_the_codec_bit_for_bit(layer):
    """BNB-3.2, BNB-4.3: every code, block and nested block of ragged layers, in each dtype."""
    call, _ = layer
    assert _same_bits(kbnb.dequantize(**call), _codec(call))


@settings(max_examples=12, deadline=None)
@given(layers(), st.sampled_from([1, 5, 17]))
def test_matmul_is_within_the_forward_error_bound(layer, batch):
    """QF-4.6 for x @ W.T with the codec's W in the quant_state's dtype, on both tile heights (16, 64); the
    prepared call, under the guard that refuses host work (KC-7.2), gives the public entry's bits."""
    call, rng = layer
    w = _codec(call).astype(np.float32)
    x = (rng.uniform(-1, 1, (batch, call["shape"][1])) * 2.0 ** -10).astype(np.float16)
    y = kbnb.matmul(**call, x=x)
    assert y.dtype == np.float16 and y.shape == (batch, call["shape"][0])
    assert compare.within_bound(y, "float16", x, w, w_rounding=False).ok
    assert np.array_equal(strict.bnb_matmul(**call, x=x).view(np.uint16), y.view(np.uint16))


def _fp4_ones(absmax: list[float], dtype: str) -> dict:
    """An FP4 layer of code 3 (1.0, BNB-2.2) only: W = absmax of each block, rounded to ``dtype``."""
    n = 32 * len(absmax)
    return {"packed": codec.pack_codes(np.full(n, FP4_ONE)), "absmax": np.array(absmax, np.float32),
            "quant_map": bnb_cases.STORED_MAPS["fp4"], "quant_type": "fp4", "blocksize": 32, "shape": [len(absmax), 32],
            "dtype": dtype}


def test_bfloat16_rounds_ties_to_even():
    """BNB-3.2: 1 + 2^-8 lies halfway between bfloat16 1.0 and 1.0078125 and rounds to 1.0 (even mantissa);
    1 + 3 * 2^-8 lies halfway between 1.0078125 and 1.015625 and rounds up to 1.015625 (even); 1 + 2^-8 +
    2^-20 is past halfway and rounds up. Truncation (Triton's interpreter cast) would give 1.0, 1.0078125, 1.0."""
    absmax = [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20]
    w = kbnb.dequantize(**_fp4_ones(absmax, "bfloat16"))
    assert w.dtype == np.float32 and w[:, 0].tolist() == [1.0, 1.015625, 1.0078125]
    assert np.array_equal(w, np.repeat(w[:, :1], 32, axis=1))


def test_double_quantized_scale_rounds_product_and_offset_apart():
    """BNB-4.3: f32(f32(map[q] * nested_absmax) + offset), not one fused multiply-add. Map entry 7 set to
    1 + 2^-23 (the map is read as stored, BNB-4.2), nested_absmax 1 - 2^-24, offset 2^-24: the product
    1 + 2^-24 - 2^-47 rounds to 1.0, and 1.0 + 2^-24 is a tie that rounds to even, 1.0. Fused, 1 + 2^-23 - 2^-47
    rounds once, to 1 + 2^-23. W = FP4 code 3 (1.0) times that scale."""
    call = _fp4_ones([0.0], "float32")
    nested_map = codec.dynamic_map()
    nested_map[7] = np.float32(1 + 2.0 ** -23)
    call |= {"absmax": np.array([7], np.uint8), "nested_absmax": np.array([1 - 2.0 ** -24], np.float32),
             "nested_quant_map": nested_map, "nested_offset": np.array([2.0 ** -24], np.float32)}
    w = kbnb.dequantize(**call)
    assert w.dtype == np.float32 and set(w.reshape(-1).tolist()) == {1.0}


def test_torch_inputs_come_back_as_a_tensor_of_the_quant_state_dtype():
    """KC-1.10: W in ``dtype``; a torch caller gets a torch bfloat16 tensor (NumPy callers float32 values)."""
    call = _fp4_ones([1.5, 0.25], "bfloat16")
    t = {k: torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v for k, v in call.items()}
    w = kbnb.dequantize(**t)
    assert isinstance(w, torch.Tensor) and w.dtype == torch.bfloat16 and tuple(w.shape) == (2, 32)
    assert w.float()[:, 0].tolist() == [1.5, 0.25]


@pytest.mark.parametrize("op", ["dequantize", "matmul"])
def test_prepare_refuses_what_the_reference_refuses(op):
    """KC-4.2, KC-7.1: a NaN absmax is refused before launch with the reference's error (BNB-3.4)."""
    call = _fp4_ones([1.0, float("nan")], "float16")
    extra = {"x": np.zeros((1, 32), np.float16)} if op == "matmul" else {}
    with pytest.raises(QFormatsError) as exc:
        getattr(kbnb, op)(**call, **extra)
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("bnb.absmax.nonfinite", "absmax", "nan at [1]")


def test_matmul_rejects_x_of_another_width():
    with pytest.raises(QFormatsError) as exc:
        kbnb.matmul(**_fp4_ones([1.0], "float16"), x=np.zeros((2, 31), np.float16))
    assert (exc.value.code, exc.value.tensor, exc.value.actual) == ("tensor.shape", "x", (2, 31))
