"""JSON Schema of each format's models, generated from the pydantic models (spec/schemas/).

The committed files in ``spec/schemas/`` must equal what :func:`schema_for` generates;
``tests/test_schema.py`` fails on any drift. Regenerate with ``python -m qformats.schema``.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from . import SPEC_VERSION
from .errors import fail

__all__ = ["FORMATS", "DOCUMENTS", "schema_for", "schema_text", "write_all"]

# format name -> module whose SCHEMA_MODELS are published
FORMATS = {
    "gptq": "qformats.formats.gptq.layout",
    "q4_k": "qformats.formats.q4_k.layout",
    "spqr": "qformats.formats.spqr.layout",
    "awq": "qformats.formats.awq.layout",
    "compressed_tensors": "qformats.formats.ctensors.layout",
    "fp8": "qformats.formats.fp8.layout",
    "fp4": "qformats.formats.fp4.layout",
    "gguf": "qformats.containers.gguf",
}
# the CLI's JSON documents (validate --json, inspect --json, could-not-run): one shape for every format
DOCUMENTS = {"report": "qformats.documents"}


def available_formats() -> list[str]:
    out = []
    for name, module in FORMATS.items():
        try:
            if getattr(importlib.import_module(module), "SCHEMA_MODELS", None):
                out.append(name)
        except ImportError:
            continue
    return out


def schema_for(name: str) -> dict[str, Any]:
    """One JSON Schema document whose ``$defs`` hold every published model of the format."""
    modules = FORMATS | DOCUMENTS
    if name not in modules:
        raise fail("argument.invalid", "format", "one of " + ", ".join(sorted(modules)), name)
    models = importlib.import_module(modules[name]).SCHEMA_MODELS
    defs: dict[str, Any] = {}
    for model in models:
        sub = TypeAdapter(model).json_schema(ref_template="#/$defs/{model}")
        defs.update(sub.pop("$defs", {}))
        defs[model.__name__] = sub
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://qformats.dev/spec/{SPEC_VERSION}/schemas/{name}.json",
        "title": f"qformats {name} {'documents' if name in DOCUMENTS else 'models'} (spec {SPEC_VERSION})",
        "anyOf": [{"$ref": f"#/$defs/{m.__name__}"} for m in models],
        "$defs": dict(sorted(defs.items())),
    }


def schema_text(name: str) -> str:
    return json.dumps(schema_for(name), indent=2, sort_keys=False) + "\n"


def write_all(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in [*available_formats(), *DOCUMENTS]:
        path = directory / f"{name}.json"
        path.write_text(schema_text(name))
        written.append(path)
    return written


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1] / "spec" / "schemas"
    for p in write_all(root):
        print(p)
    sys.exit(0)
