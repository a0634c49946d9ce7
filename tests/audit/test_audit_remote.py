"""`qformats audit` of hub repositories (issue 32 item 5): the 19 fixture checkpoints served as repos by the hub
stand-in of tests/remote (127.0.0.1, driven through huggingface_hub), audited as hf:// units, interrupted and
resumed (spec/audit.md AUDIT-2.1, AUDIT-3.2)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from qformats.audit import audit, run_unit
from qformats.audit.table import rows

from .conftest import FIXTURES, fixture_units

pytest.importorskip("huggingface_hub", reason="the extra qformats[hub] (make test installs it)")
RUNS: Counter = Counter()


def _counted(work: dict) -> dict:
    RUNS[work["unit"]["source"]] += 1
    return run_unit(work)


def test_resume_reruns_a_repository_that_has_a_new_commit(hub, tmp_path):
    """AUDIT-2.1: an hf:// unit is keyed by the commit its revision names when the audit resolves it, so --resume
    skips the unchanged repository and runs the one with a new commit (its old row stays beside the new one)."""
    same = hub.add_dir("org/same", FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")
    moved = hub.add_dir("org/moved", FIXTURES / "checkpoints" / "gptq_v1_sym_4bit")
    out, units = tmp_path / "out", [f"hf://{same}", f"hf://{moved}"]
    RUNS.clear()
    audit(units, out, process=_counted)
    new = hub.commit(moved)
    done = audit(units, out, resume=True, process=_counted)
    assert (done["run"], done["skipped"]) == (1, 1)
    old = hashlib.sha1(moved.encode()).hexdigest()           # the stand-in's first commit of a repository
    assert old != new
    assert sorted((r["repo"], r["revision"]) for r in rows(out)) == sorted(
        [(moved, old), (moved, new), (same, hub.sha(same))])


def test_a_unit_is_validated_at_the_commit_its_key_names(hub, tmp_path, monkeypatch):
    """AUDIT-2.1: "the unit is then validated at that commit, so that its row describes the commit its key names
    even when the branch moves before the unit runs": a push lands just after the audit resolved the unit."""
    good = FIXTURES / "checkpoints" / "gptq_v1_sym_4bit"
    repo = hub.add_dir("org/pushed", good)
    old = hub.sha(repo)
    broken = dict(hub.repos[repo], **{"model.safetensors": hub.repos[repo]["model.safetensors"][:100]})
    listed = hub.at

    def push_after_the_first_listing(name: str, revision: str | None):
        answer = listed(name, revision)
        if not hub.snapshots:
            hub.push(repo, broken)
        return answer

    monkeypatch.setattr(hub, "at", push_after_the_first_listing)
    audit([f"hf://{repo}"], tmp_path / "out")
    (row,) = rows(tmp_path / "out")
    assert (row["unit"], row["revision"], row["verdict"], row["error_code"]) == (f"hf://{repo}", old, "valid", None)
    assert ("GET", f"/api/models/{repo}/revision/{old}", None) in hub.requests
    audit([f"hf://{repo}"], tmp_path / "now")               # the branch names the broken commit now
    (now,) = rows(tmp_path / "now")
    assert (now["revision"], now["verdict"]) == (hub.sha(repo), "invalid") and hub.sha(repo) != old


@pytest.fixture
def repos(hub) -> list[str]:
    """Each fixture checkpoint as the repo fixtures/NAME (a .gguf file as the repo's one file); its hf:// units."""
    units = []
    for path in map(Path, fixture_units()):
        if path.is_dir():
            units.append(f"hf://{hub.add_dir(f'fixtures/{path.name}', path)}")
        else:
            repo = hub.add_files(f"fixtures/{path.stem.replace('.', '_')}", {path.name: path.read_bytes()})
            units.append(f"hf://{repo}/{path.name}")
    return units


def test_remote_audit_interrupted_and_resumed_runs_each_repo_once(repos, tmp_path):
    """AUDIT-3.2 over hf:// units: interrupted after 6 repos and resumed, each repo ran once, the verdicts and error
    codes are those fixtures/manifest.json expects of the checkpoints, and each row says the bytes fetched."""
    RUNS.clear()
    out = tmp_path / "out"
    seen = []

    def interrupt(row: dict) -> None:
        seen.append(row)
        if len(seen) == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        audit(repos, out, deep=True, sample=1000, process=_counted, on_row=interrupt)
    done = audit(repos, out, deep=True, sample=1000, resume=True, process=_counted)
    assert (done["run"], done["skipped"]) == (13, 6) and RUNS == Counter(dict.fromkeys(repos, 1))
    expect = {c["files"][0]["path"].split("/")[1]: c["expect"] for c in json.loads(
        (FIXTURES / "manifest.json").read_text())["cases"] if c["files"][0]["path"].startswith("checkpoints/")}
    got = {r["file"] or r["repo"].split("/")[1]: r for r in rows(out)}
    assert set(got) == set(expect) == {Path(u).name for u in fixture_units()}
    for name, want in expect.items():
        assert got[name]["verdict"] == want["verdict"], name
        assert got[name]["revision"] == hashlib.sha1(f"fixtures/{got[name]['repo'].split('/')[1]}".encode()).hexdigest()
        assert set(want["codes"]) <= set(got[name]["finding_codes"]), name
        assert got[name]["bytes_read"] > 0 and got[name]["bytes"] > 0, name
