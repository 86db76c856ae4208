"""The ``openenv`` env playing an OpenEnv server that agentgym did not start: a guessing
game written here with openenv-core's own base classes and served by its own app factory."""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the OpenEnv tests need openenv-core"
                    " (pip install -e '.[openenv]')")

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import BaseModel, Field

import agentgym
from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy
from agentgym.core.serving import LocalServer
from agentgym.core.task import Task
from agentgym.interchange.openenv import (
    OpenEnvServerError,
    action_parameters,
    openenv_app,
    render_observation,
)
from agentgym.rollout.evaluate import evaluate
from agentgym.rollout.loop import play_episode
from agentgym.testing import check_env


class GuessAction(Action):
    """A guess of the secret number."""

    guess: int = Field(description="The number guessed, 1 to 100.")


class GuessObservation(Observation):
    hint: str = Field(default="", description="higher, lower, or correct")
    guesses: int = Field(default=0, description="Guesses made so far.")


class GuessingGame(Environment[GuessAction, GuessObservation, State]):
    """Guess a number from 1 to 100 drawn with the reset's seed; each wrong guess is told
    higher or lower. Reward 1.0 on the right guess, which ends the episode."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self._secret = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              **kwargs: Any) -> GuessObservation:
        self._secret = random.Random(seed).randint(1, 100)
        self._state = State(episode_id=episode_id)
        return GuessObservation(hint="Guess a number from 1 to 100.")

    def step(self, action: GuessAction, timeout_s: float | None = None,
             **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        if action.guess == self._secret:
            return GuessObservation(hint="correct", guesses=self._state.step_count,
                                    reward=1.0, done=True)
        hint = "higher" if action.guess < self._secret else "lower"
        return GuessObservation(hint=hint, guesses=self._state.step_count, reward=0.0)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="guessing_game", description="Guess the number.",
                                   version="0.1")


@pytest.fixture(scope="module")
def game() -> Iterator[str]:
    """The guessing game served by openenv-core's own app factory; its URL."""
    app = create_fastapi_app(GuessingGame, GuessAction, GuessObservation,
                             max_concurrent_envs=4)
    with LocalServer(app) as server:
        yield server.url


def bisect(messages: list[dict[str, Any]], task: Task) -> str:
    """Guess by halving the range the hints leave: a tool call in Hermes format."""
    low, high, last = 1, 100, None
    for message in messages:
        call = re.search(r'"guess": (\d+)', str(message.get("tool_calls") or ""))
        if message["role"] == "assistant" and call:
            last = int(call.group(1))
        if message["role"] == "tool" and last is not None:
            hint = json.loads(message["content"])["hint"]
            low, high = (last + 1, high) if hint == "higher" else (low, last - 1)
    guess = (low + high) // 2
    return f'<tool_call>{{"name": "step", "arguments": {{"guess": {guess}}}}}</tool_call>'


def test_the_one_tool_takes_the_servers_action(game):
    env = agentgym.make("openenv", url=game).unwrapped
    try:
        assert env.served_env_id is None and env.server.name == "guessing_game"
        messages, info = env.reset(seed=0)
        [tool] = info["tools"]
        assert tool["type"] == "function" and tool["function"]["name"] == "step"
        assert tool["function"]["parameters"] == {
            "type": "object", "additionalProperties": False, "required": ["guess"],
            "properties": {"guess": {"type": "integer",
                                     "description": "The number guessed, 1 to 100."}}}
        assert "guessing_game" in tool["function"]["description"]
        assert "A guess of the secret number." in tool["function"]["description"]
        assert [m["role"] for m in messages] == ["user"]
        assert "`step`" in messages[0]["content"]
        assert messages[0]["content"].endswith('{"hint": "Guess a number from 1 to 100.",'
                                               ' "guesses": 0}')
        assert env.task_ids()[:2] == ["seed-0", "seed-1"] and len(env.task_ids()) == 100
    finally:
        env.close()


def test_a_policy_that_reads_the_hints_wins_and_noop_scores_0(game):
    won = asyncio.run(evaluate("openenv", ScriptedPolicy(bisect), 3,
                               env_kwargs={"url": game}))
    assert [t.reward for t in won.trajectories] == [1.0] * 3
    assert [t.task_id for t in won.trajectories] == ["seed-0", "seed-1", "seed-2"]
    assert all(t.finish_reason == "submitted" and t.error is None for t in won.trajectories)
    lost = asyncio.run(evaluate("openenv", NoopPolicy(), 2,
                                env_kwargs={"url": game, "max_turns": 3}))
    assert [(t.reward, t.finish_reason) for t in lost.trajectories] == [(0.0, "max_turns")] * 2


def test_a_server_of_one_session_plays_a_pipeline_of_episodes():
    """OpenEnv apps serve one session unless they say otherwise; the session of an episode
    that just ended closes a moment after the next episode asks for one. The adapter asks
    again while the server is at capacity, instead of failing every other episode."""
    app = create_fastapi_app(GuessingGame, GuessAction, GuessObservation)  # one session
    with LocalServer(app) as server:
        report = asyncio.run(evaluate("openenv", ScriptedPolicy(bisect), 4,
                                      env_kwargs={"url": server.url}))
    assert [(t.reward, t.error) for t in report.trajectories] == [(1.0, None)] * 4


