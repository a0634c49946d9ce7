"""Per-layer statistics of a decoded weight (QF-5.3)."""

import math

import numpy as np

from qformats.stats import Moments


def test_moments_of_a_hand_worked_array():
    """[1, -2, 3, 4]: count 4, sum 6, sum of squares 30, mean 1.5, std sqrt(30/4 - 2.25), max |w| 4."""
    m = Moments.of(np.array([[1, -2], [3, 4]], np.float32))
    assert (m.count, m.total, m.squares, m.max_abs, m.nonfinite) == (4, 6.0, 30.0, 4.0, 0)
    assert m.mean == 1.5 and m.std == math.sqrt(5.25)
    assert m.row() == {"mean": 1.5, "std": math.sqrt(5.25), "max_abs": 4.0}


def test_nonfinite_weights_are_counted_and_located_not_summed():
    """QF-5.3: NaN and inf are counted, the first is located, and the finite rest is summed."""
    w = np.array([[1, np.inf], [np.nan, 2]], np.float32)
    m = Moments.of(w)
    assert m.nonfinite == 2 and m.first_nonfinite == ("inf", [0, 1])
    assert m.total == 3.0 and m.squares == 5.0 and m.max_abs == 2.0


def test_any_memory_order_gives_the_same_moments():
    """A transposed (Fortran-order) view folds like its contiguous copy."""
    w = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    assert Moments.of(w.T) == Moments.of(np.ascontiguousarray(w.T))


def test_empty_array_has_zero_moments():
    m = Moments.of(np.zeros((0, 3), np.float32))
    assert (m.count, m.total, m.squares, m.max_abs) == (0, 0.0, 0.0, 0.0)
