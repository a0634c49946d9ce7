"""The qformats conformance suite inside another library's pytest run (entry point ``pytest11``).

    pytest --qformats-kernel mylib.ops:dequant --qformats-format gptq_v2 [--qformats-op matmul]
           [--qformats-device cuda] [--qformats-subject-file subject.json] [--qformats-cases REGEX]

Each case becomes one test item, ``qformats::<case id>``: pass passes, fail and error fail with the
runner's detail, not-applicable skips, expected-failure xfails with its reason, warning passes with
a ``QFormatsWarning``. Without ``--qformats-kernel`` the plugin adds nothing.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

__all__ = ["QFormatsWarning"]


class QFormatsWarning(UserWarning):
    """A case the spec calls informative differed, or a declaration needs attention."""


class CaseFailed(Exception):
    """A case with status fail or error; its message is the runner's detail."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("qformats", "qformats conformance suite")
    group.addoption("--qformats-kernel", metavar="MODULE:FUNC", help="the subject to judge")
    group.addoption("--qformats-format", metavar="FORMAT", help="gptq_v1, gptq_v2, q4_k, spqr, or a GGUF block type (q6_k, iq4_xs, ...)")
    group.addoption("--qformats-op", default="dequantize", help="dequantize (default), matmul, pack, quantize")
    group.addoption("--qformats-device", default=None, help="torch device for the inputs (default: NumPy)")
    group.addoption("--qformats-subject-file", default=None, help="JSON declaration of supported features")
    group.addoption("--qformats-cases", default=None, help="only case ids matching this regular expression")
    group.addoption("--qformats-timeout", type=float, default=60.0, help="seconds per case")


class _Session:
    """The subject process and judging context shared by every item of the run."""

    def __init__(self, config: pytest.Config) -> None:
        from qformats.formats.registry import subject_format

        from .catalog import pinned_digests
        from .subject import SubjectProcess, load_declaration

        opt = config.getoption
        self.entry, self.op = opt("qformats_kernel"), opt("qformats_op")
        self.face = subject_format(opt("qformats_format"))
        self.declaration = load_declaration(opt("qformats_subject_file"))
        self.digests = pinned_digests()
        self.process = SubjectProcess(self.entry, device=opt("qformats_device"), timeout=opt("qformats_timeout"))

    def judge(self, case: Any):
        from .runner import judge_case

        return judge_case(case, self.op, self.face, self.declaration, self.process, self.digests)


class QFormatsSuite(pytest.Collector):
    def collect(self):
        return []


class QFormatsItem(pytest.Item):
    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        result = self.config._qformats_session.judge(self.case)
        if result.status == "not-applicable":
            pytest.skip(result.detail)
        if result.status == "expected-failure":
            pytest.xfail(result.detail)
        if result.status == "warning":
            warnings.warn(QFormatsWarning(f"{self.case.id}: {result.detail}"), stacklevel=1)
        if result.status in ("fail", "error"):
            raise CaseFailed(f"{result.status.upper()} [{', '.join(result.clauses)}] {result.detail}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return "qformats", None, f"qformats conformance {self.case.format} {self.config.getoption('qformats_op')}: " \
                                 f"{self.case.id}"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if not config.getoption("qformats_kernel"):
        return
    if not config.getoption("qformats_format"):
        raise pytest.UsageError("--qformats-kernel needs --qformats-format (gptq_v1, gptq_v2, q4_k, spqr or a GGUF type)")
    from qformats.errors import QFormatsError

    from .runner import select_cases

    try:
        config._qformats_session = _Session(config)
        cases = select_cases(config.getoption("qformats_format"), config.getoption("qformats_op"),
                             config.getoption("qformats_cases"))
    except QFormatsError as err:
        raise pytest.UsageError(f"qformats: {err}") from None
    suite = QFormatsSuite.from_parent(session, name="qformats", nodeid="qformats")
    items.extend(QFormatsItem.from_parent(suite, name=case.id, case=case) for case in cases)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = getattr(session.config, "_qformats_session", None)
    if state is not None:
        state.process.__exit__(None, None, None)
