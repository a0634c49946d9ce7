"""The whole of a refusal, for the tests with teeth (issue 33): code, tensor, constraint, actual value and message.

    assert whole(lambda: pack(codes, bits=5)) == refusal("bits.unsupported", "bits", "one of 2, 3, 4, 8", 5)

Importable by name from any test folder (pyproject.toml's pythonpath holds ``tests``); ``make mutation`` copies it
beside every area's tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qformats.errors import QFormatsError

__all__ = ["whole", "refusal", "whole_in_file"]


def whole(call):
    """Everything a refusal carries: ``call()`` must raise QFormatsError."""
    with pytest.raises(QFormatsError) as info:
        call()
    e = info.value
    return e.code, e.tensor, e.constraint, e.actual, e.message


def whole_in_file(err: QFormatsError) -> tuple:
    """A caught refusal's code, tensor, constraint, actual value and file name (for refusals about a file)."""
    return err.code, err.tensor, err.constraint, err.actual, err.file and Path(err.file).name


def refusal(code, tensor, constraint, actual):
    """What :func:`whole` returns for that refusal: the message as qformats.errors.fail formats it (ERR-1)."""
    shown = actual if isinstance(actual, str) else repr(actual)
    return code, tensor, constraint, actual, f"'{tensor}' must be {constraint} (got {shown})"
