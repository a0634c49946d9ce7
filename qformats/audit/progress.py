"""How an audit shows its progress: a rich bar (units, bytes, ETA) on a terminal, plain lines elsewhere (CI).

The ETA is by bytes, the measure that predicts a unit's time; units of unknown size count as none.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..findings import plural

__all__ = ["Reporter", "PlainLines", "RichBar", "for_stream", "megabytes"]


class Reporter:
    """Silent: the library default. ``start`` once (``total_bytes`` None when a unit's size is unknown, as a remote
    unit's is before it runs), ``unit`` per part file written, ``close`` at the end."""

    def start(self, total: int, total_bytes: int | None, skipped: int) -> None:
        pass

    def unit(self, row: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def outcome(row: dict[str, Any]) -> str:
    if row["verdict"] == "could-not-run":
        return f"could not run ({row['error_code'] or 'internal error'})"
    counts = f"{plural(row['errors'], 'error')}, {plural(row['warnings'], 'warning')}"
    if row.get("tensors") is None:
        return f"{row['verdict']} ({counts})"
    # CKPT-5.1: a verdict says how much it checked and how many tensors it names as not checked
    return (f"{row['verdict']} ({row['tensors_checked']} of {plural(row['tensors'], 'tensor')} checked, "
            f"{row['tensors_unchecked']} named unchecked; {counts})")


class _Counts:
    """Units and bytes done; the ETA by bytes where every size is known, else by units."""

    def begin(self, total: int, total_bytes: int | None) -> None:
        self.total, self.total_bytes, self.done, self.done_bytes = total, total_bytes, 0, 0
        self.began = time.monotonic()

    def add(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.done_bytes += row["bytes"] or 0

    def measure(self) -> tuple[float, float]:
        """(done, total) in the ETA's measure."""
        if self.total_bytes:
            return self.done_bytes, self.total_bytes
        return self.done, self.total

    def bytes_text(self) -> str:
        of = f"/{megabytes(self.total_bytes)}" if self.total_bytes is not None else ""
        return f"{megabytes(self.done_bytes)}{of}"


class PlainLines(Reporter, _Counts):
    """One line per unit, for logs: ``audit 3/20 12.0 MB/40.1 MB ETA 0:00:12 PATH: invalid (2 errors, ...)``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def start(self, total: int, total_bytes: int | None, skipped: int) -> None:
        self.begin(total, total_bytes)
        already = f"; {plural(skipped, 'unit')} already in the table (--resume)" if skipped else ""
        size = f", {megabytes(total_bytes)}" if total_bytes is not None else ""
        self._line(f"audit: {plural(total, 'unit')} to run{size}{already}")

    def unit(self, row: dict[str, Any]) -> None:
        self.add(row)
        self._line(f"audit {self.done}/{self.total} {self.bytes_text()} ETA {self._eta()} {row['unit']}: "
                   f"{outcome(row)}")

    def _eta(self) -> str:
        done, total = self.measure()
        if done >= total:
            return "0:00:00"
        if not done:
            return "-:--:--"
        seconds = int((time.monotonic() - self.began) * (total - done) / done)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()


class RichBar(Reporter, _Counts):
    """rich's progress bar on a terminal: units done, bytes done of the total, the ETA, the last unit."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("audit"), BarColumn(), TextColumn("{task.fields[units]}"),
                                 TextColumn("{task.fields[bytes]}"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[last]}"), console=Console(file=stream))

    def start(self, total: int, total_bytes: int | None, skipped: int) -> None:
        self.begin(total, total_bytes)
        self.progress.start()
        self.task = self.progress.add_task("audit", total=self.measure()[1] or 1, units=f"0/{total} units",
                                           bytes=self.bytes_text(), last="")

    def unit(self, row: dict[str, Any]) -> None:
        self.add(row)
        self.progress.update(self.task, completed=self.measure()[0], units=f"{self.done}/{self.total} units",
                             bytes=self.bytes_text(), last=f"{row['unit'][-40:]}: {row['verdict']}")

    def close(self) -> None:
        self.progress.stop()


def for_stream(stream: TextIO = sys.stderr) -> Reporter:
    """The bar on a terminal when rich is installed (qformats[audit]), else plain lines."""
    if stream.isatty():
        try:
            return RichBar(stream)
        except ImportError:
            pass
    return PlainLines(stream)
