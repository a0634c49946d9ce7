"""A subject under test: its entry point, what it declares it supports, and the process it runs in.

The declaration is a small JSON file (``--subject-file``), strict about unknown keys::

    {
      "level": "validating",
      "supports": {"bits": ["4", "8"], "g_idx": ["trivial", "static_groups"]},
      "claims": "reference-equivalent",
      "expected_failures": [{"case": "gptq_v1/read/b8_.*", "reason": "8-bit zero offset bug, issue #12"}]
    }

``level`` is the conformance level the subject claims (spec/kernels.md KC-4): ``decoder`` (the default:
exact values of conforming input; non-conforming input rejected or decoded by a reading the spec names)
or ``validating`` (additionally rejects every non-conforming input). ``supports`` maps a feature key to
the values the subject handles; a case tagged ``key:value`` with a value outside the list is
*not-applicable* (reported, never dropped). ``zeros`` is ``signed`` (the default: the sign of zero
counts, KC-2.4) or ``numeric`` (+0 == -0: the lower *numeric* level, KC-4.3). ``claims`` is
``conforming`` (the default) or ``reference-equivalent``: an encoder (``quantize``) that claims to write
llama.cpp's own bytes fails on any case where it does not (Q4K-6.2, GGML-5.3). ``v1_zero_fields``
(optional) narrows what the subject does with GPTQ v1 all-ones zero fields to one outcome: ``reject``
(GPTQ-3.4) or ``wrap`` (the field-local wrap reading, GPTQ-4.2); without it any named reading passes at
the decoder level and the report says which one the subject follows. Every expected failure needs a
reason (the onnxruntime filter-file pattern).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from qformats.errors import fail

from .wire import WireError, pack_arrays, receive, send, unpack_arrays

__all__ = ["SubjectDeclaration", "ExpectedFailure", "load_declaration", "Answer", "SubjectProcess"]


class ExpectedFailure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    case: str = Field(description="a regular expression matched against the whole case id")
    reason: str = Field(min_length=1, description="why: an issue link or a sentence; mandatory")

    @field_validator("case")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must say why")
        return value


class SubjectDeclaration(BaseModel):
    """What a subject supports and which of its failures are known (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # the conformance level claimed (KC-4): "decoder" or "validating" (also rejects every non-conforming input)
    level: Literal["decoder", "validating"] = "decoder"
    supports: dict[str, list[str]] = {}
    v1_zero_fields: Literal["reject", "wrap"] | None = None
    expected_failures: list[ExpectedFailure] = []
    # an encoder that claims the reference-equivalent level (llama.cpp's bytes, Q4K-6.2 / GGML-4.4) is held
    # to it: any other bytes fail, where a merely conforming encoder passes with valid blocks
    claims: Literal["conforming", "reference-equivalent"] = "conforming"
    # dequantize results compare bit for bit as values, the sign of zero included; "numeric" declares
    # +0 == -0, a lower level that the report states
    zeros: Literal["signed", "numeric"] = "signed"

    @property
    def claimed_level(self) -> str:
        """The level claimed: ``numeric`` when +0 == -0 is declared (KC-4.3), else ``level``."""
        return "numeric" if self.zeros == "numeric" else self.level

    def unsupported(self, features: tuple[str, ...]) -> list[str]:
        """The case's feature tags this subject does not declare support for."""
        out = []
        for tag in features:
            key, _, value = tag.partition(":")
            if key in self.supports and value not in self.supports[key]:
                out.append(tag)
        return out

    def expected_failure(self, case_id: str) -> str | None:
        for entry in self.expected_failures:
            if re.fullmatch(entry.case, case_id):
                return entry.reason
        return None


def load_declaration(path: str | os.PathLike[str] | None) -> SubjectDeclaration:
    if path is None:
        return SubjectDeclaration()
    try:
        return SubjectDeclaration.model_validate(json.loads(Path(path).read_text()))
    except (OSError, ValueError) as exc:
        detail = exc.errors()[0] if isinstance(exc, ValidationError) else exc
        raise fail("argument.invalid", "subject-file", "a readable JSON subject declaration", str(detail)[:300],
                   file=str(path)) from None


@dataclass
class Answer:
    """What the subject did with one call."""

    status: Literal["ok", "raised", "hung", "crashed", "bad_result", "load_error"]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    kind: str = "array"
    message: str = ""
    seconds: float = 0.0


class SubjectProcess:
    """One worker process running the subject; restarted after a hang or a crash."""

    def __init__(self, entry: str, *, device: str | None = None, timeout: float = 60.0,
                 load_timeout: float = 600.0, memory: int = 8 << 30) -> None:
        self.entry, self.device = entry, device or "numpy"
        self.timeout, self.load_timeout = timeout, load_timeout
        self.memory = memory if self.device in ("numpy", "cpu") else 0   # CUDA maps huge address ranges
        self.proc: subprocess.Popen | None = None
        self.load_error: str | None = None
        self._stderr = tempfile.TemporaryFile()

    # -- process life ------------------------------------------------------------------------
    def _start(self) -> None:
        path = [p or os.getcwd() for p in sys.path]          # "" is the current directory
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        self.proc = subprocess.Popen([sys.executable, "-m", "conformance.worker", self.entry, self.device,
                                      str(self.memory)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env)
        header, _ = self._receive(self.load_timeout)
        if header.get("status") != "ready":
            self.load_error = str(header.get("message") or header)
            self.close()

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
            except OSError:
                pass
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None

    def __enter__(self) -> "SubjectProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._stderr.close()

    def _stderr_tail(self) -> str:
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 600))
        tail = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return tail[-1][:300] if tail else ""

    # -- one call --------------------------------------------------------------------------------
    def _read(self, n: int, deadline: float) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd, out = self.proc.stdout.fileno(), bytearray()
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(n - len(out), 1 << 20))
            if not chunk:
                raise WireError("the subject process ended")
            out += chunk
        return bytes(out)

    def _receive(self, timeout: float) -> tuple[dict[str, Any], bytes]:
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        return receive(self.proc.stdout, lambda n: self._read(n, deadline))

    def start(self) -> str | None:
        """Start the process if it is not running; the load error, if the subject cannot be imported."""
        if self.proc is None and self.load_error is None:
            try:
                self._start()
            except (TimeoutError, WireError, ValueError, OSError) as exc:
                self.load_error = f"the subject did not start: {type(exc).__name__} {exc} {self._stderr_tail()}"
                self.close()
        return self.load_error

    def call(self, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> Answer:
        """Call the subject with keyword ``arrays`` and ``scalars``; never raises for its behaviour."""
        if self.start() is not None:
            return Answer("load_error", message=self.load_error)
        descs, blob = pack_arrays(arrays)
        start = time.monotonic()
        try:
            assert self.proc is not None and self.proc.stdin is not None
            send(self.proc.stdin, {"arrays": descs, "scalars": scalars}, blob)
            header, payload = self._receive(self.timeout)
        except TimeoutError:
            self.close()
            return Answer("hung", message=f"no answer within {self.timeout:g} s; the process was killed",
                          seconds=time.monotonic() - start)
        except (WireError, ValueError, OSError) as exc:
            self.close()
            return Answer("crashed", message=f"{type(exc).__name__}: {exc} {self._stderr_tail()}".strip(),
                          seconds=time.monotonic() - start)
        seconds = time.monotonic() - start
        status = header.get("status")
        if status == "raised":
            where = f" at {header.get('where')}" if header.get("where") else ""
            return Answer("raised", message=f"{header.get('type')}: {header.get('message')}{where}", seconds=seconds)
        if status != "ok":
            return Answer("bad_result", message=str(header.get("message", header))[:500], seconds=seconds)
        try:
            arrays_back = unpack_arrays(header.get("arrays"), payload)
        except WireError as exc:
            return Answer("bad_result", message=str(exc), seconds=seconds)
        dtypes = header.get("dtypes") if isinstance(header.get("dtypes"), dict) else {}
        return Answer("ok", arrays=arrays_back, dtypes={k: str(v) for k, v in dtypes.items()},
                      kind=str(header.get("kind")), seconds=seconds)
