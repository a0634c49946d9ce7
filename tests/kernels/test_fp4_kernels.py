"""reference_kernels.fp4 against the NumPy codec (TRITON_INTERPRET=1 on the CPU): NVFP4 and MXFP4 (spec/fp4.md
FP4-3.1, FP4-3.7, spec/kernels.md KC-1.12).

The whole conformance matrix runs through the prepared path in tests/kernels/test_prepared.py; here seeded random
layers beyond the matrix (every scale byte class, odd rows, experts, bfloat16 ties) decode to the codec's values
bit for bit, the matmul stays within the QF-4.6 bound on both of its paths, and the public entry points refuse
every non-conforming case with the reference's own error (KC-4.2)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("reference_kernels.fp4")   # before triton: it selects the interpreter without a GPU

from conformance import compare  # noqa: E402
from qformats.errors import QFormatsError  # noqa: E402
from qformats.formats.fp4 import cases as fp4_cases  # noqa: E402
from qformats.formats.fp4 import codec  # noqa: E402
from reference_kernels import fp4 as kfp4  # noqa: E402


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, np.float32)).view(np.uint32)


def _nvfp4_layer(rng, n: int, k: int, g: float | None = None) -> dict:
    """Random codes, scale bytes over all of UE4M3's values (0x00 .. 0x7E) and a writer's global scale."""
    return {"weight_packed": rng.integers(0, 256, (n, k // 2), dtype=np.uint8),
            "weight_scale": rng.integers(0, 0x7F, (n, k // 16), dtype=np.uint8),
            "weight_global_scale": np.array([g if g is not None else 2688 / 10 ** rng.uniform(-2, 1)], np.float32)}


def _mxfp4_layer(rng, lead: tuple[int, ...], k: int, low: int = 0, high: int = 0xFF) -> dict:
    return {"weight_packed": rng.integers(0, 256, (*lead, k // 2), dtype=np.uint8),
            "weight_scale": rng.integers(low, high, (*lead, k // 32), dtype=np.uint8)}


@pytest.mark.parametrize("seed", range(6))
def test_nvfp4_dequantize_is_the_codec_bit_for_bit(seed):
    """FP4-3.1: random layers (odd and even rows, every UE4M3 class, a random global scale) decode to the
    codec's bfloat16 values, signed zeros included."""
    rng = np.random.default_rng(seed)
    layer = _nvfp4_layer(rng, int(rng.integers(1, 70)), 16 * int(rng.integers(1, 9)))
    assert np.array_equal(_bits(kfp4.nvfp4_dequantize(**layer)), _bits(codec.nvfp4_dequantize(**layer)))


@pytest.mark.parametrize("lead", [(37,), (1,), (3, 5), (2, 1)], ids=["n37", "n1", "e3_n5", "e2_n1"])
def test_mxfp4_dequantize_is_the_codec_bit_for_bit(lead):
    """FP4-3.7: every E8M0 byte but NaN (2^-127 subnormals, 2^127 overflowing to inf), 2-D and 3-D experts."""
    layer = _mxfp4_layer(np.random.default_rng(len(lead) * 10 + lead[-1]), lead, 96)
    got, ref = kfp4.mxfp4_dequantize(**layer), codec.mxfp4_dequantize(**layer)
    assert got.shape == ref.shape == (*lead, 96) and np.array_equal(_bits(got), _bits(ref))


def _tie_layer() -> dict:
    """An NVFP4 layer whose float32 products include exact bfloat16 ties (low 16 bits 0x8000): every UE4M3 byte
    times every code, under a global scale found by a seeded vectorised search over the eight UE4M3 mantissas
    and the E2M1 mantissas 1 and 1.5 (the product's bits do not depend on the exponents)."""
    g = np.random.default_rng(7).uniform(1, 2, 200_000).astype(np.float32)
    s = (1 + np.arange(8, dtype=np.float32) / 8)[:, None]
    hits = []
    for v in (np.float32(1), np.float32(1.5)):
        w = (v * (s / g).astype(np.float32)).astype(np.float32)
        hits.append(((w.view(np.uint32) & 0xFFFF) == 0x8000).any(axis=0))
    tie = g[np.flatnonzero(hits[0] | hits[1])[0]]
    codes = np.tile(np.arange(16, dtype=np.uint8), (127, 1))
    return {"weight_packed": codec.pack(codes), "weight_scale": np.arange(127, dtype=np.uint8)[:, None],
            "weight_global_scale": np.array([tie], np.float32)}


