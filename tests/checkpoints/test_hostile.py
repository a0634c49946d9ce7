"""Hostile shard names and ``dynamic`` regexes end in a report or a QFormatsError, never a crash or a hang.

Five classes a mutation fuzzer found (issue 14), one fixture each in fixtures/regressions/fuzz/
(hostile_builder.py), checked through the API and the CLI; plus fuzzing that keeps generating
their shapes, and the Hugging Face cache's symlinked shards, which must keep working.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hostile_builder as hb
import st_builder as sb
from qformats.containers.checkpoint import open_checkpoint
from qformats.errors import QFormatsError
from qformats.formats.gptq.dynamic import first_matches
from qformats.formats.gptq.layout import modules_params, parse_config
from qformats.validate import COULD_NOT_RUN, validate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOSTILE_DIR = FIXTURES / hb.FIXTURE_DIR
# Not a speed target: a bound far above the 0.6 s match limit that only a hang can cross.
HANG_S = 10.0

CASE_PARAMS = [pytest.param(name, code, clause, id=name) for name, (_fn, code, clause) in hb.CASES.items()]


def _ends_well(path: Path) -> tuple[str, list[str]]:
    """Validate ``path``: (verdict, finding codes), or ("error", [code]) for a QFormatsError."""
    try:
        report = validate(str(path))
    except QFormatsError as err:
        return "error", [err.code]
    return report.verdict, [f.code for f in report.findings]


@pytest.mark.parametrize(("name", "code", "clause"), CASE_PARAMS)
def test_hostile_fixture_is_a_finding_through_the_api(name, code, clause):
    """Each of the five classes is reported with its code and clause, within a hang bound."""
    start = time.monotonic()
    report = validate(str(HOSTILE_DIR / name))
    assert time.monotonic() - start < HANG_S
    assert report.verdict == "invalid"
    assert [(f.code, f.clause) for f in report.findings if f.code == code] == [(code, clause)]


@pytest.mark.parametrize(("name", "code", "clause"), CASE_PARAMS)
def test_hostile_fixture_is_exit_1_through_the_cli(name, code, clause):
    """The CLI reports the finding (exit 1, JSON), never "internal error" (exit 2)."""
    result = subprocess.run([sys.executable, "-m", "qformats.cli", "validate", "--json", str(HOSTILE_DIR / name)],
                            capture_output=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert code in {f["code"] for f in json.loads(result.stdout)["findings"]}


@pytest.mark.parametrize("rel", sorted(hb.fixture_files()))
def test_hostile_fixture_regenerates_byte_identically(rel):
    """fixtures-check: the builder reproduces every committed file byte for byte."""
    assert (HOSTILE_DIR / rel).read_bytes() == hb.fixture_files()[rel]


def test_hostile_manifest_entries_match():
    """fixtures/manifest.json holds exactly the builder's cases."""
    cases = {c["id"]: c for c in json.loads((FIXTURES / "manifest.json").read_text())["cases"]}
    assert [cases.get(entry["id"]) for entry in hb.manifest_entries()] == hb.manifest_entries()


# -- the rules themselves -----------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    pytest.param("a{4294967296}", id="repeat-overflow"),
    pytest.param("(" * 1500 + "a" + ")" * 1500, id="recursion"),
    pytest.param("x" * 4097, id="too-long"),
    pytest.param("+:[", id="re-error"),
])
def test_pattern_re_cannot_compile_is_gptq_config_invalid(key):
    """GPTQ-6.6: "a pattern `re` cannot compile ... is refused before any module is matched"."""
    with pytest.raises(QFormatsError) as exc:
        parse_config({"bits": 4, "dynamic": {key: {}}})
    assert (exc.value.code, exc.value.tensor) == ("gptq.config.invalid", "dynamic")


def test_too_many_rules_is_gptq_config_invalid():
    """GPTQ-6.6: "A config MUST have at most 4096 `dynamic` rules"."""
    with pytest.raises(QFormatsError) as exc:
        parse_config({"bits": 4, "dynamic": {f"r{i}": {} for i in range(4097)}})
    assert exc.value.code == "gptq.config.invalid" and exc.value.actual == 4097


def test_too_many_pattern_characters_is_refused_before_compiling():
    """GPTQ-6.6: patterns of "262,144 characters (2^18) in all": 100 rules of 4000 characters each
    (2 + 3 + 5 x 799 each, within its own limit) are refused by their total, not compiled one by one."""
    keys = {f"+:{i:03d}" + "(a|b)" * 799: {} for i in range(100)}
    with pytest.raises(QFormatsError) as exc:
        parse_config({"bits": 4, "dynamic": keys})
    assert (exc.value.code, exc.value.actual) == ("gptq.config.invalid", "400000 characters in 100 rules")


