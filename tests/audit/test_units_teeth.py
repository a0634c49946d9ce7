"""Tests with teeth for qformats/audit/units.py (spec/audit.md AUDIT-2.1, AUDIT-2.2; issue 33): each unit's key
fields and size, the order resolvers are asked in, and the hub resolver that pins a revision to its commit. Each
test calls the module itself (mutmut switches a mutant on only for calls made while a test runs, so a module-scoped
audit fixture would credit its calls to the first test that uses it)."""

from __future__ import annotations

import hashlib
import pathlib

import pytest

import qformats.remote
from qformats import __version__
from qformats.audit import units
from qformats.audit.units import Unit, key_of, local, options_json, read_list, register, resolve


@pytest.fixture
def resolvers(monkeypatch) -> list:
    """A fresh resolver list holding only the parsing resolver, as at import (register() edits it in place)."""
    fresh = [units.remote]
    monkeypatch.setattr(units, "RESOLVERS", fresh)
    return fresh


def test_options_are_canonical_json():
    """AUDIT-2.1: the options as canonical JSON: keys sorted, no whitespace, whatever order they were given in."""
    assert options_json({"sample": None, "format": "auto", "deep": True}) == '{"deep":true,"format":"auto","sample":null}'


def test_key_fields_are_the_unit_s_repo_revision_file_version_and_options():
    """AUDIT-2.1: the key fields of a unit are its repo, revision and file, this qformats' version and the options
    as canonical JSON (written by hand here)."""
    fields = key_of(Unit(source="/r/m.gguf", repo="/r", file="m.gguf"), {"format": "gptq", "deep": False, "sample": 3})
    assert {k: v for k, v in fields.items() if k != "key"} == {
        "repo": "/r", "revision": "", "file": "m.gguf", "qformats_version": __version__,
        "options": '{"deep":false,"format":"gptq","sample":3}'}


def test_the_key_is_24_hex_digits_of_the_sha256_of_the_key_fields():
    """AUDIT-3.1 / AUDIT-3.2: the part file's name is the resume contract (--resume decides by the name alone), so
    its rule is pinned: the first 24 hex digits of SHA-256 over the key fields as JSON, keys sorted, json's default
    separators. The document is written out by hand here (spec/audit.md says only "a hash of its key")."""
    document = ('{"file": "m.gguf", "options": "{\\"deep\\":false,\\"format\\":\\"gptq\\",\\"sample\\":3}", '
                f'"qformats_version": "{__version__}", "repo": "/r", "revision": ""}}')
    fields = key_of(Unit(source="/r/m.gguf", repo="/r", file="m.gguf"), {"deep": False, "format": "gptq", "sample": 3})
    assert fields["key"] == hashlib.sha256(document.encode()).hexdigest()[:24]


def test_a_local_file_is_its_directory_and_name_with_its_size(tmp_path):
    """AUDIT-2.1: a local file's repo is its directory, file its name; its size is known before it is read."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\x03")
    assert local(str(path)) == Unit(source=str(path), repo=str(tmp_path), revision="", file="model.gguf", bytes=5)


def test_a_local_directory_counts_its_own_files_not_its_subdirectories(tmp_path):
    """AUDIT-2.1 / CKPT-2: a directory unit is repo=its path, file=''; its size is the bytes of its own files."""
    (tmp_path / "a.safetensors").write_bytes(b"abc")
    (tmp_path / "config.json").write_bytes(b"{}\n\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "big.bin").write_bytes(b"x" * 100)
    assert local(str(tmp_path)) == Unit(source=str(tmp_path), repo=str(tmp_path), bytes=3 + 4)


def test_a_local_path_that_does_not_exist_has_no_size(tmp_path):
    """AUDIT-2.1: a missing path is still a unit (its run is could-not-run, CKPT-1.1); its size is unknown (None),
    not 0, so the progress bar knows no total."""
    missing = tmp_path / "absent"
    assert local(str(missing)) == Unit(source=str(missing), repo=str(missing), bytes=None)


def test_a_directory_that_cannot_be_listed_counts_zero_bytes(tmp_path, monkeypatch):
    """A directory the file system will not list (EACCES for a user without read permission; tests run as root
    here, so the refusal is put in Path.iterdir) is still a unit, of 0 bytes: its run then says why."""
    def refused(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(pathlib.Path, "iterdir", refused)
    assert local(str(tmp_path)) == Unit(source=str(tmp_path), repo=str(tmp_path), bytes=0)


def test_an_indented_comment_line_is_skipped(tmp_path):
    """AUDIT-2.2: a line whose text starts with '#' after its indentation is a comment, as a unit's spaces are not
    part of it."""
    listing = tmp_path / "units.txt"
    listing.write_text("  # indented comment\n\t#tabbed\nckpt\n")
    assert read_list(str(listing)) == ["ckpt"]


def test_register_puts_a_resolver_first_and_once(resolvers):
    """A resolver registered goes ahead of the others (hf:// is claimed before a path is tried); registering it
    again does not ask it twice."""
    def mine(arg: str) -> Unit | None:
        return None

    register(mine)
    register(mine)
    assert resolvers == [mine, units.remote]


def test_resolve_takes_the_first_resolver_that_claims_the_argument(resolvers):
    """A resolver answering None passes the argument on; the first Unit returned is the unit (not a local path)."""
    claimed = Unit(source="custom://x", repo="custom-repo", revision="r1", file="f")
    resolvers[:] = [lambda arg: None, lambda arg: claimed if arg == "custom://x" else None]
    assert resolve("custom://x") is claimed


def test_a_remote_package_without_a_resolver_leaves_the_parsing_one(resolvers, monkeypatch):
    """qformats.remote *may* offer audit_unit: without it an hf:// unit is parsed, its revision as written, and no
    resolver is added (so no request is made)."""
    monkeypatch.delattr(qformats.remote, "audit_unit")
    assert resolve("hf://org/repo@v2/m.gguf") == Unit(source="hf://org/repo@v2/m.gguf", repo="org/repo",
                                                      revision="v2", file="m.gguf")
    assert resolvers == [units.remote]


def test_an_hf_unit_is_pinned_to_the_commit_the_hub_lists(resolvers, hub):
    """AUDIT-2.1: resolving hf://ORG/REPO asks qformats.remote's resolver first, which keys the unit by the commit
    the default branch names now (the stand-in's first commit of a repository is the SHA-1 of its name) and pins
    the address validate is given to that commit."""
    repo = hub.add_files("org/pinned", {"model.gguf": b"GGUF"})
    sha = hashlib.sha1(b"org/pinned").hexdigest()
    assert resolve(f"hf://{repo}") == Unit(source="hf://org/pinned", repo="org/pinned", revision=sha, file="",
                                           pinned=f"hf://org/pinned@{sha}")


def test_an_hf_unit_whose_listing_names_no_commit_is_not_pinned(resolvers, hub):
    """AUDIT-2.1, REMOTE-2.5: no commit listed: the revision as asked, and validate given the address as written."""
    repo = hub.add_files("org/nosha", {"model.gguf": b"GGUF"})
    hub.faults.listing["*"] = ("sha", None)
    assert resolve(f"hf://{repo}@v1") == Unit(source="hf://org/nosha@v1", repo="org/nosha", revision="v1")
