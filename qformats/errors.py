"""The closed set of qformats error codes and the one error type that carries them.

Every rejection of input raises :class:`QFormatsError` with a stable ``code`` from
:data:`CODES`. The code, the tensor or field concerned, the constraint and the actual value
are kept as attributes, so callers (the validator, the conformance runner, other libraries'
CI) never parse message text. Messages read like attrs' validators::

    'scales' must be finite float16 (got NaN at [3, 17])

Codes are stable strings, listed in the spec beside the clause they enforce. Adding a code
means adding it here *and* to its spec chapter; ``tests/test_errors.py`` checks both
directions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CODES", "QFormatsError", "fail", "format_actual"]

# code -> (clause, one-line meaning). Sections are owned by one area each.
CODES: dict[str, tuple[str, str]] = {
    # -- generic tensor and argument checks (spec/README.md) -------------------------------
    "tensor.missing": ("QF-2.1", "a required tensor is absent"),
    "tensor.dtype": ("QF-2.2", "a tensor has the wrong dtype"),
    "tensor.shape": ("QF-2.3", "a tensor has the wrong shape or rank"),
    "tensor.nonfinite": ("QF-2.4", "a floating-point tensor holds NaN or infinity"),
    "tensor.unexpected": ("QF-2.5", "a tensor that the layout does not define"),
    "argument.invalid": ("QF-2.6", "a function argument is outside its documented domain"),
    # -- bit packing (spec/README.md, QF-3) ------------------------------------------------
    "bits.unsupported": ("QF-3.1", "field width outside the supported set"),
    "bits.value_range": ("QF-3.2", "a value does not fit in its b-bit field"),
    "bits.length": ("QF-3.3", "the packed axis does not fill whole 32-bit words"),
    # -- GPTQ (spec/gptq.md) ---------------------------------------------------------------
    "gptq.config.invalid": ("GPTQ-6.1", "quantization config value outside its domain"),
    "gptq.config.unknown_key": ("GPTQ-6.4", "config key the spec does not define (warning)"),
    "gptq.config.other_layout": ("GPTQ-6.3", "checkpoint_format names a layout that is not GPTQ v1/v2"),
    "gptq.codes.range": ("GPTQ-3.1", "a weight code is outside [0, 2^b - 1]"),
    "gptq.zero.range": ("GPTQ-3.3", "a zero point is outside [0, 2^b - 1]"),
    "gptq.zero.v1_unrepresentable": ("GPTQ-3.4", "zero point 0 in v1 (stored field all ones)"),
    "gptq.zero.v2_not_representable_in_v1": ("GPTQ-7.2", "v2 -> v1 conversion of a zero point 0"),
    "gptq.scales.nonfinite": ("GPTQ-3.5", "a scale is NaN or infinite"),
    "gptq.g_idx.range": ("GPTQ-5.1", "a g_idx value is outside [0, G)"),
    "gptq.g_idx.group_sizes": ("GPTQ-5.2", "a group does not hold exactly group_size rows"),
    "gptq.g_idx.ignored_without_desc_act": ("GPTQ-5.4", "non-trivial g_idx with desc_act=false (warning)"),
    "gptq.quirk.unknown": ("GPTQ-4.1", "a writer or reader name that qformats does not emulate"),
    "gptq.label.mismatch": ("GPTQ-8.3", "declared checkpoint_format contradicts the zeros"),
}


def format_actual(value: Any) -> str:
    """Render an actual value compactly for a message (NaN stays ``NaN``, not ``nan``)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, str):
        return value
    return repr(value)


class QFormatsError(ValueError):
    """A rejected input: a coded, structured, one-line description of what is wrong.

    Attributes:
        code: stable string from :data:`CODES`.
        clause: the spec clause enforced (defaults to the code's clause).
        tensor: tensor or field name the error concerns, or ``None``.
        constraint: what the value must be, as prose ("finite float16").
        actual: the offending value, rendered for humans.
        file: the file the tensor came from, when known.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        tensor: str | None = None,
        constraint: str | None = None,
        actual: Any = None,
        clause: str | None = None,
        file: str | None = None,
    ) -> None:
        if code not in CODES:
            raise KeyError(f"unregistered qformats error code {code!r}")
        self.code = code
        self.clause = clause or CODES[code][0]
        self.tensor = tensor
        self.constraint = constraint
        self.actual = actual
        self.file = file
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{where}{self.message} [{self.code}, {self.clause}]"

    def as_dict(self) -> dict[str, Any]:
        """The error as a finding-shaped mapping (see DESIGN.md §4)."""
        return {
            "code": self.code,
            "clause": self.clause,
            "tensor": self.tensor,
            "message": self.message,
            "file": self.file,
        }

    def with_file(self, file: str) -> "QFormatsError":
        """Return a copy that names the file the offending tensor came from."""
        return QFormatsError(
            self.code, self.message, tensor=self.tensor, constraint=self.constraint,
            actual=self.actual, clause=self.clause, file=file,
        )


def fail(code: str, tensor: str | None, constraint: str, actual: Any, *, clause: str | None = None) -> QFormatsError:
    """Build the standard error ``'tensor' must be constraint (got actual)``.

    Returned, not raised, so call sites read ``raise fail(...)`` and tracebacks start there.
    """
    subject = f"'{tensor}'" if tensor else "value"
    return QFormatsError(
        code,
        f"{subject} must be {constraint} (got {format_actual(actual)})",
        tensor=tensor,
        constraint=constraint,
        actual=actual,
        clause=clause,
    )
