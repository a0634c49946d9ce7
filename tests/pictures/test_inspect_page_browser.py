"""The inspect page of the NaN-scale q4_K_M sample in a real browser (INSPECT-1.2, INSPECT-2.2): headless Chromium,
driven with the results page's test helper, opens the file offline; the pixel at the bad block's cell is the
non-finite colour and a click on it opens the finding. The screenshot is kept at
build/test-artifacts/inspect_page.png. Without Chromium this fails, as the results page's browser test does.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

import pytest

from test_html_browser import CHROMIUM, Browser          # tests/conformance: the DevTools-over-a-pipe driver

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "build" / "test-artifacts" / "inspect_page.png"
BAD_CELL = "svg.tensor-map[data-tensor='blk.0.attn_v.weight'] rect.nonfinite"
CLEAN_CELL = "svg.tensor-map[data-tensor='blk.0.attn_v.weight'] rect.clean[data-row='5'][data-block='0']"


def _one_pixel_png(data: bytes) -> tuple[int, int, int]:
    """The RGB of a 1 x 1 PNG: with no left or upper neighbour every PNG filter leaves the bytes as stored."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert (width, height, depth) == (1, 1, 8) and colour in (2, 6)      # 8-bit RGB or RGBA
    raw = zlib.decompress(idat)
    return raw[1], raw[2], raw[3]


def _pixel_at_middle(b: Browser, selector: str) -> tuple[int, int, int]:
    """The screen's pixel at the middle of an element, after scrolling it into view."""
    x, y = b.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
                " const r = e.getBoundingClientRect(); return [r.x + r.width / 2 + scrollX, r.y + r.height / 2 + scrollY]; })()")
    shot = b.page("Page.captureScreenshot", {"format": "png", "clip": {"x": x, "y": y, "width": 1, "height": 1,
                                                                        "scale": 1}})
    return _one_pixel_png(base64.b64decode(shot["data"]))


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{v:02x}" for v in rgb)


@pytest.fixture(scope="module")
def browser(nan_page, tmp_path_factory):
    if not (shutil.which(CHROMIUM) or os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium); "
                    "QFORMATS_CHROMIUM may name another Chromium")
    b = Browser(CHROMIUM, tempfile.mkdtemp(prefix="profile-", dir=tmp_path_factory.mktemp("inspect-browser")))
    try:
        b.open(nan_page.path.as_uri())
        yield b
    finally:
        b.close()


def test_page_makes_no_request_beyond_its_own_file(browser):
    """INSPECT-1.2: the only request is the file itself, and nothing raised."""
    urls = [e["params"]["request"]["url"] for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
    assert urls and all(u.startswith("file://") for u in urls) and len(set(urls)) == 1, urls
    assert not [e for e in browser.events if e.get("method") == "Runtime.exceptionThrown"]


def test_screenshot_pixel_at_the_bad_block_is_the_non_finite_colour(browser):
    """INSPECT-2.2: on screen, the bad block's cell (row 5, block 1) is the non-finite red and its clean neighbour
    in the same row (block 0) is not; a screenshot of the map is kept for people to look at."""
    assert browser.js(f"document.querySelectorAll({json.dumps('svg.tensor-map rect.nonfinite')}).length") == 1
    assert browser.js(f"[document.querySelector({json.dumps(BAD_CELL)}).dataset.row, "
                      f"document.querySelector({json.dumps(BAD_CELL)}).dataset.block]") == ["5", "1"]
    assert _hex(_pixel_at_middle(browser, BAD_CELL)) == "#b00020"
    assert _hex(_pixel_at_middle(browser, CLEAN_CELL)) == "#dfe7ef"
    browser.js("window.scrollTo(0, 0)")
    data = browser.screenshot(SCREENSHOT)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_clicking_the_bad_cell_opens_its_finding(browser):
    """INSPECT-2.2: a real click on the cell follows its link to the finding's row."""
    browser.click(BAD_CELL)
    browser.wait_for("location.hash === '#finding-0'", timeout=5)
    assert browser.js("document.querySelector('#finding-0 code').textContent") == "ggml.scale.nonfinite"
