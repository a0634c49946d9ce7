"""The failure classes the fuzz's ``remote`` and ``audit`` entry points found on 2026-11-29 (tests/fuzz/services.py),
each closed at its root: the input rebuilt from a bundled fixture, the whole answer asserted (issue #33: no input
reaches an internal error, a hang or a write to the input)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from qformats.audit import audit
from qformats.audit.table import rows
from qformats.cli import main
from qformats.errors import QFormatsError
from qformats.validate import validate

SAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "checkpoints"
CKPT = SAMPLES / "gptq_v1_sym_4bit"


def _error(call) -> QFormatsError:
    with pytest.raises(QFormatsError) as err:
        call()
    return err.value


# -- paths the file system cannot look at: a row, not an internal error (a NUL: checkpoints/ CKPT-1.2) ----------

def test_an_audit_unit_whose_name_is_too_long_is_a_could_not_run_row(tmp_path):
    """AUDIT-2.1 / AUDIT-3.1: a unit the file system refuses to stat (ENAMETOOLONG) is a row that says why; the
    fuzz met an OSError from Path.is_file() instead, which ended the whole audit."""
    name = "a" * 5000
    done = audit([name], tmp_path / "out")
    (row,) = rows(tmp_path / "out")
    assert done["by_verdict"] == {"valid": 0, "invalid": 0, "could-not-run": 1}
    assert (row["unit"], row["verdict"], row["error_code"], row["bytes"]) == (name, "could-not-run",
                                                                               "ckpt.path.unreadable", 0)
    assert row["error"] == f"{name}: value must be a readable path (got File name too long) " \
                           "[ckpt.path.unreadable, CKPT-1.2]"


# -- audit summarize's page: replaced as a whole, never written through -------------------------------------

@pytest.fixture
def table(tmp_path) -> Path:
    out = tmp_path / "table"
    audit([str(CKPT)], out)
    return out


def _summarize(out: Path, capsys) -> tuple[int, str]:
    code = main(["audit", "summarize", str(out)])
    return code, capsys.readouterr().err


def test_a_page_name_that_is_a_link_is_replaced_not_written_through(table, tmp_path, capsys):
    """QF-1.3: DIR/summary.html as a symbolic link to another file (here the checkpoint's config.json): the link
    is replaced by the page; the file it pointed to is unchanged (the fuzz saw config.json overwritten)."""
    victim = tmp_path / "victim"
    shutil.copytree(CKPT, victim)
    before = (victim / "config.json").read_bytes()
    os.symlink(victim / "config.json", table / "summary.html")
    assert _summarize(table, capsys) == (0, "")
    page = table / "summary.html"
    assert not page.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
    assert (victim / "config.json").read_bytes() == before


def test_a_page_name_that_is_a_fifo_is_replaced_without_blocking(table, capsys):
    """QF-1.3: a FIFO at DIR/summary.html would block a writer that opens it until a reader comes; the page is
    renamed over it instead."""
    os.mkfifo(table / "summary.html")

    def blocked(*_):
        raise TimeoutError("audit summarize blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, blocked)   # a regression blocks in open(): fail rather than hang
    signal.alarm(20)
    try:
        assert _summarize(table, capsys) == (0, "")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert (table / "summary.html").is_file()


def test_a_page_name_that_is_a_directory_is_refused(table, capsys):
    """QF-1.3: a directory at the page's path is could-not-run argument.invalid naming --html (the fuzz met an
    IsADirectoryError)."""
    (table / "summary.html").mkdir()
    code, err = _summarize(table, capsys)
    assert (code, err) == (2, f"qformats: {table / 'summary.html'}: '--html' must be a file path, not an existing "
                              f"directory (got {table / 'summary.html'}) [argument.invalid, QF-2.6]\n")


def test_inspect_html_into_the_input_is_refused(tmp_path, capsys):
    """QF-1.2 / QF-1.3: inspect --html naming a file of the checkpoint inspected (or a link to one) is refused
    before anything is written."""
    ckpt = Path(shutil.copytree(CKPT, tmp_path / "ckpt"))
    before = (ckpt / "config.json").read_bytes()
    os.symlink(ckpt / "config.json", tmp_path / "page.html")
    code = main(["inspect", str(ckpt), "--html", str(tmp_path / "page.html")])
    assert (code, capsys.readouterr().err) == (
        2, f"qformats: {tmp_path / 'page.html'}: '--html' must be outside the input (qformats never writes to its "
           f"input) (got {tmp_path / 'page.html'}) [argument.invalid, QF-2.6]\n")
    assert (ckpt / "config.json").read_bytes() == before


def test_conformance_matrix_html_onto_its_own_run_file_is_refused(tmp_path, capsys):
    """QF-1.3: `conformance matrix RUN.json --html RUN.json` would replace the run it reads."""
    run = tmp_path / "run.json"
    run.write_text('{"subject": "a", "format": "gptq_v1", "op": "dequantize", "cases": [{"id": "c", "status": "pass"}]}')
    before = run.read_bytes()
    code = main(["conformance", "matrix", str(run), "--html", str(run)])
    assert (code, capsys.readouterr().err) == (
        2, f"qformats: {run}: '--html' must be outside the input (qformats never writes to its input) (got {run}) "
           f"[argument.invalid, QF-2.6]\n")
    assert run.read_bytes() == before


def test_a_directory_named_like_a_temporary_part_is_left_alone(table, capsys):
    """AUDIT-3.1: --resume removes the temporaries an interrupted audit left; a directory of such a name is not
    one (the fuzz met an IsADirectoryError from unlink) and stays, and the audit goes on."""
    odd = table / ".part-0123.parquet.7.tmp"
    odd.mkdir()
    code = main(["audit", str(CKPT), "--out", str(table), "--resume"])
    assert code == 0 and odd.is_dir() and len(rows(table)) == 1
    assert "1 unit (0 run now, 1 already in the table)" in capsys.readouterr().out


# -- remote addresses the HTTP client cannot send ------------------------------------------------------------

@pytest.mark.parametrize("url, why", [
    ("http://[::1/x.gguf", "ValueError: Invalid IPv6 URL"),
    ("http://127.0.0.1:9/\u00e9.safetensors", "UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9'"),
    ("http://127.0.0.1:9/a b.safetensors", "InvalidURL: URL can't contain control characters."),
], ids=["ipv6", "non-ascii", "space"])
def test_a_url_the_client_cannot_send_is_remote_url_invalid(url, why):
    """REMOTE-2.1: urllib and http.client raise ValueError for these before any byte is sent (the fuzz met it as
    an internal error); it is could-not-run remote.url.invalid naming the URL."""
    err = _error(lambda: validate(url))
    assert (err.code, err.constraint, err.file) == (
        "remote.url.invalid", "an http(s) URL of ASCII characters without spaces (percent-encode others)", url)
    assert err.actual.startswith(why)
