"""v1/v2 label evidence from the tensors (GPTQ-8) and real-reader disagreement counts."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qformats import bits
from qformats.errors import QFormatsError
from qformats.formats.gptq.evidence import label_evidence, reader_disagreements
from qformats.formats.gptq.quirks import WRITERS

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "third_party" / "gptq"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())
LAYERS = {entry["case_id"]: entry for entry in MANIFEST["layers"]}
TRUE_VERSION = {"autogptq.qzeros": "v1", "gptqmodel_v1.qzeros": "v1", "gptqmodel_v2.qzeros": "v2"}


@lru_cache(maxsize=None)
def layer(case_id: str) -> dict[str, np.ndarray]:
    return load_file(ROOT / LAYERS[case_id]["file"])


@lru_cache(maxsize=None)
def checkpoint(name: str) -> tuple[dict, dict[str, np.ndarray]]:
    d = ROOT / "checkpoints" / name
    return json.loads((d / "quantize_config.json").read_text()), load_file(d / "model.safetensors")


def modules(tensors: dict[str, np.ndarray]) -> list[str]:
    return sorted(k.removesuffix(".qzeros") for k in tensors if k.endswith(".qzeros"))


def layer_params(sym: bool | None = None):
    for case_id, e in LAYERS.items():
        if sym is None or e["sym"] == sym:
            for tensor in TRUE_VERSION:
                yield pytest.param(case_id, tensor, id=f"{case_id}-{tensor.split('.')[0]}")


def rtn(w: np.ndarray, b: int, gs: int) -> tuple[np.ndarray, np.ndarray]:
    """Min-max RTN with 0 kept in range, as GPTQ quantizers do: codes (K, N), zeros (G, N)."""
    n, k = w.shape
    g = w.reshape(n, k // gs, gs)
    lo, hi = np.minimum(g.min(-1), 0), np.maximum(g.max(-1), 0)
    scale = (hi - lo) / ((1 << b) - 1)
    zero = np.round(-lo / scale)
    q = np.clip(np.round(g / scale[..., None] + zero[..., None]), 0, (1 << b) - 1)
    return q.reshape(n, k).T.astype(np.int64), zero.T.astype(np.int64)


# -- symmetric: exact ---------------------------------------------------------------------------


@pytest.mark.parametrize(("case_id", "tensor"), list(layer_params(sym=True)))
@pytest.mark.parametrize("sym", [True, None], ids=["sym-declared", "sym-unknown"])
def test_symmetric_golden_layers_exact(case_id, tensor, sym):
    """GPTQ-8.1: every field 2^(b-1)-1 means v1, every field 2^(b-1) means v2, certainly."""
    ev = label_evidence(layer(case_id)[tensor], LAYERS[case_id]["bits"], sym=sym)
    assert (ev.verdict, ev.method) == (TRUE_VERSION[tensor], "symmetric-exact")
    assert ev.signatures == () and ev.all_ones_fields == 0


@pytest.mark.parametrize(("name", "version", "word"), [
    pytest.param("e2e_b4_sym_g32_gptq", "v1", 0x77777777, id="e2e-valid-v1"),
    pytest.param("neg_b4_sym_v2_zeros_labelled_gptq", "v2", 0x88888888, id="neg-v2-labelled-gptq"),
])
def test_golden_checkpoints_exact(name, version, word):
    """GPTQ-8.3: GPTQModel's sym 4-bit checkpoint says v1; the relabelled one says v2 under a gptq label."""
    config, tensors = checkpoint(name)
    assert config["checkpoint_format"] == "gptq" and config["sym"] is True
    for m in modules(tensors):
        assert (tensors[m + ".qzeros"].view(np.uint32) == word).all(), m
        ev = label_evidence(tensors[m + ".qzeros"], config["bits"], qweight=tensors[m + ".qweight"],
                            g_idx=tensors[m + ".g_idx"], sym=config["sym"])
        assert (ev.verdict, ev.method) == (version, "symmetric-exact"), m


@pytest.mark.parametrize(("name", "version"), [
    pytest.param("e2e_b4_sym_g32_gptq", "v1", id="e2e-valid-v1"),
    pytest.param("neg_b4_sym_v2_zeros_labelled_gptq", "v2", id="neg-v2-labelled-gptq"),
])
def test_golden_checkpoints_statistical(name, version):
    """GPTQ-8.2: on real GPTQ-quantized weights the mean-code test alone reaches the same verdict."""
    config, tensors = checkpoint(name)
    for m in modules(tensors):
        ev = label_evidence(tensors[m + ".qzeros"], config["bits"], qweight=tensors[m + ".qweight"],
                            g_idx=tensors[m + ".g_idx"], sym=False)
        assert (ev.verdict, ev.method) == (version, "asymmetric-statistical"), (m, ev.detail)


def test_symmetric_declared_but_mixed_fields_not_exact():
    """GPTQ-8.1: a "sym" layer with other fields is not judged by the exact rule."""
    qzeros = bits.pack(np.array([[7] * 31 + [8]]), 4, axis=1)
    ev = label_evidence(qzeros, 4, sym=True)
    assert ev.method == "none" and ev.verdict == "undetermined"
    assert "declared symmetric" in ev.detail


