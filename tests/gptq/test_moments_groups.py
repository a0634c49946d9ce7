"""Cell sums over g_idx that leave groups unused (GPTQ-8.2 reads layers before GPTQ-5.2 rejects them; issue 33:
`IndexError: index 128 out-of-bounds in add.reduceat`)."""

from __future__ import annotations

import numpy as np
import pytest

from qformats.formats.gptq.evidence import label_evidence
from qformats.formats.gptq.moments import _unpacked_cells, cell_sums

K, N, GROUPS = 128, 64, 4


def _codes(qweight: np.ndarray) -> np.ndarray:
    """GPTQ-2.3 at 4 bits, by hand: row k is bits 4 (k mod 8) .. of word row k // 8."""
    k = np.arange(K)
    return (qweight.astype(np.int64)[k // 8] >> (4 * (k % 8))[:, None]) & 15


@pytest.fixture
def qweight() -> np.ndarray:
    return np.random.default_rng(33).integers(-2**31, 2**31, (K // 8, N), dtype=np.int64).astype(np.int32)


@pytest.mark.parametrize("unused", [(3,), (0,), (1, 2), (0, 3)], ids=["last", "first", "middle", "both-ends"])
def test_unused_groups_count_zero_and_sum_zero(qweight, unused):
    """A group no row names has count 0 and sum 0; every other cell sums its own rows' codes."""
    used = [g for g in range(GROUPS) if g not in unused]
    g_idx = np.array(used, np.intp)[np.random.default_rng(5).integers(0, len(used), K)]
    count, sums = cell_sums(qweight, g_idx, 4, GROUPS)
    want = np.zeros((GROUPS, N), np.int64)
    np.add.at(want, g_idx, _codes(qweight))
    np.testing.assert_array_equal(count, np.bincount(g_idx, minlength=GROUPS))
    np.testing.assert_array_equal(sums, want)


def test_unused_groups_have_neutral_extremes(qweight):
    """The general path's minimum and maximum of an unused cell are 0, the other cells their own rows' extremes."""
    g_idx = np.repeat(np.array([0, 2]), K // 2).astype(np.intp)
    count, s1, s2, low, high = _unpacked_cells(qweight, g_idx, 4, GROUPS)
    codes = _codes(qweight)
    assert count.tolist() == [K // 2, 0, K // 2, 0]
    for g, rows in ((0, slice(0, K // 2)), (2, slice(K // 2, K))):
        np.testing.assert_array_equal(low[g], codes[rows].min(axis=0))
        np.testing.assert_array_equal(high[g], codes[rows].max(axis=0))
        np.testing.assert_array_equal(s2[g], (codes[rows] ** 2).sum(axis=0))
    assert not (low[[1, 3]].any() or high[[1, 3]].any() or s1[[1, 3]].any() or s2[[1, 3]].any())


def test_label_evidence_of_a_layer_with_an_unused_last_group(qweight):
    """GPTQ-8.2: the statistic leaves empty cells out; a g_idx that never names the last group is judged, not a crash."""
    g_idx = (np.arange(K) // (K // (GROUPS - 1))).astype(np.int32)         # groups 0, 1, 2 only
    qzeros = np.full((GROUPS, N // 8), 0x77777777, np.int32)
    evidence = label_evidence(qzeros, 4, qweight=qweight, g_idx=g_idx, sym=False)
    assert evidence.method == "asymmetric-statistical" and evidence.verdict == "undetermined"