def test_a_wrong_argument_is_the_servers_error_for_the_agent_and_play_goes_on(game):
    env = agentgym.make("openenv", url=game, instructions="Find the number.").unwrapped
    try:
        messages, _ = env.reset(options={"task_id": "seed-4"})
        assert messages[0]["content"].startswith("Find the number.\n")
        new, reward, terminated, truncated, info = env.step(
            '<tool_call>{"name": "step", "arguments": {"guess": "seven"}}</tool_call>')
        assert (reward, terminated, truncated, info["tool_errors"]) == (0.0, False, False, 1)
        assert new[0]["role"] == "tool" and new[0]["content"].startswith("Error: step:")
        assert "guess: Input should be a valid integer" in new[0]["content"]
        assert '(got "seven")' in new[0]["content"]
        new, *_, info = env.step(
            '<tool_call>{"name": "step", "arguments": {"guess": 50, "hint": "x"}}</tool_call>')
        assert "hint: Extra inputs are not permitted" in info["errors"][0]
        secret = random.Random(4).randint(1, 100)
        new, reward, terminated, _, info = env.step(
            f'<tool_call>{{"name": "step", "arguments": {{"guess": {secret}}}}}</tool_call>')
        assert (reward, terminated, info["finish_reason"]) == (1.0, True, "submitted")
        assert json.loads(new[0]["content"]) == {"hint": "correct", "guesses": 1}
        assert info["reward_metrics"] == {"steps": 1, "reward_sum": 1.0, "reward_last": 1.0}
    finally:
        env.close()


def test_the_openenv_env_passes_check_env_on_a_generic_server(game):
    check_env(agentgym.make("openenv", url=game))


def test_the_oracle_says_it_has_no_solution_to_play(game):
    with pytest.raises(InvalidArgumentError, match=r"have none \(seed-0\)"):
        asyncio.run(evaluate("openenv", OraclePolicy(), 1, env_kwargs={"url": game}))
    env = agentgym.make("openenv", url=game).unwrapped
    try:
        played = env.run_coroutine(play_episode(env, OraclePolicy(), "seed-3"))
    finally:
        env.close()
    assert "'seed-3' has no reference solution" in played.error


def test_episode_reward_sums_or_keeps_the_last(game):
    guesses = [f'<tool_call>{{"name": "step", "arguments": {{"guess": {g}}}}}</tool_call>'
               for g in (0, 0)]
    for option in ("sum", "last"):
        env = agentgym.make("openenv", url=game, episode_reward=option, max_turns=2).unwrapped
        try:
            played = env.run_coroutine(play_episode(env, ScriptedPolicy(guesses), "seed-1"))
            assert (played.reward, played.finish_reason) == (0.0, "max_turns")
            assert played.metrics["steps"] == 2
        finally:
            env.close()
    with pytest.raises(InvalidArgumentError, match="episode_reward must be one of sum, last"):
        agentgym.make("openenv", url=game, episode_reward="mean")


def test_options_of_generic_servers_are_refused_for_an_agentgym_server():
    with LocalServer(openenv_app("calculator")) as server, pytest.raises(
            InvalidArgumentError, match="instructions, max_turns apply to OpenEnv servers not"):
        agentgym.make("openenv", url=server.url, max_turns=3, instructions="x")


def test_a_generic_server_that_stops_ends_the_episode_with_sandbox_error():
    app = create_fastapi_app(GuessingGame, GuessAction, GuessObservation)
    server = LocalServer(app).start()
    env = agentgym.make("openenv", url=server.url).unwrapped

    def stop_then_guess(messages: Any, task: Task) -> str:
        server.close()
        return bisect(messages, task)

    try:
        played = env.run_coroutine(play_episode(env, ScriptedPolicy(stop_then_guess), "seed-0"))
        assert (played.finish_reason, played.reward) == ("sandbox_error", 0.0)
        assert "OpenEnvServerError" in played.error
        with pytest.raises(AgentGymError, match="no OpenEnv server answers"):
            agentgym.make("openenv", url=server.url)
        with pytest.raises(OpenEnvServerError, match="cannot be reached"):
            env.reset()
    finally:
        env.close()
        server.close()


class Inner(BaseModel):
    x: int
    title: str = Field(description="a field named title")
    child: Inner | None = None


class NestedAction(Action):
    """Nested fields and a discriminator."""

    type: str = Field(default="move", json_schema_extra={"const": "move"})
    where: Inner
    mode: str = Field(default="fast", json_schema_extra={"enum": ["fast", "slow"]})


def test_action_schemas_become_self_contained_tool_parameters():
    parameters = action_parameters(NestedAction.model_json_schema())
    text = json.dumps(parameters)
    assert "$ref" not in text and "$defs" not in text
    assert set(parameters["properties"]) == {"where", "mode"}  # metadata, type left out
    where = parameters["properties"]["where"]
    assert where["type"] == "object" and where["required"] == ["x", "title"]
    assert where["properties"]["title"] == {"type": "string",
                                            "description": "a field named title"}
    # A model met again inside itself is a plain object there.
    assert where["properties"]["child"]["anyOf"] == [{"type": "object"}, {"type": "null"}]


def test_observations_render_as_compact_json_or_their_one_text():
    assert render_observation({"text": "hello", "reward": 1.0, "done": False}) == "hello"
    assert render_observation({"a": 1, "b": [2], "metadata": {}, "done": True}) == (
        '{"a": 1, "b": [2]}')
    long = render_observation({"text": "x" * 40_000})
    assert long.endswith("[... 8000 more characters cut]")
