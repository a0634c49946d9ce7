"""The JSON documents ``validate --json`` and ``inspect --json`` print, as models (spec/schemas/report.json).

One shape for every format (GPTQ, AWQ, compressed-tensors, SpQR, GGUF): ``validate --json`` prints a
:class:`ValidateReport`; ``inspect --json`` the same keys plus ``rows`` (the table) and ``header`` (a
GGUF file's header summary, else null): an :class:`InspectReport`. When the command could not run
(exit 2: a path that does not exist, a format qformats does not cover, nothing to check, an internal
error) both print a :class:`CouldNotRun` instead, so that a script can parse every outcome. Usage errors
(an unknown option) are argparse's: usage text on stderr, exit 2, no JSON.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import QFormatsError
from .findings import Finding
from .pictures.data import Pictures

__all__ = ["ValidateReport", "InspectReport", "CouldNotRun", "could_not_run", "SCHEMA_MODELS"]

_FORBID = ConfigDict(extra="forbid")


class KindCount(BaseModel):
    model_config = _FORBID

    total: int = Field(ge=0)
    checked: int = Field(ge=0)


class NotChecked(BaseModel):
    """A tensor no check reached, and why (metadata, a foreign layout, a type qformats cannot decode)."""

    model_config = _FORBID

    tensor: str
    kind: str | None = None
    reason: str


class NotRead(BaseModel):
    """Something beside the tensors that was not judged: a file of the checkpoint's directory, GGUF metadata."""

    model_config = _FORBID

    what: str
    reason: str


class SampleInfo(BaseModel):
    """``--sample N``: the layers (GGUF: tensors) checked; every other one is in ``not_checked``."""

    model_config = _FORBID

    asked: int = Field(ge=0, description="N")
    checked: list[str] = Field(description="the layers (GGUF: tensors) sampled, in the model's order")


class RemoteInfo(BaseModel):
    """A remote checkpoint's reads (REMOTE-4.3): body bytes received and requests made."""

    model_config = _FORBID

    url: str = Field(description="hf://ORG/REPO@COMMIT, or the URL's folder")
    revision: str | None = Field(description="the commit the listing was pinned to (hf://), else null")
    files: int = Field(ge=0, description="files listed")
    bytes_listed: int = Field(ge=0, description="their sizes, summed (what downloading them would take)")
    bytes_fetched: int = Field(ge=0, description="body bytes received")
    requests: int = Field(ge=0, description="HTTP requests made (HEAD and ranged GET, retries included)")


class Summary(BaseModel):
    """The same keys for every format: counts of layers, findings and tensors, and what was not checked."""

    model_config = _FORBID

    layers: int = Field(ge=0, description="rows in layers: quantized modules (safetensors) or checked tensors (GGUF)")
    errors: int = Field(ge=0)
    warnings: int = Field(ge=0)
    info: int = Field(ge=0)
    container: str = Field(description="safetensors (one file or an unindexed directory), sharded, gguf, or "
                           "unreadable (a malformed file: nothing could be read)")
    tensors: int = Field(ge=0, description="every tensor of the checkpoint")
    tensors_checked: int = Field(ge=0)
    tensors_by_kind: dict[str, KindCount] = Field(description="kind (quantized, float, metadata, ...) -> counts")
    not_checked: list[NotChecked]
    modules_not_checked: int = Field(ge=0, description="modules of layouts qformats does not decode (QF-5.2)")
    not_read: list[NotRead] = Field(default_factory=list, description="files and metadata not judged (CKPT-5.1)")
    strict: bool | None = Field(None, description="present, true, under --strict")
    sample: SampleInfo | None = Field(None, description="present under --sample N (and for remote paths, whose "
                                      "default is 0): what was checked (spec/remote.md REMOTE-4)")
    remote: RemoteInfo | None = Field(None, description="present for hf:// and http(s):// paths: what was fetched")


class Row(BaseModel):
    """One layer (or GGUF tensor): its name and what the format's checks measured; keys vary by format."""

    model_config = ConfigDict(extra="allow")

    layer: str


class ValidateReport(BaseModel):
    """``qformats validate --json``."""

    model_config = _FORBID

    path: str
    verdict: Literal["valid", "invalid"]
    format: str
    findings: list[Finding]
    layers: list[Row]
    summary: Summary


class GGUFHeaderSummary(BaseModel):
    """A GGUF file's header facts (spec/ggml.md GGML-7.1)."""

    model_config = _FORBID

    type: str | None = Field(description="general.type (\"model\" when absent; null when not a string)")
    architecture: str | None = Field(description="general.architecture, or null")
    file_type: int | str | None = Field(description="general.file_type as stored (llama_ftype), or null")
    file_type_name: str | None = Field(description="llama.cpp's name of it (MOSTLY_Q4_K_M), or null")
    tensors: int = Field(ge=0)
    parameters: int = Field(ge=0, description="every tensor's elements")
    bits_per_weight: float | None = Field(description="every tensor's data bytes x 8 / every tensor's elements")


class InspectReport(ValidateReport):
    """``qformats inspect --json``: the validate document plus the table's rows and the GGUF header."""

    rows: list[Row]
    header: GGUFHeaderSummary | None
    pictures: Pictures | None = Field(None, description="with --html only: what the page draws (spec/checkpoints.md "
                                      "INSPECT-2)")


class ErrorInfo(BaseModel):
    model_config = _FORBID

    code: str | None = Field(description="the registered qformats code; null for an internal error")
    clause: str | None
    message: str
    tensor: str | None = None
    file: str | None = None


class CouldNotRun(BaseModel):
    """What ``--json`` prints when the command could not run (exit 2)."""

    model_config = _FORBID

    path: str
    verdict: Literal["could-not-run"]
    error: ErrorInfo


def could_not_run(path: str, err: BaseException) -> dict[str, Any]:
    """The could-not-run document of an error: a QFormatsError's code and clause, or an internal error's type."""
    if isinstance(err, QFormatsError):
        info = ErrorInfo(code=err.code, clause=err.clause, message=err.message, tensor=err.tensor, file=err.file)
    else:
        info = ErrorInfo(code=None, clause=None, message=f"internal error: {type(err).__name__}: {err}")
    return CouldNotRun(path=str(path), verdict="could-not-run", error=info).model_dump()


SCHEMA_MODELS = (ValidateReport, InspectReport, CouldNotRun)
