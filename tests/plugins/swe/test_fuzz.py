"""Hostile model output never breaks a SWE env's ``step``: its tools (bash, the editor,
search) run in a real local sandbox and get whatever a model could send them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import agentgym
from agentgym.testing.fuzz import HOSTILE_ACTIONS, actions, step_contained

# `submit` is left out: grading runs the project's tests, which takes longer than the
# one second a malformed turn may take.
TOOLS = ["bash", "str_replace_editor", "search"]


@pytest.fixture(scope="module")
def env(toolz_tasks):
    # Commands are bounded by the turn's budget, so a random command line cannot hang
    # the step; no truncation, so no step grades.
    env = agentgym.make("swe-synth", tasks=str(toolz_tasks), command_timeout_s=0.5,
                        turn_timeout_s=0.6, max_turns=100_000)
    yield env
    env.close()


@pytest.mark.parametrize("name", sorted(HOSTILE_ACTIONS))
def test_a_hostile_action_is_a_message_to_the_agent(env, name):
    step_contained(env, HOSTILE_ACTIONS[name](), expect_error=True)


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(action=actions(tool_names=TOOLS))
def test_any_action_is_contained(env, action):
    step_contained(env, action)
    result = env.step('<tool_call>{"name": "bash", "arguments": {"command": "echo ok"}}'
                      "</tool_call>")
    assert result[0][0]["content"].startswith("ok"), result[0]  # the workspace still works
