"""Real AutoGPTQ 0.7.1 / GPTQModel 7.7.0 output against our writer and reader emulations (GPTQ-4).

Every expected value here was produced by the real tools (fixtures/third_party/gptq/PROVENANCE.md);
the comparisons are bit for bit (``==``), never within a tolerance.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats import bits
from qformats.errors import QFormatsError
from qformats.formats import gptq
from qformats.formats.gptq.quirks import READERS, WRITERS

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "gptq"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
LAYERS = {entry["case_id"]: entry for entry in MANIFEST["layers"]}

# golden qzeros tensor per emulated writer; "v2" is the plain field packing of GPTQ-2.3
WRITER_TENSORS = {"autogptq": "autogptq.qzeros", "gptqmodel": "gptqmodel_v1.qzeros", "v2": "gptqmodel_v2.qzeros"}
GOLDEN_QZEROS = {"autogptq": "autogptq.qzeros", "gptqmodel_v1": "gptqmodel_v1.qzeros",
                 "gptqmodel_v2": "gptqmodel_v2.qzeros"}
GOLDEN_QWEIGHT = {"autogptq": "autogptq.qweight", "gptqmodel_v1": "gptqmodel.qweight",
                  "gptqmodel_v2": "gptqmodel.qweight"}


@lru_cache(maxsize=None)
def layer(case_id: str) -> dict[str, np.ndarray]:
    return load_file(ROOT / LAYERS[case_id]["file"])


def label(reader: str, writer: str) -> str:
    """The version the tool was told: GPTQModel loads gptq_v2 as v2; AutoGPTQ only knows v1."""
    return "v2" if writer == "gptqmodel_v2" and reader == "gptqmodel" else "v1"


def emulate(t: dict[str, np.ndarray], reader: str, writer: str, b: int, group_size: int) -> np.ndarray:
    """W^T (K, N) as ``s * (q - Z[g])`` with our reader's zeros and row groups (GPTQ-3.2, GPTQ-4.2)."""
    q = bits.unpack(t[GOLDEN_QWEIGHT[writer]], b, axis=0).astype(np.float32)
    r = READERS[reader]
    z = r.effective_zeros(t[GOLDEN_QZEROS[writer]], b, q.shape[1], label(reader, writer))
    rows = r.groups(t["g_idx"], q.shape[0], group_size)
    return t["scales"].astype(np.float32)[rows] * (q - z[rows].astype(np.float32))


def read_cases():
    for case_id, entry in LAYERS.items():
        for name in entry["mismatches_vs_truth"]:
            _, reader, writer = name.split(".")
            yield pytest.param(case_id, reader, writer, id=f"{case_id}-{reader}-{writer}")


def error_cases():
    for case_id, entry in LAYERS.items():
        for name in entry["reader_errors"]:
            _, reader, writer = name.split(".")
            yield pytest.param(case_id, reader, writer, id=f"{case_id}-{reader}-{writer}")


CASES = [pytest.param(c, id=c) for c in LAYERS]


def test_every_layer_file_is_in_the_manifest():
    """Fixture hygiene: the golden manifest indexes every layer file we test (GPTQ-4.1)."""
    assert {p.name for p in (ROOT / "layers").glob("*.safetensors")} == {
        Path(e["file"]).name for e in MANIFEST["layers"]}


@pytest.mark.parametrize("case_id", CASES)
@pytest.mark.parametrize("writer", list(WRITER_TENSORS))
def test_writer_emulation_equals_real_qzeros(case_id, writer):
    """GPTQ-4.1: each emulated writer's qzeros equal the real tool's bytes exactly."""
    t, b = layer(case_id), LAYERS[case_id]["bits"]
    ours = bits.pack(t["zeros"], b, axis=1) if writer == "v2" else WRITERS[writer](t["zeros"], b)
    golden = t[WRITER_TENSORS[writer]]
    assert ours.dtype == golden.dtype == np.int32
    assert np.array_equal(ours, golden)


@pytest.mark.parametrize("case_id", CASES)
@pytest.mark.parametrize("tensor", ["autogptq.qweight", "gptqmodel.qweight"])
def test_qweight_packing_equals_real_qweight(case_id, tensor):
    """GPTQ-2.3: codes packed along K with QF-3 equal both real packers' qweight."""
    t, b = layer(case_id), LAYERS[case_id]["bits"]
    assert np.array_equal(bits.pack(t["codes"], b, axis=0), t[tensor])


