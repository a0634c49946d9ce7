"""The pytest plugin (entry point pytest11): the same cases as pytest items in another library's suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MUTANTS = Path(__file__).parents[1] / "mutants"


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env_path = f"{MUTANTS}"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": env_path})


def test_plugin_runs_a_conforming_kernel_as_passing_items(tmp_path):
    """`pytest --qformats-kernel M:F --qformats-format spqr` in a project without tests runs the spqr matrix."""
    done = _pytest(tmp_path, "--qformats-kernel", "conformance.reference:spqr_dequantize", "--qformats-format", "spqr")
    assert done.returncode == 0, done.stdout[-2000:]
    from conformance import select_cases
    assert f"{len(select_cases('spqr', 'dequantize'))} passed" in done.stdout


def test_plugin_fails_the_items_a_mutant_gets_wrong(tmp_path):
    """A wrong kernel fails exactly the items of its bug, each naming the case and the clause."""
    done = _pytest(tmp_path, "--qformats-kernel", "spqr_bugs:permutation_not_applied", "--qformats-format", "spqr",
                   "-rf")
    assert done.returncode == 1
    failed = {line.split("::", 1)[1].split(" ")[0] for line in done.stdout.splitlines() if line.startswith("FAILED")}
    from conformance import select_cases
    permuted = {c.id for c in select_cases("spqr", "dequantize") if "perm:act_order" in c.features or "actorder" in c.id}
    assert failed == permuted and "spqr/read/csr_0_act_order" in failed
    total = len(select_cases("spqr", "dequantize"))
    assert f"{len(permuted)} failed, {total - len(permuted)} passed" in done.stdout


def test_plugin_maps_declarations_to_skip_and_xfail(tmp_path):
    """not-applicable items skip, expected failures xfail with their reason."""
    decl = tmp_path / "subject.json"
    decl.write_text('{"supports": {"perm": ["identity"]}, "expected_failures": '
                    '[{"case": "spqr/read/third_party/.*", "reason": "upstream layers use act-order"}]}')
    done = _pytest(tmp_path, "--qformats-kernel", "spqr_bugs:permutation_not_applied", "--qformats-format", "spqr",
                   "--qformats-subject-file", str(decl))
    assert done.returncode == 0, done.stdout[-2000:]
    assert "skipped" in done.stdout and "xfailed" in done.stdout and "failed" not in done.stdout.replace("xfailed", "")


def test_plugin_is_silent_without_its_options(tmp_path):
    """Without --qformats-kernel the plugin adds no items to a suite."""
    (tmp_path / "test_one.py").write_text("def test_one(): pass\n")
    done = _pytest(tmp_path)
    assert "1 passed" in done.stdout
