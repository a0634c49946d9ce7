"""Findings: what a check reports when the input is legal but worth a word (DESIGN.md §4).

Errors (:class:`qformats.errors.QFormatsError`) stop decoding; findings do not. Both carry a
stable code from :data:`qformats.errors.CODES` and the clause it enforces.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_serializer

from .errors import CODES, QFormatsError

__all__ = ["Finding", "finding", "from_error", "plural"]

Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    """One validator finding, in the shape of the CLI's JSON output."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    severity: Severity
    clause: str
    tensor: str | None = None
    message: str
    count: int | None = None   # how many instances one finding stands for (fields, blocks), where countable

    @model_serializer(mode="wrap")
    def _without_empty_count(self, handler):
        """The JSON contract's five keys, and ``count`` only where a finding has one (an extension)."""
        data = handler(self)
        if data.get("count") is None:
            data.pop("count", None)
        return data


def plural(n: int, word: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def finding(code: str, severity: Severity, message: str, *, tensor: str | None = None,
            count: int | None = None) -> Finding:
    """A finding whose clause is the one registered for ``code``."""
    if code not in CODES:
        raise KeyError(f"unregistered qformats code {code!r}")
    return Finding(code=code, severity=severity, clause=CODES[code][0], tensor=tensor, message=message, count=count)


def from_error(err: QFormatsError) -> Finding:
    """An error turned into an error-severity finding (the validator keeps going)."""
    return Finding(code=err.code, severity="error", clause=err.clause, tensor=err.tensor, message=err.message)
