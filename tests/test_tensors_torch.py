"""CPU torch tensors as inputs: bfloat16 widens exactly, other devices are refused (QF-2.2)."""

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.tensors import as_array

torch = pytest.importorskip("torch")


def test_bfloat16_widens_exactly_to_float32():
    """bfloat16 is the top half of a float32: 1 + 2^-7 and -3.5 keep their values."""
    arr = as_array(torch.tensor([1 + 2 ** -7, -3.5], dtype=torch.bfloat16), "w")
    assert arr.dtype == np.float32 and arr.tolist() == [1 + 2 ** -7, -3.5]


def test_bfloat16_weights_quantize_like_their_float32_values():
    w = torch.randn(32, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    a = gptq.quantize(w, bits=4, group_size=32, sym=True, version="v2")
    b = gptq.quantize(w.float().numpy(), bits=4, group_size=32, sym=True, version="v2")
    assert all(np.array_equal(a.tensors[k], b.tensors[k]) for k in ("qweight", "qzeros", "scales"))


def test_bfloat16_where_float16_is_required_names_bfloat16():
    layer = gptq.quantize(np.ones((32, 64), np.float32), bits=4, group_size=32, sym=True, version="v2")
    t = dict(layer.tensors, scales=torch.from_numpy(np.array(layer.tensors["scales"])).to(torch.bfloat16))
    with pytest.raises(QFormatsError) as exc:
        gptq.dequantize(t, bits=4, version="v2")
    assert exc.value.code == "tensor.dtype" and exc.value.actual == "bfloat16"


def test_meta_tensors_are_refused_with_a_qformats_error():
    with pytest.raises(QFormatsError) as exc:
        as_array(torch.empty(3, device="meta"), "w")
    assert exc.value.code == "tensor.dtype" and "meta" in str(exc.value)