def test_rule_limits_hold_through_the_config_model_too():
    """GPTQ-6.6: the pydantic model refuses what parse_config refuses, with the constraint in the message."""
    from pydantic import ValidationError

    from qformats.formats.gptq.layout import GPTQConfig

    with pytest.raises(ValidationError, match="at most 4096 rules"):
        GPTQConfig.model_validate({"bits": 4, "dynamic": {f"r{i}": {} for i in range(4097)}})

def test_catastrophic_pattern_is_dynamic_unsafe():
    """GPTQ-6.6: "Matching MUST finish on every module name of the checkpoint"."""
    config, _ = parse_config({"bits": 4, "dynamic": {"-:(a+)+$": {}}})
    start = time.monotonic()
    with pytest.raises(QFormatsError) as exc:
        modules_params(config, [hb.HOSTILE_NAME])
    assert time.monotonic() - start < HANG_S
    assert exc.value.code == "gptq.config.dynamic_unsafe"


def test_matching_keeps_re_semantics():
    """GPTQ-6.6: the first key whose pattern re.match-es the name decides; matching is anchored at the start."""
    keys = ["-:.*lm_head", r"+:model\.layers\.1\.", ".*proj"]
    names = ["lm_head", "model.layers.1.mlp.up_proj", "model.layers.0.mlp.up_proj", "xmodel.layers.1.x"]
    assert first_matches(keys, names) == [0, 1, 2, None]


def test_catastrophic_pattern_on_benign_names_is_not_flagged():
    """A nested quantifier is refused only when re.match does not finish on the checkpoint's names."""
    config, _ = parse_config({"bits": 4, "dynamic": {r"+:(\w+\.)+mlp": {"bits": 8}}})
    params = modules_params(config, ["model.layers.0.mlp.up_proj", "model.layers.0.self_attn.q_proj"])
    assert [p.bits for p in params.values()] == [8, 4]


class _Spawned:
    """subprocess.Popen as dynamic.py calls it, counting children; ``stop_for`` seconds: each child is stopped
    (SIGSTOP) as it starts and continued that long after, as a busy machine's scheduler might starve it."""

    def __init__(self, stop_for: float = 0.0):
        self.children, self.stop_for, self.popen = 0, stop_for, subprocess.Popen

    def __call__(self, *args, **kwargs):
        import signal
        import threading

        child = self.popen(*args, **kwargs)
        self.children += 1
        if self.stop_for:
            os.kill(child.pid, signal.SIGSTOP)
            threading.Timer(self.stop_for, os.kill, (child.pid, signal.SIGCONT)).start()
        return child


def test_matching_is_limited_by_the_childs_cpu_time_not_the_wall_clock(monkeypatch):
    """GPTQ-6.6: a child starved of the CPU (here stopped for 1.5 s against a 0.5 s limit) is waited for: the
    verdict depends on the patterns and names, not on the machine's load."""
    from qformats.formats.gptq import dynamic

    spawned = _Spawned(stop_for=1.5)
    monkeypatch.setattr(dynamic, "_ANSWERS", {})
    monkeypatch.setattr(dynamic.subprocess, "Popen", spawned)
    monkeypatch.setattr(dynamic, "match_limit_s", lambda rules, modules: 0.5)
    start = time.monotonic()
    assert first_matches([r"+:(\w+\.?)+$"], ["model.layers.0.mlp.up_proj"]) == [0]
    assert spawned.children == 1 and time.monotonic() - start >= 1.5


def test_the_same_question_is_answered_once_per_process(monkeypatch):
    """GPTQ-6.6: validate, conformance's reader rows and convert ask for the same keys and names; one child
    answers them all, so they cannot disagree (the fuzz saw conformance's second child time out)."""
    from qformats.formats.gptq import dynamic

    spawned = _Spawned()
    monkeypatch.setattr(dynamic, "_ANSWERS", {})
    monkeypatch.setattr(dynamic.subprocess, "Popen", spawned)
    keys, names = ["-:.*lm_head", r"+:model\.layers\.1\."], ["lm_head", "model.layers.1.mlp.up_proj", "x"]
    assert first_matches(keys, names) == first_matches(list(keys), list(names)) == [0, 1, None]
    assert spawned.children == 1
    assert first_matches(keys, names[:2]) == [0, 1] and spawned.children == 2


