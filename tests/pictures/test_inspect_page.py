"""`qformats inspect --html` on the NaN-scale q4_K_M sample (spec/checkpoints.md INSPECT-1, INSPECT-2), read back
by parsing its SVG; what should be there is computed from the file's bytes with gguf-py, not with qformats."""

from __future__ import annotations

import math
import re

import gguf
import jsonschema
import numpy as np
import pytest
from gguf.quants import dequantize as gguf_dequantize

from tests.pictures.pages import NAN_SAMPLE, run_inspect
from qformats.cli import main
from qformats.pictures.style import COLOURS
from qformats.schema import schema_for

NONFINITE_FILL = "#b00020"
MAX_CELLS = 256


def _gguf_py_tensors() -> list[tuple[str, int, int, int, np.ndarray]]:
    """(name, ggml block size, rows, blocks per row, decoded weights) of every tensor, by gguf-py."""
    out = []
    for t in gguf.GGUFReader(NAN_SAMPLE).tensors:
        block, _ = gguf.GGML_QUANT_SIZES[t.tensor_type]
        w = np.asarray(gguf_dequantize(t.data, t.tensor_type), np.float64).reshape(t.data.shape[0], -1)
        out.append((t.name, block, w.shape[0], -(-w.shape[1] // block), w))
    return out


def _expected_nonfinite_cells() -> dict[tuple[str, int, int], tuple[int, int, int]]:
    """(tensor, cell row, cell column) -> (non-finite values, first bad block's row, its block), pooled as
    INSPECT-2.2 says: ceil(R / 256) rows by ceil(B / 256) blocks a cell."""
    cells: dict[tuple[str, int, int], tuple[int, int, int]] = {}
    for name, block, rows, blocks, w in _gguf_py_tensors():
        cr, cb = math.ceil(rows / MAX_CELLS), math.ceil(blocks / MAX_CELLS)
        for r, c in np.argwhere(~np.isfinite(w)):
            key = (name, int(r) // cr, int(c) // block // cb)
            n, fr, fb = cells.get(key, (0, int(r), int(c) // block))
            cells[key] = (n + 1, fr, fb)
    return cells


def _cells(svg) -> list[tuple[dict, str | None]]:
    """(rect attributes, the link around it or None) of every drawn cell of a map or heatmap."""
    linked = [(rect.attrib, a.get("href")) for a in svg.iter("a") for rect in a.iter("rect")]
    inside = {id(r) for a in svg.iter("a") for r in a.iter("rect")}
    return linked + [(r.attrib, None) for r in svg.iter("rect") if id(r) not in inside and "cell" in r.get("class", "")]


def test_the_sample_has_exactly_one_bad_block():
    """The fixture as gguf-py reads it: one q6_K block (row 5, block 1 of blk.0.attn_v.weight) decodes to 256 NaNs
    (GGML-3.1); the page tests below hold the page to this."""
    assert _expected_nonfinite_cells() == {("blk.0.attn_v.weight", 5, 1): (256, 5, 1)}


def test_exactly_the_bad_block_is_coloured_non_finite(nan_page):
    """INSPECT-2.2: a map cell is drawn in the non-finite colour exactly when its block holds a non-finite value;
    every other cell of every map is not."""
    expected = _expected_nonfinite_cells()
    coloured = {}
    for svg in nan_page.svgs("tensor-map"):
        rows, cols = map(int, svg.get("data-grid").split("x"))
        for attrs, _ in _cells(svg):
            if attrs["fill"] == NONFINITE_FILL or "nonfinite" in attrs["class"].split():
                middle_x = float(attrs["x"]) + float(attrs["width"]) / 2       # where on the grid it is drawn
                middle_y = float(attrs["y"]) + float(attrs["height"]) / 2
                cell = (svg.get("data-tensor"), int(middle_y / (float(svg.get("height")) - 2) * rows),
                        int(middle_x / (float(svg.get("width")) - 2) * cols))
                coloured[cell] = (int(attrs["data-row"]), int(attrs["data-block"]))
                assert attrs["fill"] == NONFINITE_FILL and "nonfinite" in attrs["class"].split()
    assert coloured == {key: (r, b) for key, (_, r, b) in expected.items()}


def test_the_bad_tensor_map_draws_every_other_cell_clean(nan_page):
    """INSPECT-2.2: the 16 x 2 map of blk.0.attn_v.weight draws all 32 cells, one per q6_K block (gguf-py's
    geometry), and the 31 without a non-finite value in the clean colour."""
    (svg,) = [s for s in nan_page.svgs("tensor-map") if s.get("data-tensor") == "blk.0.attn_v.weight"]
    name, _, rows, blocks, _ = next(t for t in _gguf_py_tensors() if t[0] == "blk.0.attn_v.weight")
    cells = _cells(svg)
    assert svg.get("data-grid") == f"{rows}x{blocks}" and len(cells) == rows * blocks == 32
    fills = [a["fill"] for a, _ in cells]
    assert (fills.count(COLOURS["clean"]), fills.count(NONFINITE_FILL)) == (31, 1)
    assert [a["class"] for a, _ in cells].count("cell clean") == 31


def test_the_bad_cell_links_to_its_finding_and_names_its_block(nan_page):
    """INSPECT-2.2: the non-finite cell is a link to the finding's row (ggml.scale.nonfinite on that tensor), and
    its tooltip names its row, block and elements (256..511: block 1 of a 256-element q6_K row)."""
    (svg,) = [s for s in nan_page.svgs("tensor-map") if s.get("data-tensor") == "blk.0.attn_v.weight"]
    ((attrs, href),) = [(a, h) for a, h in _cells(svg) if a["fill"] == NONFINITE_FILL]
    index = int(re.fullmatch(r"#finding-(\d+)", href).group(1))
    finding = nan_page.doc["findings"][index]
    assert (finding["code"], finding["tensor"]) == ("ggml.scale.nonfinite", "blk.0.attn_v.weight")
    assert f'<tr id="finding-{index}"' in nan_page.html
    rect = next(r for a in svg.iter("a") for r in a.iter("rect"))
    assert rect.find("title").text == ("blk.0.attn_v.weight row 5, block 1 (elements 256..511): 256 non-finite "
                                       "values, first in row 5 block 1")


def test_heatmap_has_one_cell_per_layer_and_module(nan_page):
    """INSPECT-1.3: one cell per (layer, module kind) of the file's tensors (blk.N.KIND.weight, the rest in the
    row "other"), the invalid one only where the finding is."""
    names = [t[0] for t in _gguf_py_tensors()]
    expected = {(m.group(1), m.group(2)) if (m := re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", n)) else
                ("other", n.split(".")[0]) for n in names}
    (svg,) = nan_page.svgs("layers")
    cells = [a for a, _ in _cells(svg)]
    assert len(cells) == len(expected) == 9
    assert {(a["data-layer"], a["data-module"]) for a in cells} == expected
    verdicts = {(a["data-layer"], a["data-module"]): (a["data-verdict"], a["fill"]) for a in cells}
    assert verdicts.pop(("0", "attn_v")) == ("invalid", COLOURS["invalid"])
    assert set(verdicts.values()) == {("valid", COLOURS["valid"])}


def test_histograms_share_their_axes(nan_page):
    """INSPECT-2.4: every scale and zero-point histogram has the same x range, y range and size."""
    hists = nan_page.svgs("histogram")
    axes = {(h.get("data-x-min"), h.get("data-x-max"), h.get("data-y-max"), h.get("width"), h.get("height"))
            for h in hists}
    assert len(hists) == 3 and len(axes) == 1      # layer 0: scales and zero-points; other: scales
    assert {(h.get("data-layer"), h.get("data-kind")) for h in hists} == {("0", "scales"), ("0", "zeros"),
                                                                          ("other", "scales")}


def test_histograms_count_every_block_scale(nan_page):
    """INSPECT-2.4: layer 0's scale histogram counts one d per block of its quantized tensors and its zero-point
    histogram one dmin per q4_K block (block counts by gguf-py), the NaN d as non-finite."""
    per_type: dict[str, int] = {}
    for t in gguf.GGUFReader(NAN_SAMPLE).tensors:
        if t.name.startswith("blk.0.") and t.tensor_type.name != "F32":
            blocks = t.data.shape[0] * t.data.shape[1] // gguf.GGML_QUANT_SIZES[t.tensor_type][1]
            per_type[t.tensor_type.name] = per_type.get(t.tensor_type.name, 0) + blocks
    titles = {(h.get("data-layer"), h.get("data-kind")): h.find("text").text for h in nan_page.svgs("histogram")}
    assert titles[("0", "scales")] == f"d: {sum(per_type.values())} values"
    assert titles[("0", "zeros")] == f"dmin: {per_type['Q4_K']} values"
    assert "1 non-finite" in nan_page.html.split('data-layer="0" data-kind="scales"', 1)[1].split("</td>", 1)[0]


def test_page_is_self_contained(nan_page):
    """INSPECT-1.2: no script, no URL, no fetched resource; a policy that forbids fetching."""
    html = nan_page.html.lower()
    for needle in ("http://", "https://", "<script", "src=", "<link", "url(", "@import", "<iframe", "<img", "<object"):
        assert needle not in html, needle
    assert "content-security-policy" in html and "default-src 'none'" in html


def test_json_document_carries_the_pictures_and_follows_the_schema(nan_page):
    """INSPECT-1.1: with --html, inspect --json prints the document the page was drawn from, pictures included,
    valid against spec/schemas/report.json; its map data is gguf-py's bad block."""
    doc = schema_for("report")
    jsonschema.Draft202012Validator({"$defs": doc["$defs"], "$ref": "#/$defs/InspectReport"}).validate(nan_page.doc)
    assert nan_page.code == 1
    pictures = {t["tensor"]: t for t in nan_page.doc["pictures"]["tensors"]}
    got = {(name, i, j): (n, r, b) for name, t in pictures.items() for i, j, n, r, b in t["nonfinite"]}
    assert got == _expected_nonfinite_cells()


def test_unwritable_page_path_could_not_run(tmp_path, capsys):
    """QF-2.6: a page path in a folder that does not exist is argument.invalid, exit 2, not a traceback."""
    code = main(["inspect", "--html", str(tmp_path / "missing" / "r.html"), str(NAN_SAMPLE)])
    err = capsys.readouterr().err
    assert code == 2
    assert "'--html' must be a file path that can be written (got No such file or directory) [argument.invalid" in err


@pytest.mark.parametrize("sample", ["gptq_v1_sym_4bit", "fp8_block_nan_byte"])
def test_safetensors_pages_map_their_modules(sample, tmp_path):
    """INSPECT-2.2 on safetensors: every module gets a map of its groups; the FP8 sample's NaN byte (row 3,
    column 5 of down_proj, spec FP8-6.5) colours the cell of row 3's first block alone."""
    written = run_inspect(NAN_SAMPLE.parent / sample, tmp_path / "r.html")
    layers = [r["layer"] for r in written.doc["rows"]]
    assert sorted(t["tensor"] for t in written.doc["pictures"]["tensors"]) == sorted(layers)
    bad = [(s.get("data-tensor"), a["data-row"], a["data-block"]) for s in written.svgs("tensor-map")
           for a, _ in _cells(s) if a["fill"] == NONFINITE_FILL]
    assert bad == ([] if sample.startswith("gptq") else [("model.layers.0.mlp.down_proj", "3", "0")])
