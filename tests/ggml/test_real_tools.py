"""GGML-5.4: ggml itself and gguf-py judged on every GGUF block type; their outcomes pinned here.

ggml (the oracle build) must conform on every type: its decoders pass every decoder case bit for bit
and its encoders are byte-identical to qformats' reference encoders on every encoder case. gguf-py
0.19.0's outcome per type is what the suite measured; a change in either library or in the suite
shows up here first (and in the README's real-library table).
"""

from __future__ import annotations

import os

import pytest

from conformance import run_kernel
from qformats.formats.ggml.cases import X_KINDS, subject_types

LIB_PATH = os.environ.get("QFORMATS_GGML_LIB")
# Types newer than the pinned oracle and gguf-py 0.19.0 (BlockType.since: q2_0) are judged by
# tests/llama_cpp/test_new_types.py against the ggml that has them.
TYPES = [bt.name for bt in subject_types() if bt.since is None]
ENCODED = [bt.name for bt in subject_types() if bt.quantize is not None and not bt.requires_importance and bt.since is None]
# gguf-py 0.19.0 gguf.quants.quantize: the types it has an encoder for (measured: byte-identical to ggml)
GGUF_PY_ENCODES = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "tq1_0", "tq2_0", "mxfp4"}
# ... and the types it names but has no decoder for (NotImplementedError, measured)
GGUF_PY_CANNOT_DECODE = {"q1_0"}


@pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")
@pytest.mark.parametrize("name", TYPES)
def test_ggml_decoder_conforms(name):
    """GGML-5.1: ggml's dequantize_row_<type> passes every decoder case of its type."""
    result = run_kernel(f"conformance.adapters.ggml:{name}_dequantize", fmt=name, op="dequantize", jobs=1)
    decoded = [c for c in result.cases if "/invalid/" not in c.id]     # non-conforming input: KC-4.2 (validating level)
    assert result.conforms and sum(c.status == "pass" for c in decoded) == len(decoded) >= 12, result.counts


@pytest.mark.skipif(not LIB_PATH, reason="set QFORMATS_GGML_LIB to a ggml build to run")
@pytest.mark.parametrize("name", ENCODED)
def test_ggml_encoder_is_reference_equivalent(name):
    """GGML-5.3: ggml's quantize_<type> writes, case for case, the bytes of qformats' reference encoder."""
    result = run_kernel(f"conformance.adapters.ggml:{name}_quantize", fmt=name, op="quantize", jobs=1)
    assert result.conforms and result.counts["pass"] == len(result.cases) == len(X_KINDS), result.counts
    assert all("byte-identical" in case.detail for case in result.cases)


@pytest.mark.parametrize("name", TYPES)
def test_gguf_py_decoder_conforms(name):
    """GGML-5.1: gguf-py 0.19.0 quants.dequantize passes every decoder case of every type it decodes (measured);
    on q1_0 every case is an error (NotImplementedError), reported, never hidden, but the non-finite class,
    where refusing is allowed (GGML-2.4)."""
    result = run_kernel(f"conformance.adapters.gguf_py:{name}_dequantize", fmt=name, op="dequantize", jobs=1)
    if name in GGUF_PY_CANNOT_DECODE:
        judged = [case for case in result.cases if "nonfinite" not in case.id and "/invalid/" not in case.id]
        assert judged and all(case.status == "error" and "NotImplementedError" in case.detail for case in judged)
        return
    decoded = [c for c in result.cases if "/invalid/" not in c.id]     # non-conforming input: KC-4.2 (validating level)
    assert result.conforms and sum(c.status == "pass" for c in decoded) == len(decoded), result.counts


@pytest.mark.parametrize("name", ENCODED)
def test_gguf_py_encoder_outcome(name):
    """GGML-5.3: gguf-py's encoders are byte-identical where it has one; elsewhere every case is an error
    (NotImplementedError), reported, never hidden."""
    result = run_kernel(f"conformance.adapters.gguf_py:{name}_quantize", fmt=name, op="quantize", jobs=1)
    if name in GGUF_PY_ENCODES:
        assert result.conforms and all("byte-identical" in case.detail for case in result.cases)
    else:
        assert {case.status for case in result.cases} == {"error"}
        assert all("NotImplementedError" in case.detail for case in result.cases)
