"""The inspect page of the NaN-scale q4_K_M sample, written once by the command itself for every test here."""

from __future__ import annotations

import pytest

from tests.pictures.pages import NAN_SAMPLE, Written, run_inspect


@pytest.fixture(scope="session")
def nan_page(tmp_path_factory) -> Written:
    return run_inspect(NAN_SAMPLE, tmp_path_factory.mktemp("inspect-page") / "report.html")
