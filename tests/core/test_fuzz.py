"""Hostile model output never breaks ``step``: every built-in parser, on the calculator env
(the SWE envs' tools get the same in tests/plugins/swe/test_fuzz.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import agentgym
from agentgym.core.parsers import MAX_JSON_DEPTH, TooLargeError, bounded_json
from agentgym.core.tools import ToolError
from agentgym.plugins.calculator.env import evaluate_expression
from agentgym.testing.fuzz import HOSTILE_ACTIONS, actions, step_contained

PARSERS = ["hermes", "xml", "llama3-json", "mistral", "openai"]


@pytest.fixture(scope="module", params=PARSERS)
def env(request):
    env = agentgym.make("calculator", parser=request.param)
    yield env
    env.close()


@pytest.mark.parametrize("name", sorted(HOSTILE_ACTIONS))
def test_a_hostile_action_is_a_message_to_the_agent(env, name):
    step_contained(env, HOSTILE_ACTIONS[name](), expect_error=True)
    assert env.unwrapped.episode.messages[-1]["role"] in ("user", "tool")


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(action=actions(tool_names=["calculator", "submit"]))
def test_any_action_is_contained(env, action):
    step_contained(env, action)


def test_malformed_turns_are_counted_for_the_reward():
    with agentgym.make("calculator") as env:
        env.reset(seed=0)
        env.step(None)
        env.step('<tool_call>{"name": "calculator", "arguments": ' + "[" * 100 + "]" * 100
                 + "}</tool_call>")
        assert env.unwrapped.episode.tool_errors == 2  # what rewards and trajectories read


def test_json_is_bounded_before_it_is_decoded():
    assert bounded_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    with pytest.raises(TooLargeError, match="nests 65 levels"):
        bounded_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    assert bounded_json('["[[[[", "1111"]') == ["[[[[", "1111"]  # brackets in strings
    with pytest.raises(TooLargeError, match="over 1000 digits"):
        bounded_json('{"n": ' + "1" * 1001 + "}")
    assert bounded_json('{"n": "' + "1" * 5000 + '"}')["n"] == "1" * 5000


@pytest.mark.parametrize("expression", ["1+" * 2_000_000 + "1", "-" * 999 + "1",
                                        "9**9**9", "10**60*10**60*10**60/3"])
def test_the_calculator_refuses_what_would_cost_too_much(expression):
    with pytest.raises(ToolError):
        evaluate_expression(expression)
