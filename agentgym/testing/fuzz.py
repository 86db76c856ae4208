"""Hostile actions for env tests: whatever a model (or a bug upstream of it) could send.

``step`` must turn every action into messages for the agent and never raise: malformed tool
calls, unknown tools, wrong arguments, JSON nested 10,000 deep, a number of 100,000 digits,
a turn of megabytes, ``None``, bytes, numbers, lists, message dicts of the wrong shape. Use
both pieces in a plugin's tests::

    from hypothesis import given
    from agentgym.testing.fuzz import HOSTILE_ACTIONS, actions, step_contained

    @pytest.mark.parametrize("name", sorted(HOSTILE_ACTIONS))
    def test_hostile_action(env, name):
        step_contained(env, HOSTILE_ACTIONS[name]())

    @given(action=actions(tool_names=["bash", "submit"]))
    def test_any_action(env, action):
        step_contained(env, action)

:func:`actions` needs ``hypothesis`` (in agentgym's ``dev`` extra).
"""

from __future__ import annotations

import json
import reprlib
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

#: Explicit hostile actions, each built on demand (some are megabytes), by name.
HOSTILE_ACTIONS: dict[str, Callable[[], Any]] = {
    "hermes, 10,000-deep JSON": lambda: (
        '<tool_call>{"name": "x", "arguments": ' + "[" * 10_000 + "]" * 10_000
        + "}</tool_call>"),
    "hermes, 10,000-deep arguments string": lambda: (
        "<tool_call>" + json.dumps({"name": "x", "arguments": "[" * 10_000 + "]" * 10_000})
        + "</tool_call>"),
    "openai text, 10,000-deep": lambda: (
        '{"role": "assistant", "tool_calls": [' + "[" * 10_000 + "]" * 10_000 + "]}"),
    "openai dict, 10,000-deep arguments string": lambda: {
        "role": "assistant", "content": "",
        "tool_calls": [{"id": "a", "function": {
            "name": "x", "arguments": '{"a": ' + "[" * 10_000 + "]" * 10_000 + "}"}}]},
    "openai dict, 10,000-deep arguments object": lambda: {
        "role": "assistant",
        "tool_calls": [{"function": {"name": "x", "arguments": {"a": _nested(10_000)}}}]},
    "hermes, 100,000-digit integer": lambda: (
        '<tool_call>{"name": "x", "arguments": {"n": ' + "9" * 100_000 + "}}</tool_call>"),
    "openai text, 100,000-digit integer": lambda: "9" * 100_000,
    "xml, unclosed parameter": lambda: "<function=x><parameter=a>" + "v" * 1000,
    "4 MB calculator expression": lambda: (
        '<tool_call>{"name": "calculator", "arguments": {"expression": "'
        + "1+" * 2_000_000 + '1"}}</tool_call>'),
    "4 MB calculator expression, openai dict": lambda: {
        "role": "assistant", "tool_calls": [{"function": {
            "name": "calculator", "arguments": {"expression": "1+" * 2_000_000 + "1"}}}]},
    "10,000 tool calls": lambda: '<tool_call>{"name": "x", "arguments": {}}</tool_call>' * 10_000,
    "10,000 closing tags": lambda: "<tool_call>{" + "</tool_call>" * 10_000,
    "llama3-json, 10,000-deep JSON": lambda: (
        '{"name": "x", "parameters": ' + "[" * 10_000 + "]" * 10_000 + "}"),
    "llama3-json, 100,000-digit integer": lambda: (
        '<|python_tag|>{"name": "x", "parameters": {"n": ' + "9" * 100_000 + "}}"),
    "llama3-json, 10,000 calls": lambda: '{"name": "x", "parameters": {}}; ' * 10_000,
    "mistral, 10,000-deep JSON": lambda: "[TOOL_CALLS]" + "[" * 10_000 + "]" * 10_000,
    "mistral, 100,000-digit integer": lambda: '[TOOL_CALLS]x[ARGS]{"n": ' + "9" * 100_000 + "}",
    "mistral, 10,000 calls": lambda: '[TOOL_CALLS]x[ARGS]{}' * 10_000,
    "None": lambda: None,
    "an int": lambda: 42,
    "bytes": lambda: b"<tool_call>{}</tool_call>",
    "a list": lambda: [{"role": "assistant"}],
    "a dict with non-text content": lambda: {"role": "assistant", "content": 7},
    "tool_calls not a list": lambda: {"role": "assistant", "tool_calls": "submit"},
    "a tool call that is not an object": lambda: {"role": "assistant", "tool_calls": [None, 3]},
    "a name that is not a string": lambda: (
        '<tool_call>{"name": {"a": 1}, "arguments": {}}</tool_call>'),
    "invalid UTF-8 escapes": lambda: '<tool_call>{"name": "\\ud800", "arguments": {}}</tool_call>',
}


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def actions(tool_names: Sequence[str] = ("submit",), max_leaves: int = 40) -> Any:
    """A hypothesis strategy of actions of every type, size and nesting: tool calls in each
    format (hermes, xml, OpenAI text and dicts) to ``tool_names`` and to unknown tools,
    with arguments of any JSON shape, cut at any point, and non-text values."""
    from hypothesis import strategies as st

    leaves = (st.none() | st.booleans() | st.integers() | st.floats()
              | st.text(max_size=40))
    values = st.recursive(leaves, lambda children: st.lists(children, max_size=4)
                          | st.dictionaries(st.text(max_size=8), children, max_size=4),
                          max_leaves=max_leaves)
    names = st.sampled_from(list(tool_names)) | st.text(max_size=12) | values
    arguments = values | values.map(lambda v: json.dumps(v)) | st.text(max_size=40)
    calls = st.fixed_dictionaries({"name": names, "arguments": arguments})
    hermes = st.lists(calls.map(lambda c: f"<tool_call>{json.dumps(c)}</tool_call>"),
                      max_size=3).map("\n".join)
    xml = st.tuples(names.map(str), st.dictionaries(st.text(max_size=8), st.text(max_size=40),
                                                    max_size=3)).map(
        lambda c: f"<function={c[0]}>" + "".join(f"<parameter={k}>{v}</parameter>"
                                                 for k, v in c[1].items()) + "</function>")
    messages = st.fixed_dictionaries(
        {"role": st.just("assistant")},
        optional={"content": values, "tool_calls": values | st.lists(
            st.fixed_dictionaries({"function": calls}, optional={"id": values}) | values,
            max_size=3)})
    texts = hermes | xml | messages.map(lambda m: json.dumps(m)) | st.text(max_size=200)
    cut = st.tuples(texts, st.integers(min_value=0, max_value=400)).map(
        lambda t: t[0][: t[1]])
    return texts | cut | messages | values | st.binary(max_size=40)


