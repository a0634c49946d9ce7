"""Tests with teeth for qformats/containers/ggml_types.py (issue 33 item 3; spec/containers.md GGUF-4): the type
table's names, ids, removed ids and row arithmetic against gguf-py 0.19.0 (``gguf.constants``, a third-party
table) and the spec's own table. The (block size, type size) pairs are test_gguf_reader.py's
``test_type_table_matches_gguf_py``."""

from __future__ import annotations

from gguf.constants import QK_K as GGUF_PY_QK_K
from gguf.constants import GGMLQuantizationType

from qformats.containers.ggml_types import GGML_REMOVED_TYPE_IDS, GGML_TYPES, QK_K


def test_type_names_are_ggmls():
    """GGUF-4.1: "The table ... lists every id of ggml enum ggml_type" under ggml's names: gguf-py 0.19.0's
    GGMLQuantizationType for ids 0..41, and Q2_0 for 42 (ggml 0.25.3, the spec's table)."""
    ours = {t.type_id: t.name for t in GGML_TYPES.values()}
    theirs = {int(t): t.name for t in GGMLQuantizationType} | {42: "Q2_0"}
    assert ours == theirs


def test_table_is_keyed_by_type_id():
    """GGUF-3.5: a tensor's ggml_type is looked up by its id: each entry sits under its own id."""
    assert all(key == t.type_id for key, t in GGML_TYPES.items()) and len(GGML_TYPES) == 35


def test_removed_ids_are_the_gaps_of_ggmls_enum():
    """GGUF-4.1: "Removed ids, which are always rejected: 4, 5 (Q4_2, Q4_3), 31-33 (...) and 36-38 (...)": exactly
    the ids below 42 that gguf-py 0.19.0's enum skips, none of them in the table."""
    gaps = set(range(42)) - {int(t) for t in GGMLQuantizationType}
    assert GGML_REMOVED_TYPE_IDS == frozenset(gaps) == frozenset({4, 5, 31, 32, 33, 36, 37, 38})
    assert not GGML_REMOVED_TYPE_IDS & set(GGML_TYPES)


def test_k_quant_super_block_is_256():
    """GGUF-3.6: "256 for every k-quant" (gguf-py 0.19.0 QK_K)."""
    assert QK_K == GGUF_PY_QK_K == 256


def test_row_bytes_of_a_k_quant_row():
    """GGUF-4.1: a row holds ne[0] / block_size blocks of type_size bytes: Q4_K, 512 elements = 2 blocks of 144."""
    got = GGML_TYPES[12].row_bytes(512)
    assert (type(got), got) == (int, 288)


def test_row_bytes_of_a_legacy_row():
    """GGUF-4.1: Q4_0, 96 elements = 3 blocks of 2 + 16 bytes."""
    assert GGML_TYPES[2].row_bytes(96) == 54


def test_row_bytes_of_a_plain_row():
    """GGUF-4.1: F32 has block size 1: 3 elements are 3 blocks of 4 bytes."""
    assert GGML_TYPES[0].row_bytes(3) == 12