@pytest.mark.parametrize("case_id", CASES)
def test_codec_v2_pack_equals_gptqmodel_v2(case_id):
    """GPTQ-1.2: the strict v2 writer produces GPTQModel's gptq_v2 qweight and qzeros."""
    e, t = LAYERS[case_id], layer(case_id)
    out = gptq.pack(t["codes"], t["zeros"], t["scales"], bits=e["bits"], g_idx=t["g_idx"], version="v2",
                    group_size=e["group_size"])
    assert np.array_equal(out.qweight, t["gptqmodel.qweight"])
    assert np.array_equal(out.qzeros, t["gptqmodel_v2.qzeros"])


@pytest.mark.parametrize("case_id", CASES)
@pytest.mark.parametrize("writer", ["autogptq", "gptqmodel"])
def test_codec_quirk_writer_equals_real_qzeros(case_id, writer):
    """GPTQ-4.1: ``gptq.pack(..., writer=)`` reproduces the real v1 qzeros, zero 0 included."""
    e, t = LAYERS[case_id], layer(case_id)
    out = gptq.pack(t["codes"], t["zeros"], t["scales"], bits=e["bits"], g_idx=t["g_idx"], version="v1",
                    writer=writer, group_size=e["group_size"])
    assert np.array_equal(out.qzeros, t[WRITER_TENSORS[writer]])


@pytest.mark.parametrize(("case_id", "reader", "writer"), list(read_cases()))
def test_reader_emulation_equals_real_decode(case_id, reader, writer):
    """GPTQ-4.2: our emulation of each real reader decodes every weight exactly as the tool did."""
    e, t = LAYERS[case_id], layer(case_id)
    ours = emulate(t, reader, writer, e["bits"], e["group_size"])
    golden = t[f"read.{reader}.{writer}"]
    assert ours.shape == golden.shape
    assert np.array_equal(ours, golden)
    assert int(np.count_nonzero(ours != t["truth"])) == e["mismatches_vs_truth"][f"read.{reader}.{writer}"]


@pytest.mark.parametrize(("case_id", "reader", "writer"), list(read_cases()))
def test_codec_dequantize_with_reader_equals_real_decode(case_id, reader, writer):
    """GPTQ-4.2: ``gptq.dequantize(reader=)`` returns the real tool's decode in (out, in) orientation."""
    e, t = LAYERS[case_id], layer(case_id)
    tensors = {"qweight": t[GOLDEN_QWEIGHT[writer]], "qzeros": t[GOLDEN_QZEROS[writer]],
               "scales": t["scales"], "g_idx": t["g_idx"]}
    out = gptq.dequantize(tensors, bits=e["bits"], version=label(reader, writer), reader=reader,
                          group_size=e["group_size"])
    assert out.dtype == np.float32
    assert np.array_equal(out, t[f"read.{reader}.{writer}"].T)


@pytest.mark.parametrize(("case_id", "reader", "writer"), list(error_cases()))
def test_reader_failure_reproduced(case_id, reader, writer):
    """GPTQ-5.3: a reader that assumes k // group_size fails, as the real one did, when K % gs != 0."""
    e, t = LAYERS[case_id], layer(case_id)
    with pytest.raises(QFormatsError) as info:
        emulate(t, reader, writer, e["bits"], e["group_size"])
    assert info.value.code == "gptq.quirk.unsupported"
    tensors = {"qweight": t[GOLDEN_QWEIGHT[writer]], "qzeros": t[GOLDEN_QZEROS[writer]],
               "scales": t["scales"], "g_idx": t["g_idx"]}
    with pytest.raises(QFormatsError) as info:
        gptq.dequantize(tensors, bits=e["bits"], version="v1", reader=reader, group_size=e["group_size"])
    assert info.value.code == "gptq.quirk.unsupported"


@pytest.mark.parametrize("case_id", [pytest.param(c, id=c) for c, e in LAYERS.items() if e["zeros_kind"] != "zero0"])
def test_spec_reader_equals_truth_without_zero0(case_id):
    """GPTQ-3.2: the spec reader decodes every real v1 and v2 file without zero 0 to ``truth``."""
    e, t = LAYERS[case_id], layer(case_id)
    for version, qzeros in (("v1", "autogptq.qzeros"), ("v1", "gptqmodel_v1.qzeros"), ("v2", "gptqmodel_v2.qzeros")):
        tensors = {"qweight": t["gptqmodel.qweight"], "qzeros": t[qzeros], "scales": t["scales"], "g_idx": t["g_idx"]}
        out = gptq.dequantize(tensors, bits=e["bits"], version=version, group_size=e["group_size"])
        assert np.array_equal(out, t["truth"].T), qzeros