def step_contained(env: Any, action: Any, max_memory_mb: float = 200,
                   max_seconds: float = 1.0, expect_error: bool = False) -> dict[str, Any]:
    """Step ``env`` (reset first when no episode runs) with ``action`` and check that it
    returned, within ``max_seconds`` and ``max_memory_mb`` of Python allocations at peak,
    with a step tuple (with ``expect_error``, one that counts a tool error or says that no
    tool call was found): returns its info. Raises AssertionError naming what broke."""
    raw = getattr(env, "unwrapped", env)
    if raw.episode is None or raw.episode.done:
        env.reset(seed=0)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        messages, reward, terminated, truncated, info = env.step(action)
        assert isinstance(reward, float) and isinstance(terminated, bool), reprlib.repr(action)
        assert isinstance(truncated, bool), reprlib.repr(action)
        seconds = time.perf_counter() - started
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    shown = reprlib.repr(action)  # depth-limited: the action may nest 10,000 deep
    assert isinstance(messages, list) and isinstance(info, dict), shown
    assert seconds < max_seconds, f"step took {seconds:.2f} s on {shown}"
    assert peak_mb < max_memory_mb, f"step took {peak_mb:.0f} MB on {shown}"
    if expect_error:
        assert info.get("tool_errors", 0) >= 1 or info.get("no_tool_call"), (shown, info)
    return info


__all__ = ["HOSTILE_ACTIONS", "actions", "step_contained"]