def test_an_unsafe_answer_is_the_same_refusal_every_time(monkeypatch):
    """GPTQ-6.6: a pattern that does not finish is refused by every later ask too, from the one child's answer."""
    from qformats.formats.gptq import dynamic

    spawned = _Spawned()
    monkeypatch.setattr(dynamic, "_ANSWERS", {})
    monkeypatch.setattr(dynamic.subprocess, "Popen", spawned)
    errors = []
    for _ in range(2):
        with pytest.raises(QFormatsError) as exc:
            first_matches(["-:(a+)+$"], [hb.HOSTILE_NAME])
        errors.append((exc.value.code, exc.value.tensor, exc.value.actual))
    assert errors[0] == errors[1] and errors[0][:2] == ("gptq.config.dynamic_unsafe", "dynamic")
    cpu = re.fullmatch(r"1 rules x 1 modules: no result after (\d+\.\d) s of CPU \(\d+\.\d s\)", errors[0][2])
    assert cpu and float(cpu.group(1)) >= 0.6 and spawned.children == 1      # read when the wall clock ran out


def test_answers_kept_are_bounded(monkeypatch):
    """GPTQ-6.6: the answers kept per process are the last eight questions (a long audit asks many)."""
    from qformats.formats.gptq import dynamic

    monkeypatch.setattr(dynamic, "_ANSWERS", {})
    for i in range(10):
        first_matches([f"+:m{i}"], [f"m{i}"])
    assert list(dynamic._ANSWERS) == [((f"+:m{i}",), (f"m{i}",)) for i in range(2, 10)]


# -- symlinked shards (the Hugging Face cache layout) ---------------------------------------------

def test_symlinked_shards_into_a_blobs_folder_are_followed(tmp_path):
    """CKPT-3.1: "A shard that is a symbolic link is followed, wherever it points"."""
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "0123abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for i, (fname, blob) in enumerate(sorted(sb.sharded().items())):
        (blobs / f"blob{i}").write_bytes(blob)
        os.symlink(os.path.relpath(blobs / f"blob{i}", snapshot), snapshot / fname)
    with open_checkpoint(snapshot) as ckpt:
        assert ckpt.kind == "sharded" and sorted(ckpt.tensor_names()) == ["x.qweight", "y.qweight"]


# -- fuzzing keeps generating the five shapes ---------------------------------------------------

SHARD_NAMES = st.one_of(
    st.text(min_size=0, max_size=300),
    st.sampled_from([sb.S1 + "\0", "\ud800", "model-\udfff.safetensors", "x" * 256, ".", "..", "a/b", "a\\b"]),
    st.builds(lambda s, c: s + c, st.just(sb.S1), st.sampled_from(["\0", "\ud800", "/", "\x01", "\u202e"])),
)
REGEX_ATOMS = ["a", ".", r"\.", "[a-z_.0-9]", r"\w", "x", "$", "^"]
QUANT = ["+", "*", "?", "{2}", "{4294967296}", "{1,}", ""]


@st.composite
def hostile_patterns(draw) -> str:
    """Nested groups, huge repeat counts and nested quantifiers: the shapes that broke the validator."""
    depth = draw(st.sampled_from([1, 2, 3, 1200]))
    body = draw(st.sampled_from(REGEX_ATOMS)) + draw(st.sampled_from(QUANT))
    for _ in range(depth if depth < 10 else 0):
        body = "(" + body + ")" + draw(st.sampled_from(QUANT))
    if depth >= 10:
        body = "(" * depth + body + ")" * depth
    return draw(st.sampled_from(["", "+:", "-:"])) + body + draw(st.sampled_from(["", "$", "X$", "!"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shard=SHARD_NAMES)
def test_fuzzed_shard_names_end_in_a_report(tmp_path_factory, shard):
    """Any shard name in an index ends in a report or a could-not-run QFormatsError."""
    root = tmp_path_factory.mktemp("shard")
    for fname, blob in hb.with_shard_name(shard).items():
        (root / fname).write_bytes(blob)
    verdict, codes = _ends_well(root)
    assert verdict in ("valid", "invalid") or set(codes) <= COULD_NOT_RUN


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=hostile_patterns(), module=st.sampled_from([hb.HOSTILE_NAME, "model.layers.0.mlp.up_proj"]))
def test_fuzzed_dynamic_patterns_end_in_a_report(tmp_path_factory, pattern, module):
    """Any dynamic pattern against any module name ends in a report within the hang bound."""
    root = tmp_path_factory.mktemp("dynamic")
    for fname, blob in hb.with_dynamic({pattern: {}}, module=module).items():
        (root / fname).write_bytes(blob)
    start = time.monotonic()
    verdict, codes = _ends_well(root)
    assert time.monotonic() - start < HANG_S
    assert verdict in ("valid", "invalid"), codes


def test_compiling_a_pattern_prints_no_python_warning(recwarn):
    """GPTQ-6.6: a key re compiles with a FutureWarning ("possible nested set") is compiled quietly: the
    CLI's stderr carries findings, not Python's source lines."""
    from qformats.formats.gptq.dynamic import pattern_problem

    assert pattern_problem("+:model[[.]layers_warn_once") is None
    assert [str(w.message) for w in recwarn.list] == []
