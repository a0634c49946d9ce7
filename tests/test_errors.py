"""The error type and its closed catalogue of codes (spec/README.md, QF-2)."""

import re

import pytest

from qformats.errors import CODES, QFormatsError, fail, format_actual


def test_message_reads_must_be_got():
    """Messages read "'scales' must be finite float16 (got NaN at [3, 17])"."""
    err = fail("tensor.nonfinite", "scales", "finite float16", "NaN at [3, 17]")
    assert err.message == "'scales' must be finite float16 (got NaN at [3, 17])"
    assert (err.code, err.clause, err.tensor, err.constraint, err.actual) == (
        "tensor.nonfinite", "QF-2.4", "scales", "finite float16", "NaN at [3, 17]")


def test_error_is_a_value_error_and_names_code_and_clause():
    """QFormatsError subclasses ValueError so callers may catch it as one; str() names code and clause."""
    err = fail("tensor.dtype", "qweight", "int32", "int64")
    assert isinstance(err, ValueError)
    assert str(err) == "'qweight' must be int32 (got int64) [tensor.dtype, QF-2.2]"
    assert str(err.with_file("model.safetensors")).startswith("model.safetensors: 'qweight'")


def test_unregistered_code_is_a_programming_error():
    """The catalogue is closed: an unknown code cannot be raised."""
    with pytest.raises(KeyError):
        QFormatsError("no.such.code", "message")


@pytest.mark.parametrize("code", sorted(CODES))
def test_codes_are_stable_dotted_names_with_a_clause(code):
    """Codes are `<area>.<what>` in lower case; each names its clause `<CHAPTER>-<section>.<rule>`."""
    clause, meaning = CODES[code]
    assert re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", code)
    assert re.fullmatch(r"(QF|GPTQ|Q4K|SPQR|GGUF|ST|CKPT|GGML|LEG|KQ|IQ|TQ|MX|AWQ|CT|FP8|FP4|BNB|KC|AUDIT|REMOTE)-\d+(\.\d+)*", clause)
    assert meaning


def test_actual_values_are_bounded_in_depth_and_length():
    """QF-1: a message never fails or balloons on the input it quotes: deep values are cut at four
    levels, long lists after twelve items (reprlib's '...'), strings after 300 characters."""
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert format_actual(deep) == "[[[[[...]]]]]"   # four levels shown, the fifth elided as reprlib does
    assert format_actual(list(range(10**6))) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...]"
    assert format_actual([1, 2, 3]) == "[1, 2, 3]"
    assert format_actual("x" * 5000) == "x" * 300 + "... (5000 characters)"


def test_brief_shows_a_json_object_by_its_content_not_its_address():
    """A JSON object from a hostile index reads as its pairs in a message, the same in every process."""
    from qformats.containers.safetensors import JsonObject
    from qformats.errors import brief

    assert brief(JsonObject([("weight_map", 1)])) == "[('weight_map', 1)]"
    assert brief(JsonObject([(str(i), i) for i in range(20)])).endswith(", ...]")
