"""Shared by the kernel tests: which cases the public (validating) entry points run in the interpreter."""

from __future__ import annotations

import re

import pytest


@pytest.fixture
def public_cases():
    """A regex of the cases a public entry point runs: every must-reject case (its refusals are its own) and
    every third case that decodes to values. The values of every case are held to the reference through the
    prepared path (tests/kernels/test_prepared.py runs each format's whole matrix there, KC-7), and a public
    call is prepare plus that prepared call (KC-7.1), so the sample proves the wiring without paying the
    interpreter for every case twice on CI's 2 cores."""
    from conformance.runner import select_cases

    def pattern(fmt: str, op: str) -> str:
        cases = select_cases(fmt, op)
        values = [c for c in cases if c.expect != "reject"]
        chosen = [c.id for c in cases if c.expect == "reject"] + [c.id for c in values[::3]]
        return "^(" + "|".join(re.escape(i) for i in chosen) + ")$"

    return pattern
