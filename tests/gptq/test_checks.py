"""GPTQ g_idx rules (spec/gptq.md GPTQ-5)."""

import numpy as np
import pytest

from qformats.errors import QFormatsError
from qformats.formats.gptq import checks


def act_order_g_idx(k, group_size, seed=0):
    perm = np.random.default_rng(seed).permutation(k)
    invperm = np.argsort(perm)
    return (invperm // group_size).astype(np.int32)


def test_trivial_g_idx_is_k_floordiv_group_size():
    """GPTQ-5.3: without act-order "g_idx[k] = k // gs"; GPTQ-5.5: gs -1 gives all zeros."""
    assert checks.trivial_g_idx(6, 2).tolist() == [0, 0, 1, 1, 2, 2]
    assert checks.trivial_g_idx(4, -1).tolist() == [0, 0, 0, 0]


def test_act_order_g_idx_with_a_short_last_group_is_valid():
    """GPTQ-5.2: each group holds exactly group_size rows; the last may be short (K=160, gs=128)."""
    g_idx = act_order_g_idx(160, 128)
    checks.check_g_idx(g_idx, 2, 128)
    assert not checks.is_trivial_g_idx(g_idx, 128)


def test_group_with_a_row_too_many_is_named():
    """GPTQ-5.2: a group holding more than group_size rows is rejected with its count."""
    g_idx = checks.trivial_g_idx(64, 32)
    g_idx[40] = 0
    with pytest.raises(QFormatsError) as info:
        checks.check_g_idx(g_idx, 2, 32)
    assert (info.value.code, info.value.message) == (
        "gptq.g_idx.group_sizes", "'g_idx' must be 32 rows in group 0 (got 33 rows)")


@pytest.mark.parametrize("bad", [-1, 2], ids=["negative", "equal-to-G"])
def test_g_idx_out_of_range_is_refused_before_any_gather(bad):
    """GPTQ-5.1: 0 <= g_idx[k] < G (vLLM #47255: out-of-range g_idx reads out of bounds)."""
    g_idx = checks.trivial_g_idx(64, 32)
    g_idx[9] = bad
    with pytest.raises(QFormatsError) as info:
        checks.check_g_idx(g_idx, 2, 32)
    assert info.value.code == "gptq.g_idx.range"
    assert info.value.message.endswith(f"(got {bad} at [9])")


def test_nontrivial_g_idx_without_desc_act_is_a_warning():
    """GPTQ-5.4: desc_act=false with a non-trivial g_idx: vLLM ignores it, GPTQModel honours it."""
    findings = checks.g_idx_findings(act_order_g_idx(128, 32), 32, desc_act=False, tensor="m.g_idx")
    assert [(f.code, f.severity, f.tensor) for f in findings] == [
        ("gptq.g_idx.ignored_without_desc_act", "warning", "m.g_idx")]


@pytest.mark.parametrize(("g_idx", "desc_act"), [
    pytest.param(checks.trivial_g_idx(128, 32), False, id="trivial-no-desc-act"),
    pytest.param(checks.trivial_g_idx(128, 32), True, id="trivial-static-groups"),
    pytest.param(act_order_g_idx(128, 32), True, id="act-order-with-desc-act"),
])
def test_consistent_g_idx_has_no_findings(g_idx, desc_act):
    """GPTQ-5.4: desc_act=true with a trivial g_idx is legal (static groups, GAR)."""
    assert checks.g_idx_findings(g_idx, 32, desc_act=desc_act) == []
