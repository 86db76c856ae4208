import asyncio
import functools
from typing import Literal

import pytest

from agentgym.core.tools import Tool, ToolError, Toolset, check_argument, describe, tool


@tool
def search(
    query: str,
    limit: int = 5,
    exact: bool = False,
    tags: list[str] | None = None,
    mode: Literal["fast", "deep"] = "fast",
) -> list[str]:
    """Search the corpus.

    Longer explanation that stays in the description.

    Args:
        query: What to look for.
        limit: How many results to return,
            at most.
        exact: Match whole words only.
        tags: Only documents with these tags.
        mode: Search mode.

    Returns:
        The matching titles.
    """
    return [query] * limit


def test_schema_derived_from_hints_and_docstring():
    schema = search.schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "search"
    assert function["description"].startswith("Search the corpus.")
    assert "Longer explanation" in function["description"]
    assert "Returns" not in function["description"]
    params = function["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"]["query"] == {"type": "string", "description": "What to look for."}
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["description"] == "How many results to return, at most."
    assert params["properties"]["exact"]["type"] == "boolean"
    assert params["properties"]["tags"]["type"] == "array"
    assert params["properties"]["tags"]["items"] == {"type": "string"}
    assert params["properties"]["mode"]["enum"] == ["fast", "deep"]


def test_schema_is_a_fresh_copy():
    search.schema()["function"]["parameters"]["required"].append("x")
    assert search.schema()["function"]["parameters"]["required"] == ["query"]


def test_call_validates_and_coerces_text_values():
    assert asyncio.run(search.call({"query": "a", "limit": "2"})) == '["a", "a"]'
    assert search.validate({"query": "a", "exact": "true"})["exact"] is True
    assert search.validate({"query": "a", "tags": '["x"]'})["tags"] == ["x"]
    # strict-mode calls send unused optional arguments as null: they take their defaults
    assert search.validate({"query": "a", "tags": None, "limit": None}) == {"query": "a"}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "missing required argument(s) 'query'"),
        ({"query": "a", "colour": 1}, "unknown argument(s) 'colour'"),
        ({"query": 5}, "argument 'query' must be string, got integer 5"),
        ({"query": None}, "argument 'query' must be string, got null"),
        ({"query": "a", "limit": "many"}, "argument 'limit' must be integer, got string"),
        ({"query": "a", "mode": "slow"}, "must be one of ['fast', 'deep']"),
        ({"query": "a", "tags": [1]}, "argument 'tags'[0] must be string"),
        (["a"], "must be a JSON object, got array"),
    ],
)
def test_bad_arguments_raise_tool_error_naming_the_problem(arguments, message):
    with pytest.raises(ToolError) as error:
        search.validate(arguments)
    assert message in str(error.value)


def test_async_tools_and_methods():
    class Box:
        factor = 3

        @tool
        async def scale(self, x: float) -> float:
            """Multiply by the box's factor.

            Args:
                x: The number.
            """
            return x * self.factor

    box = Box()
    assert isinstance(Box.scale, Tool)
    assert "self" not in Box.scale.parameters["properties"]
    assert asyncio.run(box.scale.call({"x": 2})) == "6"
    assert asyncio.run(box.scale.call({"x": "1.5"})) == "4.5"


def test_tool_needs_a_docstring_and_describable_types():
    with pytest.raises(TypeError, match="needs a docstring"):

        @tool
        def nodoc(x: int) -> int:
            return x

    with pytest.raises(TypeError, match="cannot describe the type"):

        @tool
        def odd(x: set) -> int:
            """Odd."""
            return 0


def test_number_accepts_integer_but_not_bool_as_integer():
    assert check_argument(3, {"type": "number"}, "x") == 3
    with pytest.raises(ToolError):
        check_argument(True, {"type": "integer"}, "x")


def test_a_toolset_is_described_by_its_class_and_bound_per_episode():
    class Counter(Toolset):
        def __init__(self, store: dict, *, step: int = 1):
            self.store, self.step = store, step

        @tool
        def bump(self, key: str) -> str:
            """Add the step to a counter.

            Args:
                key: The counter.
            """
            self.store[key] = self.store.get(key, 0) + self.step
            return str(self.store[key])

    factory = functools.partial(Counter, step=5)
    (described,) = describe(factory)  # no store (no episode) needed for the schema
    assert described.schema()["function"]["name"] == "bump"
    with pytest.raises(ToolError, match="not available yet"):
        asyncio.run(described.call({"key": "a"}))
    store: dict = {}
    (bound,) = factory(store).tools()
    assert asyncio.run(bound.call({"key": "a"})) == "5" and store == {"a": 5}
    with pytest.raises(TypeError, match="Toolset subclass"):
        describe(lambda resource: None)
