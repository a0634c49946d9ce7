"""Runs as data and the results page without a browser (issue #21): the matrix model, its views, the spec's
clause list, the self-contained HTML, the `conformance matrix` command and the README's generated table.

The browser half (rendering, filters, drill-down) is test_html_browser.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.clauses import Clause, covering, spec_clauses
from conformance.html import page
from conformance.matrix import BEGIN, END, Matrix, Row, load_runs, readme_table, replace_section, subject_label
from qformats.cli import main
from qformats.errors import QFormatsError

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "results" / "real_libraries.json"


def case(cid: str, status: str, *clauses: str, detail: str = "", clause: str | None = None) -> dict:
    row = {"id": cid, "status": status, "clauses": list(clauses or ("GPTQ-3.2",)), "detail": detail}
    if clause:
        row["clause"] = clause
    return row


def run(subject: str, fmt: str, op: str, cases: list[dict], *, library: dict | None = None,
        declaration: dict | None = None, tags: dict[str, list[str]] | None = None, level: dict | None = None) -> dict:
    """A run document as `conformance kernel --json` writes it, reduced to what the page reads."""
    doc = {"subject": subject, "format": fmt, "op": op, "cases": cases,
           "subject_info": {"entry": subject, "library": library, "declaration": declaration},
           "case_info": {c["id"]: {"features": (tags or {}).get(c["id"], []), "expect": "values",
                                   "source": "qformats-reference"} for c in cases}}
    if level:
        doc["level"] = level
    return doc


LIB_A, LIB_B = {"name": "liba", "version": "1.0"}, {"name": "libb", "version": "2.1"}


def three_subjects() -> list[dict]:
    """x: only B fails; y: A and B fail; z: only C ran it, and failed; w: B errors, A passes, C not applicable."""
    return [run("a:f", "gptq_v1", "dequantize", [case("x", "pass"), case("y", "fail"), case("w", "pass")], library=LIB_A),
            run("b:f", "gptq_v1", "dequantize", [case("x", "fail", "GPTQ-5.3", detail="first: [0, 1] actual 1 expected 2"),
                                                 case("y", "fail"), case("w", "error")], library=LIB_B),
            run("c:f", "gptq_v1", "dequantize", [case("x", "pass"), case("z", "fail"), case("w", "not-applicable")])]


# -- the model ---------------------------------------------------------------------------------------

def test_cells_count_passes_of_all_cases_per_subject_and_group():
    """A cell is passes / cases of one subject in one format-op group; a group a subject did not run is empty."""
    runs = three_subjects() + [run("a:g", "spqr", "dequantize", [case("s", "pass", "SPQR-5.3")], library=LIB_A)]
    m = Matrix(runs)
    assert m.subjects == ["liba 1.0", "libb 2.1", "c:f"]
    assert [g.key for g in m.groups] == ["gptq_v1/dequantize", "spqr/dequantize"]
    cells = {s: m.cell(m.groups[0], s) for s in m.subjects}
    assert [(c.counts["pass"], c.total, c.state) for c in cells.values()] == [(2, 3, "bad"), (0, 3, "bad"), (1, 3, "bad")]
    assert m.cell(m.groups[1], "liba 1.0").state == "ok" and m.cell(m.groups[1], "libb 2.1").state == "none"


def test_feature_rows_count_only_the_cases_with_that_tag():
    """A feature row (bits:3) counts the cases tagged with it; expectation and provenance are rows too."""
    runs = [run("a:f", "gptq_v1", "dequantize", [case("p", "pass"), case("q", "fail"), case("r", "pass")], library=LIB_A,
                tags={"p": ["bits:3"], "q": ["bits:3"], "r": ["bits:4"]})]
    m = Matrix(runs)
    names = [r.feature for r in m.features[m.groups[0]]]
    assert names == ["bits:3", "bits:4", "expect:values", "vectors:reference-made"]
    bits3 = m.cell(Row("gptq_v1", "dequantize", "bits:3"), "liba 1.0")
    assert (bits3.counts["pass"], bits3.total, bits3.state) == (1, 2, "bad")
    assert [c["id"] for _, c in m.run_cases(Row("gptq_v1", "dequantize", "bits:3"), "liba 1.0")] == ["q", "p"]


def test_single_failures_are_cases_failing_in_exactly_one_subject_and_passing_in_another():
    """x fails only in B (A and C pass): listed; y fails in two; z ran in one subject only; w errors in B while
    A passes it (C: not applicable): listed."""
    rows = Matrix(three_subjects()).single_failures()
    assert [(r["subject"], r["case"]["id"], r["case"]["status"]) for r in rows] == [("libb 2.1", "w", "error"),
                                                                                   ("libb 2.1", "x", "fail")]
    assert rows[1]["others"] == {"liba 1.0": "pass", "c:f": "pass"}


def test_declared_expected_failures_keep_their_reason_and_what_they_covered():
    """Each declared entry: its pattern, its reason, the cases it held as expected failures and those that passed."""
    decl = {"expected_failures": [{"case": "gptq_v1/read/b8_.*", "reason": "8-bit zero offset, issue #12"}]}
    doc = run("a:f", "gptq_v1", "dequantize", [case("gptq_v1/read/b8_sym", "expected-failure"),
                                               case("gptq_v1/read/b8_asym", "warning"), case("gptq_v1/read/b4", "pass")],
              library=LIB_A, declaration=decl)
    [row] = Matrix([doc]).expected_failures()
    assert (row["pattern"], row["reason"]) == ("gptq_v1/read/b8_.*", "8-bit zero offset, issue #12")
    assert [c["id"] for c in row["held"]] == ["gptq_v1/read/b8_sym"] and [c["id"] for c in row["passed"]] == ["gptq_v1/read/b8_asym"]


def test_subject_file_declarations_keep_two_runs_of_one_library_apart():
    """The same library with a subject file that changes a default is a column of its own, saying what it declares."""
    plain = run("a:f", "gptq_v1", "dequantize", [case("x", "pass")], library=LIB_A)
    wrapped = run("a:f", "gptq_v1", "dequantize", [case("x", "pass")], library=LIB_A, declaration={"zeros": "numeric"})
    assert [subject_label(plain), subject_label(wrapped)] == ["liba 1.0", "liba 1.0 [zeros=numeric]"]


def test_primary_clause_is_the_runners_attribution_else_the_first_cited():
    """Coverage counts a failure against its attributed clause (the runner's "clause"), or the first clause
    for runs recorded before attribution."""
    runs = [run("a:f", "spqr", "dequantize", [case("p", "fail", "SPQR-2.1", "SPQR-5.3", clause="SPQR-5.3"),
                                              case("q", "fail", "SPQR-2.1", "SPQR-5.3")], library=LIB_A)]
    rows = {r["clause"]: r for r in Matrix(runs).coverage([])["exercised"]}
    assert (rows["SPQR-5.3"]["attributed"], rows["SPQR-2.1"]["attributed"]) == (1, 1)
    assert rows["SPQR-2.1"]["failing"] == rows["SPQR-5.3"]["failing"] == 2


# -- clauses -----------------------------------------------------------------------------------------

def test_spec_clause_list_marks_informative_sections():
    """GPTQ-3.4 is normative; GPTQ-4.2 sits under '## GPTQ-4 ... (informative)' and inherits it."""
    clauses = {c.id: c for c in spec_clauses()}
    assert clauses["GPTQ-3.4"].normative and clauses["GPTQ-3.4"].chapter == "gptq.md"
    assert not clauses["GPTQ-4.2"].normative and not clauses["GPTQ-4"].normative
    assert clauses["Q4K-2.1"].title == "The block tensor"


def test_unexercised_normative_clauses_are_listed_and_sections_count_through_their_children():
    """Of GPTQ-5 {5.1, 5.2} and informative GPTQ-4.1, a case citing GPTQ-5.1 leaves 5.2 unexercised, GPTQ-5
    exercised through its sub-clause, and the informative clause out of the normative list."""
    clauses = [Clause("GPTQ-5", "gptq.md", "g_idx", True), Clause("GPTQ-5.1", "gptq.md", "Range", True),
               Clause("GPTQ-5.2", "gptq.md", "Order", True), Clause("GPTQ-4.1", "gptq.md", "Writers", False)]
    cov = Matrix([run("a:f", "gptq_v1", "dequantize", [case("x", "pass", "GPTQ-5.1")], library=LIB_A)]).coverage(clauses)
    assert [c.id for c in cov["unexercised"]] == ["GPTQ-5.2"]
    assert [c.id for c in cov["by_section"]] == ["GPTQ-5"] and cov["normative"] == 3
    assert [c.id for c in cov["informative_unexercised"]] == ["GPTQ-4.1"]
    assert (covering("KQ-6.2", {"KQ-6"}), covering("KQ-6.2", {"KQ-6.2"}), covering("KQ-6.2", {"KQ-7"})) == \
        ("section", "direct", "none")


# -- the page ----------------------------------------------------------------------------------------

def test_page_is_self_contained():
    """No external resource: no src attribute, no stylesheet link, no url() or @import, every href in-page."""
    html = page(three_subjects())
    assert not re.search(r"""\ssrc\s*=|<link\b|@import|url\(""", html, re.I)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
    assert html.count("<style>") == 1 and html.count("<script>") == 1


def test_hostile_text_is_escaped_and_kept_intact_in_the_data():
    """A subject or detail holding markup never becomes markup; the embedded data gives it back unchanged."""
    nasty = '</script><script>alert(1)</script><b onclick="x">'
    runs = [run("a:f", "gptq_v1", "dequantize", [case("x", "fail", detail=nasty)], library={"name": nasty, "version": "1"}),
            run("b:f", "gptq_v1", "dequantize", [case("x", "pass")], library=LIB_B)]
    html = page(runs)
    assert "<script>alert" not in html and "<b onclick" not in html
    data = json.loads(re.search(r'<script type="application/json" id="runs-data">(.*?)</script>', html, re.S).group(1))
    assert data["runs"][0]["c"][0][4] == nasty and data["subjects"][0] == f"{nasty} 1"


def test_page_shows_levels_single_failures_and_expected_failures():
    """The views the issue names are on the page: levels with readings, the one-subject failures with both values,
    declared expected failures with their reason, the normative clauses no case exercises."""
    runs = three_subjects()
    runs[0]["level"] = {"claimed": "decoder", "reached": "decoder", "readings": {"GPTQ-4.2": "word borrow"},
                        "unenforced": ["GPTQ-5.1"]}
    runs[2]["subject_info"]["declaration"] = {"expected_failures": [{"case": "z", "reason": "our issue #7"}]}
    html = page(runs)
    assert "word borrow" in html and ">decoder<" in html and "A decoder-level pass says nothing about validation" in html
    assert "first: [0, 1] actual 1 expected 2" in html and "our issue #7" in html
    assert re.search(r"Normative clauses no case exercises: \d+ of \d+", html)


def test_runs_without_provenance_level_or_attribution_still_load():
    """A bare DESIGN.md §6 document (subject, format, op, counts, cases) is a column named by its entry point."""
    bare = {"subject": "mylib.ops:deq", "format": "spqr", "op": "dequantize", "counts": {},
            "cases": [{"id": "spqr/read/x", "status": "pass", "clauses": ["SPQR-5.3"], "detail": "ok"}]}
    m = Matrix([bare])
    assert m.subjects == ["mylib.ops:deq"] and m.cell(m.groups[0], "mylib.ops:deq").counts["pass"] == 1
    assert "mylib.ops:deq" in page([bare])


# -- loading and the command -------------------------------------------------------------------------

def test_load_runs_reads_runs_and_bundles(tmp_path):
    """A file holds one run or a bundle {"runs": [...]}; both load, in order."""
    a, b = three_subjects()[:2]
    (tmp_path / "one.json").write_text(json.dumps(a))
    (tmp_path / "many.json").write_text(json.dumps({"runs": [b, a]}))
    runs = load_runs([tmp_path / "one.json", tmp_path / "many.json"])
    assert [r["subject"] for r in runs] == ["a:f", "b:f", "a:f"]


@pytest.mark.parametrize(("text", "tensor"), [("not json", "run"), ('{"subject": "a"}', "run"),
                                              ('{"subject": "a", "format": "spqr", "op": "x", "cases": [{"id": "c", "status": "odd"}]}', "case")])
def test_load_runs_refuses_what_is_not_a_run(tmp_path, text, tensor):
    """Unreadable JSON, a document without the run keys, a case with an unknown status: argument.invalid, naming the file."""
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(QFormatsError) as err:
        load_runs([path])
    assert err.value.code == "argument.invalid" and err.value.tensor == tensor and str(path) in str(err.value)


def test_cli_matrix_writes_the_page_and_prints_the_cells(tmp_path, capsys):
    """`qformats conformance matrix A.json B.json --html page.html`: exit 0, a row per group, the page written;
    a file that is not a run: exit 2 with the reason."""
    for n, doc in enumerate(three_subjects()):
        (tmp_path / f"{n}.json").write_text(json.dumps(doc))
    files = [str(tmp_path / f"{n}.json") for n in range(3)]
    assert main(["conformance", "matrix", *files, "--html", str(tmp_path / "page.html")]) == 0
    out = capsys.readouterr().out
    assert "gptq_v1 · dequantize" in out and "liba 1.0: 2/3" in out
    assert (tmp_path / "page.html").read_text().startswith("<!DOCTYPE html>")
    (tmp_path / "bad.json").write_text("[]")
    assert main(["conformance", "matrix", str(tmp_path / "bad.json")]) == 2
    assert "bad.json" in capsys.readouterr().err


# -- the README's real-library table ------------------------------------------------------------------

def test_readme_table_groups_block_types_by_outcome():
    """GPTQ, q4_K and SpQR get a row each; other GGUF types share a row per library, op and identical counts;
    a run where every case errors says with what."""
    def many(status, detail, n):
        return [case(f"c{i}", status, detail=detail) for i in range(n)]
    runs = [run("lib:q6_k_dequantize", "q6_k", "dequantize", many("pass", "bit for bit", 12), library=LIB_A),
            run("lib:q8_0_dequantize", "q8_0", "dequantize", many("pass", "bit for bit", 12), library=LIB_A),
            run("lib:q6_k_quantize", "q6_k", "quantize", many("error", "the subject raised: NotImplementedError: no", 10),
                library=LIB_A),
            run("lib:deq", "gptq_v1", "dequantize", [case("x", "pass"), case("y", "fail", "GPTQ-3.4")], library=LIB_A),
            run("conformance.reference:f", "spqr", "dequantize", [case("s", "pass")],
                library={"name": "qformats", "version": "0.1.0", "role": "conformance.reference"})]
    lines = readme_table(runs).splitlines()
    assert lines[2] == "| liba 1.0 | `lib:deq` | `gptq_v1` | dequantize | 1/2 pass, 1 fail (failing clauses: GPTQ-3.4 ×1) |"
    assert lines[3] == ("| liba 1.0 | `lib:<type>_dequantize` | q6_k, q8_0 (2 types) | dequantize | "
                        "**conforms** on every type: 12/12 each |")
    assert lines[4] == "| liba 1.0 | `lib:q6_k_quantize` | q6_k | quantize | error on every case (`NotImplementedError`) |"
    assert len(lines) == 5                                      # qformats' own reference is not a real library


def test_readme_table_says_a_subject_raising_on_every_call_cannot_decode_the_type():
    """KC-3.1 counts any exception as a rejection, so a subject that raises on every call passes the
    must-reject cases; its row says it cannot decode the type, not "5/16 pass"."""
    cases = [case(f"v{i}", "error", detail="the subject raised: NotImplementedError: q1_0") for i in range(3)]
    cases += [case("r0", "pass"), case("r1", "pass")]
    doc = run("lib:q1_0_dequantize", "q1_0", "dequantize", cases, library=LIB_A)
    doc["case_info"]["r0"]["expect"] = doc["case_info"]["r1"]["expect"] = "reject"
    assert readme_table([doc]).splitlines()[2] == (
        "| liba 1.0 | `lib:q1_0_dequantize` | q1_0 | dequantize | cannot decode this type: error on every "
        "conforming case (`NotImplementedError`); its 2 passes are rejections of must-reject cases (KC-3.1) |")


def test_readme_table_counts_a_partial_decoder_as_a_partial_pass():
    """One conforming case decoded is not "cannot decode": the row keeps its counts."""
    cases = [case("v0", "pass"), case("v1", "error", detail="the subject raised: ValueError: x"), case("r0", "pass")]
    doc = run("lib:q1_0_dequantize", "q1_0", "dequantize", cases, library=LIB_A)
    doc["case_info"]["r0"]["expect"] = "reject"
    assert readme_table([doc]).splitlines()[2].endswith("| 2/3 pass, 1 error (failing clauses: GPTQ-3.2 ×1) |")


def test_replace_section_rewrites_only_between_the_markers():
    text = f"before\n{BEGIN.format(source='x.json')}\nold table\n{END}\nafter\n"
    out = replace_section(text, "| new |\n", "results/real_libraries.json")
    assert out == f"before\n{BEGIN.format(source='results/real_libraries.json')}\n| new |\n{END}\nafter\n"
    with pytest.raises(QFormatsError):
        replace_section("no markers here", "| t |\n", "x")


def test_readme_real_library_table_is_generated_from_the_kept_runs():
    """README.md's real-library table is readme_table() of results/real_libraries.json, written by `make matrix`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = replace_section(readme, readme_table(load_runs([BUNDLE])), "results/real_libraries.json")
    assert readme == expected, "README.md's real-library table is stale: run `make matrix`"


# -- issue #28: the page reads right ------------------------------------------------------------------

NOT_IMPL = "the subject raised: NotImplementedError: q1_0 is not supported"


def test_not_implemented_is_grey_and_apart_from_failures():
    """A subject raising NotImplementedError on every conforming case (its one pass a rejection, KC-3.1) is a grey
    "not implemented" cell, no failure: not in the one-subject failures nor the clause's failing results."""
    cases = [case("v0", "error", "LEG-9", detail=NOT_IMPL), case("v1", "error", "LEG-9", detail=NOT_IMPL),
             case("r0", "pass", "LEG-9")]
    doc = run("lib:q1_0", "q1_0", "dequantize", cases, library=LIB_A)
    doc["case_info"]["r0"]["expect"] = "reject"
    other = run("b:q1_0", "q1_0", "dequantize", [case("v0", "pass", "LEG-9"), case("v1", "pass", "LEG-9"),
                                                  case("r0", "pass", "LEG-9")], library=LIB_B)
    m = Matrix([doc, other])
    cell = m.cell(m.groups[0], "liba 1.0")
    assert (cell.state, cell.implemented_nothing, cell.failing, cell.counts["not-implemented"]) == ("ni", True, 0, 2)
    assert m.single_failures() == []
    [row] = m.coverage([])["exercised"]
    assert (row["failing"], row["ni"], row["pass"]) == (0, 2, 4)
    html = page([doc, other], clauses=[], checkout=(None, None))
    assert re.search(r'<td class="cell ni"><button[^>]*>not implemented</button></td>', html)
    data = json.loads(re.search(r'id="runs-data">(.*?)</script>', html, re.S).group(1))
    assert [c[1] for c in data["runs"][0]["c"]] == ["not-implemented", "not-implemented", "pass"]


def test_a_partly_implemented_subject_keeps_its_counts_with_a_grey_mark():
    """One case not implemented among passes: the cell shows pass / total and an "n" mark, grey, not red."""
    doc = run("lib:f", "gptq_v1", "dequantize", [case("x", "pass"), case("y", "error", detail=NOT_IMPL)], library=LIB_A)
    html = page([doc], clauses=[], checkout=(None, None))
    assert re.search(r'<td class="cell ni"><button[^>]*>1/2</button><span class="mark not-implemented" '
                     r'title="1 not-implemented">n</span></td>', html)


def test_an_error_other_than_not_implemented_stays_a_failure():
    """Only NotImplementedError reads as "not implemented": another exception on conforming input is an error (KC-3.2)."""
    doc = run("lib:f", "gptq_v1", "dequantize", [case("x", "error", detail="the subject raised: ValueError: no")],
              library=LIB_A)
    assert Matrix([doc]).cell(Row("gptq_v1", "dequantize"), "liba 1.0").state == "bad"


def test_clause_coverage_is_scoped_to_the_chapters_the_runs_touch():
    """A run citing GPTQ clauses only: the unexercised list holds gptq.md's clauses and no other chapter's."""
    doc = run("a:f", "gptq_v1", "dequantize", [case("x", "pass", "GPTQ-3.2")], library=LIB_A)
    clauses = spec_clauses()
    cov = Matrix([doc]).coverage(clauses)
    assert cov["chapters"] == ["gptq.md"]
    assert {c.chapter for c in cov["unexercised"]} == {"gptq.md"}
    assert cov["normative"] == sum(c.normative for c in clauses if c.chapter == "gptq.md")
    html = page([doc], checkout=(None, None))
    assert "(<span id=\"chapters\">spec/gptq.md</span>)" in html and "spec/spqr.md" not in html


def test_not_applicable_is_its_own_column_in_the_clause_table():
    """Per clause: passed, failing, not applicable and not implemented results, each in its own column."""
    doc = run("a:f", "gptq_v1", "dequantize", [case("x", "pass"), case("y", "not-applicable"),
                                               case("z", "not-applicable"), case("w", "fail")], library=LIB_A)
    [row] = Matrix([doc]).coverage([])["exercised"]
    assert (row["pass"], row["failing"], row["na"], row["ni"]) == (1, 1, 2, 0)
    html = page([doc], clauses=[], checkout=(None, None))
    assert "<th>results failing</th><th>not applicable</th><th>not implemented</th>" in html
    assert re.search(r'<tr id="clause-GPTQ-3.2">.*?<td>1</td><td class="bad">1</td><td class="na">2</td>'
                     r'<td class="ni">0</td><td>1</td>', html)


def _with_commit(doc: dict, commit: str | None, dirty: bool = False) -> dict:
    doc["suite"] = {"version": "0.1.0", "commit": commit, "dirty": dirty}
    return doc


@pytest.mark.parametrize(("commit", "dirty", "checkout", "says"), [
    pytest.param("a" * 40, False, ("b" * 40, False), "1 of 1 run came from commit aaaaaaaaaaaa, not this checkout's "
                 "bbbbbbbbbbbb", id="other-commit"),
    pytest.param("b" * 40, True, ("b" * 40, False), "1 run was made from a modified tree (uncommitted changes on "
                 "bbbbbbbbbbbb)", id="modified-tree"),
    pytest.param("a" * 40, False, (None, None), "This page was written outside a git checkout: the runs' commits "
                 "(aaaaaaaaaaaa) cannot be compared with it.", id="no-git"),
    pytest.param(None, None, ("b" * 40, False), "1 run records no commit", id="no-commit-recorded"),
    pytest.param("b" * 40, False, ("b" * 40, True), "This checkout has uncommitted changes on bbbbbbbbbbbb: 1 run of "
                 "the commit itself", id="checkout-modified"),
])
def test_page_says_when_runs_came_from_another_tree(commit, dirty, checkout, says):
    """The header compares each run's recorded commit with the checkout's `git rev-parse HEAD`, without git too."""
    doc = _with_commit(run("a:f", "gptq_v1", "dequantize", [case("x", "pass")], library=LIB_A), commit, dirty)
    notes = re.findall(r'<p class="warn tree">(.*?)</p>', page([doc], clauses=[], checkout=checkout))
    assert len(notes) == 1 and notes[0].startswith(says.replace("'", "&#x27;"))


def test_page_of_runs_from_the_checkouts_own_commit_has_no_tree_note():
    """Runs of the very commit checked out, unmodified: nothing to say."""
    doc = _with_commit(run("a:f", "gptq_v1", "dequantize", [case("x", "pass")], library=LIB_A), "c" * 40)
    assert 'class="warn tree"' not in page([doc], clauses=[], checkout=("c" * 40, False))


def test_cli_matrix_of_a_kept_run_writes_the_kernel_commands_page(tmp_path, capsys):
    """`conformance matrix RUN.json --html` writes the page `conformance kernel --json --html` wrote for that run
    (up to the minute it was written), diagnosis included; both --help texts say so."""
    first, second = tmp_path / "kernel.html", tmp_path / "matrix.html"
    args = ["conformance", "kernel", "gptq_bugs:fields_msb_first", "--format", "gptq_v1", "--cases", r"b4_sym_g32_trivial$"]
    assert main([*args, "--json", "--html", str(first)]) == 1
    (tmp_path / "run.json").write_text(capsys.readouterr().out)
    assert main(["conformance", "matrix", str(tmp_path / "run.json"), "--html", str(second)]) == 0
    written = re.compile(r"page written [^<]*")
    assert written.sub("", first.read_text()) == written.sub("", second.read_text())
    assert "field order reversed within each byte or word (KC-5.1) explains 1 of 1 failing cases" in second.read_text()
    for command in (["conformance", "matrix", "--help"], ["conformance", "kernel", "--help"]):
        assert main(command) == 0
        assert "conformance matrix RUN.json --html FILE" in re.sub(r"\s+", " ", capsys.readouterr().out)
