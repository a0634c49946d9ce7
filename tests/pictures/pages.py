"""Pages written by `qformats inspect --json --html` for the tests here, and their inline SVG parsed as XML."""

from __future__ import annotations

import contextlib
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from qformats.cli import main

ROOT = Path(__file__).resolve().parents[2]
NAN_SAMPLE = ROOT / "fixtures" / "checkpoints" / "q4_k_m_nan_scale.gguf"   # qformats.samples:q4_k_m_nan_scale_gguf
SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)


class Written:
    """What ``qformats inspect --json --html`` wrote: the page, its file, the JSON document and the exit code."""

    def __init__(self, html_path: Path, doc: dict, code: int):
        self.path, self.doc, self.code = html_path, doc, code
        self.html = html_path.read_text(encoding="utf-8")

    def svgs(self, cls: str) -> list[ET.Element]:
        """Every inline <svg> whose class list holds ``cls``, parsed as XML (a parse error fails the test)."""
        found = [ET.fromstring(text) for text in SVG.findall(self.html)]
        return [s for s in found if cls in s.get("class", "").split()]


def run_inspect(path: Path, out: Path) -> Written:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["inspect", "--json", "--html", str(out), str(path)])
    return Written(out, json.loads(stdout.getvalue()), code)
