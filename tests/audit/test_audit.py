"""`qformats audit` (spec/audit.md AUDIT-2, AUDIT-3): one part file per unit, resumable, each unit run once."""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from safetensors import safe_open

from qformats import __version__
from qformats.audit import audit, run_unit
from qformats.audit.table import parts, rows
from qformats.audit.units import read_list
from qformats.cli import main
from qformats.errors import QFormatsError

from .conftest import FIXTURES, fixture_units

MISSING = "/nonexistent/qformats-audit-unit"
RUNS: Counter = Counter()         # units run by _counted, by source (the serial audit runs them in this process)


def _counted(work: dict) -> dict:
    RUNS[work["unit"]["source"]] += 1
    return run_unit(work)


def _units() -> list[str]:
    """The 19 fixture checkpoints and a path that does not exist: 20 units."""
    return [*fixture_units(), MISSING]


def _timeless(out: Path) -> list[dict]:
    return [{**row, "seconds": None} for row in rows(out)]


class Interrupt:
    """on_row hook: Ctrl-C after the K-th part file is written."""

    def __init__(self, k: int) -> None:
        self.k, self.seen = k, 0

    def __call__(self, row: dict) -> None:
        self.seen += 1
        if self.seen == self.k:
            raise KeyboardInterrupt


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """An uninterrupted serial --deep audit of the 20 units."""
    out = tmp_path_factory.mktemp("audit") / "whole"
    audit(_units(), out, deep=True)
    return out


def test_verdicts_and_codes_match_the_fixture_manifest(whole):
    """AUDIT-3.1: each fixture's row has the verdict and error codes fixtures/manifest.json expects of it."""
    cases = {c["files"][0]["path"].split("/")[1]: c["expect"] for c in json.loads(
        (FIXTURES / "manifest.json").read_text())["cases"] if c["files"][0]["path"].startswith("checkpoints/")}
    got = {Path(r["unit"]).name: r for r in rows(whole) if r["unit"] != MISSING}
    assert set(got) == set(cases) and len(got) == 19
    for name, expect in cases.items():
        assert got[name]["verdict"] == expect["verdict"], name
        assert set(expect["codes"]) <= set(got[name]["finding_codes"]), name


def test_a_unit_that_cannot_run_is_a_row(whole):
    """AUDIT-3.1: a path that does not exist is a could-not-run row with its error (CKPT-1.1), not the audit's end."""
    row = next(r for r in rows(whole) if r["unit"] == MISSING)
    assert (row["verdict"], row["error_code"], row["format"], row["finding_codes"]) == (
        "could-not-run", "ckpt.path.missing", None, [])
    assert row["error"].endswith("[ckpt.path.missing, CKPT-1.1]")


def test_rows_are_keyed_by_repo_revision_file_version_options(whole):
    """AUDIT-2.1: a directory is repo=its path, file=''; a file is repo=its directory, file=its name."""
    by_unit = {r["unit"]: r for r in rows(whole)}
    gguf, directory = str(FIXTURES / "checkpoints" / "q4_k.gguf"), str(FIXTURES / "checkpoints" / "awq_gemm")
    assert [by_unit[gguf][k] for k in ("repo", "revision", "file")] == [str(FIXTURES / "checkpoints"), "", "q4_k.gguf"]
    assert [by_unit[directory][k] for k in ("repo", "revision", "file")] == [directory, "", ""]
    assert {r["qformats_version"] for r in rows(whole)} == {__version__}
    assert {r["options"] for r in rows(whole)} == {'{"deep":true,"format":"auto","sample":null}'}
    assert sorted(p.name for p in parts(whole)) == sorted(f"part-{r['key']}.parquet" for r in rows(whole))


def test_interrupted_audit_resumes_running_each_unit_once(whole, tmp_path):
    """AUDIT-3.2: interrupted after 7 units and resumed, every unit has run exactly once, the 7 part files are
    untouched (bytes and mtime) and the table equals the uninterrupted audit's."""
    RUNS.clear()
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        audit(_units(), out, deep=True, process=_counted, on_row=Interrupt(7))
    first = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in parts(out)}
    assert len(first) == 7 and sum(RUNS.values()) == 7
    done = audit(_units(), out, deep=True, resume=True, process=_counted)
    assert (done["units"], done["run"], done["skipped"]) == (20, 13, 7)
    assert RUNS == Counter({unit: 1 for unit in _units()})
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in first} == first
    assert _timeless(out) == _timeless(whole)


def test_a_resumed_audit_counts_the_units_it_skipped_from_their_part_files(whole, tmp_path):
    """AUDIT-3.2: "The audit's counts are of the units named: a unit skipped is counted from its part file"; the
    resumed audit's counts equal the uninterrupted one's, by verdict."""
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        audit(_units(), out, deep=True, on_row=Interrupt(7))
    done = audit(_units(), out, deep=True, resume=True)
    assert done["by_verdict"] == dict(Counter({"valid": 0, "invalid": 0, "could-not-run": 0}) +
                                      Counter(r["verdict"] for r in rows(whole)))
    assert done["by_verdict"]["could-not-run"] == 1 and sum(done["by_verdict"].values()) == 20


