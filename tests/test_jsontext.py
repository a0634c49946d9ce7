"""qformats.jsontext (QF-1.1): indented JSON whose time and size stay bounded on a hostile config.

Expected texts come from the standard library's ``json.dumps(obj, indent=n)`` (the independent route) for every
value no deeper than ``MAX_DEPTH``; deeper values are held to ``json.loads`` giving them back and to the size bound
the module states."""

from __future__ import annotations

import json
import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from qformats import jsontext

# JSON values with awkward strings (quotes, brackets, commas, backslashes, control and non-ASCII characters)
KEYS = st.text(alphabet=st.sampled_from(list('ab"\\[]{},: \n\té\u2028')), max_size=6)
SCALARS = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | KEYS
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=40)


def _depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


def _nest(depth: int, leaf) -> object:
    for i in range(depth):
        leaf = [leaf, i] if i % 2 else {"k": leaf, "n": [i]}
    return leaf


@settings(max_examples=200, deadline=None)
@given(value=VALUES, indent=st.sampled_from([0, 1, 2, 4]), ensure_ascii=st.booleans(), sort_keys=st.booleans())
def test_a_value_no_deeper_than_the_limit_is_the_standard_librarys_text(value, indent, ensure_ascii, sort_keys):
    """QF-1.1: to MAX_DEPTH levels the text is byte for byte json.dumps(obj, indent=n) with the same options."""
    assume(_depth(value) <= jsontext.MAX_DEPTH)
    want = json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
    assert jsontext.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys) == want


def test_empty_containers_stay_on_one_line():
    """QF-1.1 (json.dumps' layout): [] and {} are written as two characters at every depth."""
    value = {"a": [], "b": {}, "c": [[], {}]}
    assert jsontext.dumps(value, indent=2) == json.dumps(value, indent=2) == \
        '{\n  "a": [],\n  "b": {},\n  "c": [\n    [],\n    {}\n  ]\n}'


def test_the_default_option_is_passed_on():
    """QF-1.1: options reach the encoder (``default=str`` writes what JSON has no type for)."""
    value = {"path": object.__new__(type("P", (), {"__str__": lambda self: "p/q"}))}
    assert jsontext.dumps(value, indent=2, default=str) == '{\n  "path": "p/q"\n}'


def test_levels_past_the_limit_stay_on_one_line():
    """QF-1.1: containers opened deeper than max_depth are written compact inside the laid-out levels."""
    value = {"a": [1, [2, [3, {"b": [4]}]]], "c": 2}
    assert jsontext.dumps(value, indent=2, max_depth=2) == \
        '{\n  "a": [\n    1,\n    [2,[3,{"b": [4]}]]\n  ],\n  "c": 2\n}'


def test_exactly_max_depth_levels_are_laid_out():
    """QF-1.1: a value exactly max_depth deep is json.dumps' text; one level more puts the innermost on one line."""
    at_limit = _nest(jsontext.MAX_DEPTH - 1, [7])
    assert _depth(at_limit) == jsontext.MAX_DEPTH
    assert jsontext.dumps(at_limit, indent=2) == json.dumps(at_limit, indent=2)
    past = _nest(jsontext.MAX_DEPTH, [7])
    text = jsontext.dumps(past, indent=2)
    assert text != json.dumps(past, indent=2) and "[7]" in text and json.loads(text) == past


def test_a_900_deep_nest_reads_back_and_grows_linearly():
    """QF-1.1: a nest as deep as json.loads allows reads back equal, and the indentation adds at most
    1 + indent * max_depth characters per comma or bracket (json.dumps' text grows with depth squared)."""
    value = [_nest(900, None) for _ in range(20)]
    compact = json.dumps(value, separators=(",", ": "))
    text = jsontext.dumps(value, indent=2)
    assert json.loads(text) == value
    structural = sum(compact.count(c) for c in "[]{},")
    assert len(text) <= len(compact) + structural * (1 + 2 * jsontext.MAX_DEPTH)
    assert len(json.dumps(value, indent=2)) > 20 * len(text)          # what the standard library would write


def test_strings_holding_structural_characters_are_copied_whole():
    """QF-1.1: brackets, commas and escaped quotes inside strings are not layout."""
    value = {'a"[,': ['x\\"]{', "\u2028,"], "n": math.pi}
    assert jsontext.dumps(value, indent=4, ensure_ascii=False) == json.dumps(value, indent=4, ensure_ascii=False)