# -- asymmetric: statistical ----------------------------------------------------------------------


@pytest.mark.parametrize(("case_id", "tensor"), list(layer_params(sym=False)))
def test_golden_random_codes_never_misjudged(case_id, tensor):
    """GPTQ-8.2: golden codes are drawn independently of the zeros, so no wrong verdict may come out."""
    t, e = layer(case_id), LAYERS[case_id]
    ev = label_evidence(t[tensor], e["bits"], qweight=t["gptqmodel.qweight"], g_idx=t["g_idx"], sym=False)
    assert ev.verdict in (TRUE_VERSION[tensor], "undetermined")


@pytest.mark.parametrize(("case_id", "tensor"), [p for p in layer_params(sym=False)
                                                 if LAYERS[p.values[0]]["bits"] != 8])
def test_golden_zeros_with_weight_like_codes(case_id, tensor):
    """GPTQ-8.2: real writers' qzeros with codes scattered about their zero give the true label.

    Where a v1 writer wrapped a zero 0 (``*_z0``), GPTQModel's borrow shifts neighbouring fields,
    so "undetermined" is also acceptable there; a wrong label never is.
    """
    t, e = layer(case_id), LAYERS[case_id]
    b, g = e["bits"], t["g_idx"]
    rng = np.random.default_rng(sum(map(ord, case_id)))
    noise = np.round(rng.normal(0.0, (1 << b) / 8, (len(g), t["zeros"].shape[1])))
    codes = np.clip(t["zeros"][g] + noise, 0, (1 << b) - 1).astype(np.int64)
    ev = label_evidence(t[tensor], b, qweight=bits.pack(codes, b, axis=0), g_idx=g, sym=False)
    allowed = {TRUE_VERSION[tensor]} | ({"undetermined"} if e["zeros_kind"] == "zero0" else set())
    assert ev.verdict in allowed, ev.detail