def test_a_damaged_part_of_a_skipped_unit_is_refused_before_any_unit_runs(tmp_path):
    """AUDIT-3.2: a skipped unit's part file "is read and checked (AUDIT-3.3) before any unit runs"."""
    out = tmp_path / "out"
    audit(fixture_units()[:1], out)
    [part] = parts(out)
    part.write_bytes(b"PAR1 not a part file")
    RUNS.clear()
    with pytest.raises(QFormatsError) as err:
        audit(fixture_units()[:3], out, resume=True, process=_counted)
    assert (err.value.code, err.value.tensor, err.value.constraint, err.value.file) == (
        "audit.table.invalid", part.name, "a Parquet file", str(part))
    assert not RUNS and parts(out) == [part]


def test_part_files_of_units_not_named_are_left_to_summarize(tmp_path, capsys):
    """AUDIT-3.2: "part files of units not named are not read by the audit (summarize reads the whole table)"."""
    out = tmp_path / "out"
    audit(fixture_units()[:1], out)
    stray = out / "part-0123456789abcdef01234567.parquet"
    stray.write_bytes(b"PAR1 not a part file")
    done = audit(fixture_units()[:2], out, resume=True)
    assert (done["units"], done["run"], done["skipped"], sum(done["by_verdict"].values())) == (2, 1, 1, 2)
    assert main(["audit", "summarize", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"qformats: {stray}: '{stray.name}' must be a Parquet file (got ")


def test_interrupted_pool_audit_resumes_only_the_missing_units(whole, tmp_path, monkeypatch):
    """AUDIT-3.2 on the process pool (2 workers): the resumed run runs exactly the units without a part file."""
    out = tmp_path / "pool"
    with pytest.raises(KeyboardInterrupt):
        audit(_units(), out, deep=True, jobs=2, on_row=Interrupt(5))
    written = {pq.read_table(p).column("unit")[0].as_py() for p in parts(out)}
    assert len(written) == 5
    RUNS.clear()
    audit(_units(), out, deep=True, resume=True, process=_counted)
    assert set(RUNS) == set(_units()) - written and set(RUNS.values()) == {1}
    assert _timeless(out) == _timeless(whole)


def test_a_directory_with_part_files_needs_resume(whole):
    """AUDIT-3.1: auditing into a directory that holds an audit without --resume is refused (audit.out.exists)."""
    with pytest.raises(QFormatsError) as err:
        audit(_units()[:1], whole, deep=True)
    assert str(err.value) == (f"{whole}: 'out' must be a directory without part files, or --resume to continue its "
                              f"audit (got 20 part files) [audit.out.exists, AUDIT-3.1]")


def test_stale_temporary_parts_are_not_the_table(tmp_path):
    """AUDIT-3.1: a part file an interrupted write left under its temporary name is not read, and --resume
    clears it; only renamed part files are the table."""
    out = tmp_path / "out"
    audit(fixture_units()[:2], out)
    stale = out / ".part-0123.parquet.99.tmp"
    stale.write_bytes(b"PAR1 half written")
    assert len(rows(out)) == 2
    audit(fixture_units()[:3], out, resume=True)
    assert not stale.exists() and len(rows(out)) == 3


def test_one_unit_named_twice_is_one_row(tmp_path):
    """AUDIT-2.1: two spellings of one path are one key, so one unit."""
    path = fixture_units()[0]
    done = audit([path, path + "/", path + "/."], tmp_path / "out")
    assert done["units"] == 1 and len(rows(tmp_path / "out")) == 1


def test_list_file_names_units_with_comments(tmp_path):
    """AUDIT-2.2: --list FILE: one unit a line, blank lines and # comments skipped."""
    listing = tmp_path / "units.txt"
    listing.write_text(f"# two fixtures\n{fixture_units()[0]}\n\n  {fixture_units()[1]}  \n# end\n")
    assert read_list(str(listing)) == fixture_units()[:2]


def test_unreadable_list_is_could_not_run(tmp_path, capsys):
    """AUDIT-2.2: a --list that cannot be read: exit 2, audit.list.unreadable."""
    assert main(["audit", "--list", str(tmp_path / "absent.txt"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qformats: {tmp_path / 'absent.txt'}: 'list' must be a readable UTF-8 file of units, one "
                          "per line (got FileNotFoundError: ")
    assert err.endswith("[audit.list.unreadable, AUDIT-2.2]\n")


LIST_RULE = "a readable UTF-8 file of units, one per line"


def _list_refusal(path) -> QFormatsError:
    with pytest.raises(QFormatsError) as err:
        read_list(str(path))
    assert (err.value.code, err.value.tensor, err.value.file) == ("audit.list.unreadable", "list", str(path))
    return err.value


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_list_that_is_not_a_regular_file_is_refused_unopened(tmp_path, kind):
    """AUDIT-2.2: a FIFO would block the reader and /dev/zero never ends (the fuzz found both): refused from stat."""
    path = tmp_path / "units.txt"
    os.mkfifo(path) if kind == "fifo" else os.symlink("/dev/zero", path)
    err = _list_refusal(path)
    mode = stat.filemode(os.stat(path).st_mode)          # prw-r--r-- under umask 022; crw-rw-rw-
    assert mode[0] in "pc"
    assert (err.constraint, err.actual) == (LIST_RULE, f"OSError: [Errno 22] not a regular file ({mode}): '{path}'")


def test_a_list_at_the_size_limit_is_read_and_one_byte_past_it_is_refused(tmp_path):
    """AUDIT-2.2: at most 64 MiB, checked before a byte is read (a sparse file: its size is what counts)."""
    path = tmp_path / "units.txt"
    with open(path, "wb") as fh:
        fh.write(b"x\n")
        fh.truncate(64 << 20)
    assert read_list(str(path)) == ["x", "\0" * ((64 << 20) - 2)]
    os.truncate(path, (64 << 20) + 1)
    err = _list_refusal(path)
    assert (err.constraint, err.actual) == (f"a list of at most {64 << 20} bytes", (64 << 20) + 1)


def test_a_list_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "units.txt"
    path.write_bytes(b"\xff\xfe units")
    err = _list_refusal(path)
    assert (err.constraint, err.actual) == (LIST_RULE, "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in "
                                                       "position 0: invalid start byte")


def test_a_list_path_with_a_nul_is_refused(tmp_path):
    err = _list_refusal(f"{tmp_path}/units\0.txt")
    assert (err.constraint, err.actual) == (LIST_RULE, "ValueError: embedded null byte")


def test_cli_exit_code_counts_every_unit_named(tmp_path, capsys):
    """The CLI exits 1 when a unit named is invalid in the table, also when it was written before --resume."""
    bad, good = str(FIXTURES / "checkpoints" / "q4_k_m_nan_scale.gguf"), str(FIXTURES / "checkpoints" / "q4_k.gguf")
    out = str(tmp_path / "out")
    assert main(["audit", bad, "--deep", "--out", out]) == 1
    assert main(["audit", good, "--deep", "--out", out, "--resume"]) == 0
    assert main(["audit", good, bad, "--deep", "--out", out, "--resume"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (f"2 units (0 run now, 2 already in the table): 1 valid, "
                                                        f"1 invalid, 0 could not run: {out}")


def test_plain_progress_lines_when_not_a_terminal(tmp_path, capsys):
    """Progress on stderr: when it is not a terminal (CI), a start line and one line per unit with bytes and ETA."""
    assert main(["audit", *fixture_units()[:3], "--out", str(tmp_path / "out")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("audit: 3 units to run, ") and len(lines) == 4
    assert all(line.startswith(f"audit {i}/3 ") and " ETA " in line and " MB/" in line
               for i, line in enumerate(lines[1:], 1))
    awq = FIXTURES / "checkpoints" / "awq_gemv_bytes_labelled_gemm" / "model.safetensors"
    with safe_open(str(awq), "np") as f:                    # the checkpoint's tensors, read by the library
        tensors = len(list(f.keys()))
    assert lines[2].endswith(f"awq_gemv_bytes_labelled_gemm: invalid ({tensors} of {tensors} tensors checked, "
                             "0 named unchecked; 2 errors, 0 warnings)")


@pytest.mark.parametrize(("arg", "key"), [
    pytest.param("hf://TheBloke/Llama-2-7B-GPTQ", ("TheBloke/Llama-2-7B-GPTQ", "", ""), id="repo"),
    pytest.param("hf://org/repo@v1.0/sub/model.gguf", ("org/repo", "v1.0", "sub/model.gguf"), id="revision-file"),
    pytest.param("hf://datasets/org/repo@main/x.safetensors", ("datasets/org/repo", "main", "x.safetensors"),
                 id="dataset"),
    pytest.param("https://host.example/a/b.gguf?download=1", ("https://host.example/a", "", "b.gguf"), id="url"),
    pytest.param("hf://spaces/org/app@v1/app.gguf", ("spaces/org/app", "v1", "app.gguf"), id="space"),
    pytest.param("hf://datasets/org/data/sub/dir/x.gguf", ("datasets/org/data", "", "sub/dir/x.gguf"),
                 id="dataset-nested-file"),
    pytest.param("http://host.example/m/model.safetensors", ("http://host.example/m", "", "model.safetensors"),
                 id="http-url-without-query"),
])
def test_remote_units_are_parsed_without_a_request(arg, key):
    """AUDIT-2.1: hf://ORG/REPO[@REV][/FILE] is parsed into repo, the revision as written and the file; a URL into
    its directory and file name; parsing fetches nothing (resolving then pins an hf:// revision to its commit,
    tests/audit/test_audit_remote.py)."""
    from qformats.audit.units import remote

    unit = remote(arg)
    assert (unit.repo, unit.revision, unit.file, unit.source, unit.bytes) == (*key, arg, None)
