"""Make the golden-data loader importable as ``q4k_golden`` under any --import-mode."""

import importlib.util
import sys
from pathlib import Path

if "q4k_golden" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("q4k_golden", Path(__file__).with_name("q4k_golden.py"))
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules["q4k_golden"] = _mod
    _spec.loader.exec_module(_mod)
