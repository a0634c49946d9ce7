"""qformats conformance: judge any third-party kernel, writer or checkpoint against the spec's cases.

    qformats conformance kernel MODULE:FUNC --format gptq_v2 --op dequantize [--device cuda] [--json]
    qformats conformance checkpoint PATH

From Python: :func:`run_kernel` and :func:`run_checkpoint`; from another library's pytest suite:
``pytest --qformats-kernel mylib.ops:dequant --qformats-format gptq_v2`` (the ``qformats`` plugin).
"""

from .runner import CaseResult, RunResult, STATUSES, run_kernel, select_cases
from .subject import SubjectDeclaration, load_declaration

__all__ = ["run_kernel", "select_cases", "RunResult", "CaseResult", "STATUSES", "SubjectDeclaration",
           "load_declaration"]
