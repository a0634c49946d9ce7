"""The picture helpers from plain data (qformats/pictures/svg.py) and the bounded picture data (INSPECT-2.2 ..
INSPECT-2.4), against hand-worked arithmetic."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from qformats.pictures.data import log2_histogram, tensor_picture
from qformats.pictures.svg import bar_chart, heatmap, histogram


def test_heatmap_places_cells_links_them_and_escapes_titles():
    """A cell at (row 1, column 2) of 20 px cells sits at x 40, y 20; a cell with an href is wrapped in <a>, its
    title escaped so the SVG stays well-formed."""
    svg = ET.fromstring(heatmap([{"row": 1, "col": 2, "fill": "#ff0000", "title": "a < b & c", "href": "#f-1"},
                                 {"row": 0, "col": 0, "fill": "#00ff00"}], rows=2, cols=3, cell_w=20, cell_h=20))
    (a,) = svg.findall("a")
    rect = a.find("rect")
    assert (a.get("href"), rect.get("x"), rect.get("y"), rect.get("fill")) == ("#f-1", "40", "20", "#ff0000")
    assert rect.find("title").text == "a < b & c"
    assert [r.get("x") for r in svg.findall("rect")] == ["0"]          # the unlinked cell, no background asked


def test_histograms_with_the_same_axes_scale_bars_alike():
    """Two histograms drawn with the same x range and y_max say so in data-x-min/-x-max/-y-max, and a count of
    half y_max is a bar half the plot's height in both."""
    a = ET.fromstring(histogram([5, 0, 2], x_min=-4, bin_width=1, y_max=10, width=200, height=100))
    b = ET.fromstring(histogram([1, 5, 0], x_min=-4, bin_width=1, y_max=10, width=200, height=100))
    for svg in (a, b):
        assert (svg.get("data-x-min"), svg.get("data-x-max"), svg.get("data-y-max")) == ("-4", "-1", "10")
    plot = 100 - 4 - 4            # no title, no ticks: 4 px margins top and bottom
    assert float(a.findall("rect")[0].get("height")) == float(b.findall("rect")[1].get("height")) == plot / 2


def test_histogram_refuses_axes_without_extent():
    """y_max 0 would divide by zero: refused with a message, not drawn wrong."""
    with pytest.raises(ValueError, match="y_max > 0"):
        histogram([1], x_min=0, bin_width=1, y_max=0)


def test_bar_chart_scales_to_the_largest_value():
    """Bars are proportional: 18 and 2 give widths in the ratio 9."""
    svg = ET.fromstring(bar_chart(["valid", "invalid"], [18, 2]))
    widths = [float(r.get("width")) for r in svg.findall("rect")]
    assert widths[0] == pytest.approx(9 * widths[1])


def test_pooling_puts_a_nan_in_its_cell_and_names_its_block():
    """INSPECT-2.2: 600 rows of 40 blocks of 32 pool 3 rows a cell (ceil(600 / 256)), one block a cell; a NaN at
    row 301, column 100 is block 3 of row 301, in cell (100, 3), and no other cell is flagged."""
    w = np.random.default_rng(0).standard_normal((600, 40 * 32)).astype(np.float32)
    w[301, 100] = np.nan
    t = tensor_picture("w", w, 32)
    assert (t.grid, t.cell_rows, t.cell_blocks) == ([200, 40], 3, 1)
    assert t.nonfinite == [[100, 3, 1, 301, 3]]


def test_an_outlier_block_is_more_than_8_std_from_the_mean():
    """INSPECT-2.3: in standard normal weights, one weight of 50 makes its block an outlier block; 5 (under 8
    standard deviations) does not."""
    w = np.random.default_rng(1).standard_normal((64, 256))
    w[10, 70], w[20, 5] = 50.0, 5.0
    t = tensor_picture("w", w, 32)
    assert [c[:5] for c in t.outliers] == [[10, 2, 1, 10, 2]]


def test_log2_histogram_bins_by_exponent_and_counts_the_rest():
    """INSPECT-2.4: 0.75 and 0.5 fall in bin floor(log2) = -1, 3 in bin 1, 2^-30 clipped into the first bin (-24);
    zero, negative and NaN counted apart."""
    h = log2_histogram([np.array([0.75, -0.5, 3.0, 2.0 ** -30, 0.0, np.nan])], ["d"])
    nonzero = {i - 24: n for i, n in enumerate(h.counts) if n}
    assert nonzero == {-24: 1, -1: 2, 1: 1}
    assert (h.zero, h.negative, h.nonfinite, h.total) == (1, 1, 1, 6)
