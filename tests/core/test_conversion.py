"""Values and command-line text converted to annotations, with messages that say what was
expected."""

import enum
from pathlib import Path
from typing import Any, Literal

import pytest

from agentgym.core.conversion import ConversionError, convert_to_type, describe, from_text


class Color(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(("text", "annotation", "expected"), [
    ("5", int, 5),
    ("-5", int, -5),
    ("1e-5", float, 1e-5),
    ("2", float, 2.0),
    ("true", bool, True),
    ("off", bool, False),
    ("5", str, "5"),
    ("a/b", Path, Path("a/b")),
    ("null", int | None, None),
    ("7", int | None, 7),
    ("5", int | str, 5),
    ("five", int | str, "five"),
    ("test", Literal["train", "test"], "test"),
    ("red", Color, Color.RED),
    ("[1, 2]", list[int], [1, 2]),
    ('{"a": 1}', dict, {"a": 1}),
    ("[1, 2]", Any, [1, 2]),
    ("plain text", Any, "plain text"),
])
def test_text_converts_by_annotation(text, annotation, expected):
    assert from_text(text, annotation) == expected


@pytest.mark.parametrize(("text", "annotation", "message"), [
    ("abc", int, "expected an integer, got 'abc'"),
    ("1.5", int, "expected an integer, got '1.5'"),
    ("x", float | None, "expected a number or null, got 'x'"),
    ("maybe", bool, "expected true or false, got 'maybe'"),
    ("tset", Literal["train", "test"], "'tset' is not allowed; did you mean 'test'?"
                                       " (allowed: train, test)"),
    ('["a"]', list[int], "item 0: expected an integer, got 'a' (str)"),
])
def test_text_that_does_not_fit_says_what_was_expected(text, annotation, message):
    with pytest.raises(ConversionError) as caught:
        from_text(text, annotation)
    assert str(caught.value) == message


def test_typed_values_keep_their_rules():
    assert convert_to_type("1e-3", float) == 1e-3  # YAML reads 1e-3 as text
    assert convert_to_type(5, float) == 5 and isinstance(convert_to_type(5, float), int)
    assert convert_to_type([1, 2], tuple[int, ...]) == (1, 2)
    with pytest.raises(ConversionError, match=r"expected an integer, got True \(bool\)"):
        convert_to_type(True, int)
    assert describe(int | None) == "an integer or null"
