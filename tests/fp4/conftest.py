"""tests/fp4's helper module (fp4_fixtures) on the import path, as pyproject's pythonpath does for other areas."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
