"""Make the GGUF fixture builder importable as ``gguf_builder`` under --import-mode=importlib."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if "gguf_builder" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("gguf_builder", Path(__file__).with_name("gguf_builder.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["gguf_builder"] = _mod
    _spec.loader.exec_module(_mod)
