"""tests/conftest.py's --shard: the parts of the suite cover every file exactly once, balanced by time."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("suite_conftest", Path(__file__).with_name("conftest.py"))
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


def test_every_file_lands_in_exactly_one_part():
    """The N parts together are the whole suite: each file is in one part."""
    files = {f"tests/t{i}.py" for i in range(17)}
    part = conftest.parts(files, 3, {"tests/t0.py": 50.0, "tests/t1.py": 5.0})
    assert set(part) == files and set(part.values()) == {0, 1, 2}


def test_longest_files_go_first_to_the_least_loaded_part():
    """Longest first to the part with the least time so far: 8, 7, 6, 5 on two parts -> {8, 5}, {7, 6}."""
    seconds = {"a.py": 8.0, "b.py": 7.0, "c.py": 6.0, "d.py": 5.0}
    assert conftest.parts(set(seconds), 2, seconds) == {"a.py": 0, "b.py": 1, "c.py": 1, "d.py": 0}


def test_unknown_files_count_as_the_median():
    """A file the table does not list weighs the table's median (here 6): it joins the lighter part."""
    seconds = {"a.py": 10.0, "b.py": 6.0, "c.py": 2.0}
    assert conftest.parts({"a.py", "b.py", "c.py", "new.py"}, 2, seconds)["new.py"] == 1


@pytest.mark.parametrize("spec", ["0/2", "3/2", "a/b", "1"])
def test_shard_outside_1_to_n_is_a_usage_error(spec):
    """--shard takes I/N with 1 <= I <= N."""
    with pytest.raises(pytest.UsageError):
        conftest._shard(spec)
