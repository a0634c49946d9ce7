"""q4_K's room has no import circle (Q4K-3.1, Q4K-4: one codec, in the GGUF family's K-quant machinery).

The imports of every module under ``qformats/formats`` (read with ``ast``, relative imports resolved, a
submodule import counting as an import of its packages too, but for the module's own) form a graph; no
circle of it may pass through q4_K's room or the family's package. An import inside a function is an
edge too: deferring it hides a circle from the interpreter, not from the reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import qformats.formats

ROOT = Path(qformats.formats.__file__).parent
PREFIX = "qformats.formats"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join((PREFIX,) + (parts[:-1] if parts[-1] == "__init__" else parts))


def _edges(path: Path, name: str) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):     # deferred imports too: a circle all the same
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            out |= {target} | {f"{target}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    # `import a.b.c` runs a/__init__ and a.b/__init__, except the packages this module is inside: those
    # are already being imported when it runs
    parts = name.split(".")
    mine = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    closed = set()
    for target in out:
        t = target.split(".")
        closed |= {".".join(t[:i]) for i in range(1, len(t) + 1)} - mine
    return closed


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in ROOT.rglob("*.py")}
    return {name: _edges(path, name) & files.keys() - {name} for name, path in files.items()}


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return False


def test_no_import_circle_through_q4k_or_the_family():
    """Q4K-3.1: q4_K's codec lives in formats/ggml; q4_k/codec.py imports it, and nothing imports back."""
    graph = _graph()
    ours = [m for m in graph if m.startswith((f"{PREFIX}.q4_k", f"{PREFIX}.ggml"))]
    assert f"{PREFIX}.q4_k.codec" in ours and f"{PREFIX}.ggml.q4k" in ours
    circles = sorted((m, t) for m in ours for t in graph[m] if _reaches(graph, t, m))
    assert circles == [], f"import circles (module, import on the circle): {circles}"
