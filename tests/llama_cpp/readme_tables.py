"""The README's llama.cpp tables, generated from the runs of tests/llama_cpp/ (issue 19), never typed.

``python tests/llama_cpp/readme_tables.py --write`` (with ``QFORMATS_LLAMA_CPP`` set) rewrites the text
between each pair of markers in README.md; ``test_readme_tables.py`` requires README.md to be current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

README = Path(__file__).resolve().parents[2] / "README.md"
MARKERS = {"llama-files": "files", "llama-corruptions": "corruptions"}


def render() -> dict[str, str]:
    """Marker name -> the table between its markers."""
    import test_corruption
    import test_llama_quantize as q

    return {"llama-files": q.table([q.row(*f) for f in q.FILE_TYPES]), "llama-corruptions": test_corruption.table()}


def current() -> dict[str, str]:
    """Marker name -> what README.md holds between its markers now."""
    text = README.read_text()
    out = {}
    for name in MARKERS:
        m = re.search(rf"<!-- {name}:start -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
        if m is None:
            raise SystemExit(f"README.md lacks the markers <!-- {name}:start --> / <!-- {name}:end -->")
        out[name] = m.group(1)
    return out


def write(tables: dict[str, str]) -> None:
    text = README.read_text()
    for name, body in tables.items():
        text = re.sub(rf"(<!-- {name}:start -->\n).*?(\n<!-- {name}:end -->)", lambda m: m.group(1) + body + m.group(2),
                      text, flags=re.S)
    README.write_text(text)


if __name__ == "__main__":
    from llama_tools import LLAMA, SKIP_REASON

    if not LLAMA:
        sys.exit(SKIP_REASON)
    tables = render()
    if "--write" in sys.argv:
        write(tables)
    else:
        print("\n\n".join(tables.values()))
