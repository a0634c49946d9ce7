"""Audits of many checkpoints (issue 32; spec/audit.md): ``audit`` writes the table, ``summarize`` reads it."""

from __future__ import annotations

from .run import audit, run_unit
from .summary import page, summarize

__all__ = ["audit", "run_unit", "summarize", "page"]
