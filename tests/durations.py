"""Seconds per test file from JUnit reports of a whole run, for ``--shard`` (tests/conftest.py):

    python tests/durations.py REPORT.xml [REPORT.xml ...] > tests/durations.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(reports: list[str]) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            path = case.get("classname", "").split("::")[0]
            if not path.endswith(".py"):          # junit's classname: tests.fp8.test_x.TestClass -> a module path
                path = _module_path(case.get("classname", ""), case.get("file"))
            seconds[path] += float(case.get("time", 0))
    return {k: round(v, 2) for k, v in sorted(seconds.items())}


def _module_path(classname: str, file: str | None) -> str:
    if file:
        return file
    parts = classname.split(".")
    while parts and not parts[-1].startswith("test"):
        parts.pop()
    return "/".join(parts) + ".py"


if __name__ == "__main__":
    json.dump(per_file(sys.argv[1:]), sys.stdout, indent=0)
    sys.stdout.write("\n")
