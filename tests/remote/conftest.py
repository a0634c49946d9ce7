"""The hub stand-in as a fixture: started on 127.0.0.1 per test, HF_ENDPOINT pointing at it (REMOTE-2.2)."""

from __future__ import annotations

import pytest

from qformats.remote import http

from .hubstub import Hub


@pytest.fixture
def hub(monkeypatch):
    server = Hub().start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(http, "BACKOFF_S", 0.001)     # REMOTE-3.4's backoff, made short for the suite
    yield server
    server.stop()