def test_nvfp4_rounds_bfloat16_ties_to_even():
    """QF-4.3, FP4-3.1: products exactly halfway between two bfloat16 values round to the even one, as the codec."""
    layer = _tie_layer()
    assert np.array_equal(_bits(kfp4.nvfp4_dequantize(**layer)), _bits(codec.nvfp4_dequantize(**layer)))


@pytest.mark.parametrize(("fmt", "batch", "big"), [("nvfp4", 1, False), ("nvfp4", 5, False), ("nvfp4", 20, True),
                                                    ("mxfp4", 1, True), ("mxfp4", 17, False), ("mxfp4", 3, True)])
def test_matmul_is_within_the_bound_on_both_paths(fmt, batch, big):
    """QF-4.6: x @ W.T within the forward error bound of the codec's W, on the GEMV, the float16-W tensor-core
    path (every W exactly a float16) and the float32 path (W outside float16's exact range: ``big``)."""
    rng = np.random.default_rng(batch)
    if fmt == "nvfp4":
        # big: 6 * 448 / 0.01 > 60000; else scales 2^-3 .. 448 over 2688: W between 2^-16 and 1
        layer = _nvfp4_layer(rng, 45, 64, g=0.01 if big else 2688.0)
        layer["weight_scale"] = np.full_like(layer["weight_scale"], 0x7E) if big else \
            np.clip(layer["weight_scale"], 0x20, 0x7E)
        w = codec.nvfp4_dequantize(**layer)
    else:
        layer = _mxfp4_layer(rng, (45,), 64, *((140, 150) if big else (115, 135)))
        w = codec.mxfp4_dequantize(**layer)
    x = rng.uniform(-1, 1, (batch, 64)).astype(np.float16)
    assert kfp4.prepare(**layer, format=fmt).fp16_safe is not big
    y = getattr(kfp4, f"{fmt}_matmul")(**layer, x=x)
    assert y.shape == (batch, 45) and compare.within_bound(y, "float16", x, w, w_rounding=False).ok


REJECT = [c for c in fp4_cases.cases() if c.expect == "reject"]


@pytest.mark.parametrize("case", REJECT, ids=[c.id.split("/read/")[1] for c in REJECT])
def test_public_entry_refuses_each_invalid_case_as_the_reference(case):
    """KC-4.2, KC-7.1: the kernel's dequantize raises the reference's error (code, tensor, value) before launch."""
    fmt = case.format.removesuffix("_packed")
    with pytest.raises(QFormatsError) as ours:
        fp4_cases.CHECKED[case.format](**case.inputs)
    with pytest.raises(QFormatsError) as theirs:
        getattr(kfp4, f"{fmt}_dequantize")(**case.inputs)
    assert str(theirs.value) == str(ours.value)


def test_prepare_refuses_a_global_scale_for_mxfp4_and_an_unknown_format():
    """KC-1.12: the global scale belongs to NVFP4 alone; the format is nvfp4 or mxfp4."""
    layer = _mxfp4_layer(np.random.default_rng(1), (2,), 32)
    with pytest.raises(QFormatsError) as err:
        kfp4.prepare(**layer, format="mxfp4", weight_global_scale=np.ones(1, np.float32))
    assert (err.value.code, err.value.tensor, err.value.actual) == ("argument.invalid", "weight_global_scale", "given")
    with pytest.raises(QFormatsError) as err:
        kfp4.prepare(**layer, format="fp4")
    assert (err.value.code, err.value.tensor, err.value.actual) == ("argument.invalid", "format", "fp4")


def test_matmul_of_experts_is_refused():
    """KC-1.6: the matmul contract is one Linear; a prepared 3-D experts layer dequantizes but does not multiply."""
    p = kfp4.prepare(**_mxfp4_layer(np.random.default_rng(2), (2, 3), 32), format="mxfp4")
    with pytest.raises(QFormatsError) as err:
        kfp4.matmul_prepared(p, torch.zeros((1, 32), dtype=torch.float16))
    assert (err.value.code, err.value.tensor, err.value.actual) == ("tensor.shape", "weight_packed", (2, 3, 16))