@pytest.mark.parametrize("b", [2, 3, 4])
@pytest.mark.parametrize("dist", ["gauss", "laplace", "row-offset"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_rtn_asymmetric_layers(b, dist, version):
    """GPTQ-8.2: asymmetric RTN layers of zero-mean weights give d near 0 (v2) or 1 (v1)."""
    rng = np.random.default_rng(b)
    w = rng.laplace(size=(128, 512)) if dist == "laplace" else rng.standard_normal((128, 512))
    if dist == "row-offset":
        w += 0.3 * rng.standard_normal((128, 1))
    codes, zeros = rtn(w, b, 128)
    fields = (zeros - 1) & ((1 << b) - 1) if version == "v1" else zeros
    ev = label_evidence(bits.pack(fields, b, axis=1), b, qweight=bits.pack(codes, b, axis=0), sym=False)
    assert (ev.verdict, ev.method) == (version, "asymmetric-statistical"), ev.detail
    assert abs(ev.statistic - (1.0 if version == "v1" else 0.0)) < 0.1


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_eight_bit_asymmetric_undetermined(version):
    """GPTQ-8.4: 8-bit asymmetric zeros are reported undetermined whatever the codes say."""
    codes, zeros = rtn(np.random.default_rng(8).standard_normal((64, 256)), 8, 128)
    fields = zeros - 1 if version == "v1" else zeros
    ev = label_evidence(bits.pack(fields, 8, axis=1), 8, qweight=bits.pack(codes, 8, axis=0), sym=False)
    assert (ev.verdict, ev.method) == ("undetermined", "none")


def test_asymmetric_without_qweight_undetermined():
    """GPTQ-8.2: without qweight the statistical test cannot run."""
    ev = label_evidence(bits.pack(np.arange(32).reshape(1, 32) % 15 + 1, 4, axis=1), 4)
    assert (ev.verdict, ev.method, ev.statistic) == ("undetermined", "none", None)


# -- signatures ---------------------------------------------------------------------------------


def test_autogptq_bleed_signature():
    """GPTQ-8.5: AutoGPTQ's zero 0 in a low field leaves an all-ones upper word (autogptq-or-bleed)."""
    zeros = np.random.default_rng(0).integers(1, 15, (2, 64))
    zeros[1, 2] = 0
    ev = label_evidence(WRITERS["autogptq"](zeros, 4), 4, sym=False)
    assert "autogptq-or-bleed" in ev.signatures and "all-ones-fields" in ev.signatures
    assert ev.all_ones_fields == 6  # fields 2..7 of the word


def test_masked_zero0_is_not_bleed():
    """GPTQ-8.5: an isolated wrapped zero 0 (masked writer) is all-ones-fields, not bleed."""
    zeros = np.random.default_rng(0).integers(1, 15, (2, 64))
    zeros[1, 2] = 0
    ev = label_evidence(WRITERS["masked"](zeros, 4), 4, sym=False)
    assert ev.signatures == ("all-ones-fields",) and ev.all_ones_fields == 1


@pytest.mark.parametrize("b", [2, 3, 8])
def test_bleed_signature_other_widths(b):
    """GPTQ-8.5: the bleed fingerprint is found at every width, the 3-bit stitched words included."""
    zeros = np.ones((1, 64), np.int64)
    zeros[0, 33] = 0  # second 32-column block, one field into its first word
    assert "autogptq-or-bleed" in label_evidence(WRITERS["autogptq"](zeros, b), b, sym=False).signatures
    assert "autogptq-or-bleed" not in label_evidence(WRITERS["masked"](zeros, b), b, sym=False).signatures


def test_golden_autogptq_zero0_bleed():
    """GPTQ-8.5: the real AutoGPTQ zero-0 files carry the bleed signature."""
    for case_id in ("b4_asym_g32_k128_n64_z0", "b3_asym_g32_k64_n96_z0"):
        ev = label_evidence(layer(case_id)["autogptq.qzeros"], LAYERS[case_id]["bits"])
        assert "autogptq-or-bleed" in ev.signatures, case_id


def test_legacy_int3_signature():
    """GPTQ-4.5, GPTQ-8.5: GPTQModel v0.9-v6.x sym 3-bit words are recognised and mean v1."""
    ev = label_evidence(WRITERS["gptqmodel_legacy_int3"](np.full((2, 64), 4), 3), 3)
    assert (ev.verdict, ev.method) == ("v1", "symmetric-exact")
    assert "gptqmodel-legacy-int3" in ev.signatures


# -- reader disagreements -------------------------------------------------------------------------


def test_example_disagreements():
    """GPTQ-4.1, GPTQ-8.3: masked words of [0,5,3,0,0,9,15,1] mislead f+1 readers on columns 0,3,4 and
    GPTQModel's word add on columns 1,4,5, Marlin (zero 8) on all; wrap readers agree (32 rows each)."""
    zeros = np.array([[0, 5, 3, 0, 0, 9, 15, 1]])
    codes = np.full((32, 8), 7)
    out = reader_disagreements(bits.pack(codes, 4, axis=0), WRITERS["masked"](zeros, 4),
                               np.ones((1, 8), np.float16), np.zeros(32, np.int32), bits=4, version="v1",
                               group_size=-1)
    assert out == {"autogptq_cuda_old": 0, "autogptq_cuda": 96, "autogptq_cuda_kernel": 0, "exllama": 0,
                   "vllm_gptq_gemm": 96, "gptqmodel": 96, "gptqmodel_legacy_int3": 96, "marlin": 256}  # no zero is 8


@pytest.mark.parametrize("case_id", [pytest.param(c, id=c) for c, e in LAYERS.items() if e["zeros_kind"] != "zero0"])
def test_disagreements_match_real_mismatches(case_id):
    """GPTQ-8.3: without zero 0 the spec reading is the truth, so counts equal the real tools' mismatches."""
    t, e = layer(case_id), LAYERS[case_id]
    for tensor, writer in (("autogptq.qzeros", "autogptq"), ("gptqmodel_v2.qzeros", "gptqmodel_v2")):
        version = TRUE_VERSION[tensor]
        out = reader_disagreements(t["gptqmodel.qweight"], t[tensor], t["scales"], t["g_idx"], bits=e["bits"],
                                   version=version, group_size=e["group_size"])
        for reader in ("autogptq_cuda_old", "autogptq_cuda", "gptqmodel"):
            key = f"read.{reader}.{writer}"
            # AutoGPTQ 0.7.1 ignores the gptq_v2 label and reads v2 words as v1 (GPTQ-4.2): the real
            # read.autogptq_*.gptqmodel_v2 arrays are exactly that reading.
            if key in e["reader_errors"]:
                assert reader not in out
            else:
                assert out[reader] == e["mismatches_vs_truth"][key], key


def test_evidence_rejects_out_of_range_g_idx():
    """GPTQ-5.1: a g_idx outside [0, G) is ``gptq.g_idx.range``, never an out-of-bounds read."""
    qzeros = bits.pack(np.full((2, 8), 3), 4, axis=1)
    g_idx = np.array([0] * 16 + [2] * 16, np.int32)
    with pytest.raises(QFormatsError) as info:
        label_evidence(qzeros, 4, qweight=np.zeros((4, 8), np.int32), g_idx=g_idx, sym=False)
    assert info.value.code == "gptq.g_idx.range"


@pytest.mark.parametrize(("qzeros", "b", "code"), [
    pytest.param(np.zeros((1, 1), np.int32), 5, "bits.unsupported", id="5-bit"),
    pytest.param(np.zeros((1, 1), np.int64), 4, "tensor.dtype", id="int64-qzeros"),
    pytest.param(np.zeros((1, 2), np.int32), 3, "tensor.shape", id="3bit-not-whole-triples"),
    pytest.param(np.zeros(4, np.int32), 4, "tensor.shape", id="1d-qzeros"),
])
def test_evidence_rejects_bad_input(qzeros, b, code):
    """GPTQ-2.2: bad widths, dtypes and shapes are coded errors."""
    with pytest.raises(QFormatsError) as info:
        label_evidence(qzeros, b)
    assert info.value.code == code
