"""Make the safetensors fixture builder importable as ``st_builder`` under --import-mode=importlib."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if "st_builder" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("st_builder", Path(__file__).with_name("st_builder.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["st_builder"] = _mod
    _spec.loader.exec_module(_mod)
