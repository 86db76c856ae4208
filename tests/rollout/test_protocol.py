"""The rollout loop drives envs only through the env protocol (agentgym.core.env).

``EchoEnv`` is written against the protocol alone (no AgentEnv); ``ProtocolOnly`` lets the
loop see nothing of an AgentEnv but the protocol's calls, and refuses any attribute set.
"""

import asyncio
import inspect

import pytest

import agentgym
from agentgym.core import NoopPolicy, OraclePolicy
from agentgym.core.env import EnvProtocol
from agentgym.core.policies import TextPolicy
from agentgym.rollout.evaluate import evaluate
from agentgym.rollout.pipeline import MODES, PipelineConfig
from agentgym.testing.protocol_env import EchoEnv

CALLS = ("areset", "astep", "agrade", "aend", "arelease", "aclose", "task_ids")


class ProtocolOnly:
    """Exposes only the protocol's calls of the env it wraps, and records them."""

    def __init__(self, env):
        object.__setattr__(self, "_env", env)
        object.__setattr__(self, "calls", [])

    def __getattr__(self, name):
        if name not in CALLS:
            raise AttributeError(f"the loop read {name!r}, which is not in the env protocol")
        self.calls.append(name)
        return getattr(self._env, name)

    def __setattr__(self, name, value):
        raise AssertionError(f"the loop set {name!r} on the env")


def test_envs_keep_the_protocol():
    env = agentgym.make("calculator")
    try:
        assert isinstance(env, EnvProtocol) and isinstance(EchoEnv(), EnvProtocol)
        for name in CALLS:
            assert inspect.iscoroutinefunction(getattr(EchoEnv, name)) == name.startswith("a")
    finally:
        env.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("policy", "expected"), [(OraclePolicy(), 1.0), (NoopPolicy(), 0.0)])
def test_a_protocol_only_env_plays_in_every_mode(mode, policy, expected):
    made = []

    def make():
        made.append(EchoEnv(num_tasks=3, setup_s=0.05))
        return made[-1]

    report = asyncio.run(evaluate("echo", policy, 7, make_env=make,
                                  pipeline=PipelineConfig(mode=mode, concurrency=2)))
    assert report.n == 7 and report.mean_reward == expected
    assert {t.finish_reason for t in report.trajectories} == (
        {"said"} if expected else {"max_turns"})
    first = min(report.trajectories, key=lambda t: t.episode)
    assert first.messages[0]["content"] == "Say the word 'apple'."
    assert first.messages[1]["role"] == "assistant"
    assert all(env.closed and env.live == 0 for env in made)


@pytest.mark.parametrize("mode", MODES)
def test_the_loop_uses_nothing_of_an_agent_env_but_the_protocol(mode):
    wrapped = []

    def make():
        wrapped.append(ProtocolOnly(agentgym.make("calculator", num_tasks=4).unwrapped))
        return wrapped[-1]

    report = asyncio.run(evaluate("calculator", OraclePolicy(), 6, make_env=make,
                                  pipeline=PipelineConfig(mode=mode, concurrency=2)))
    assert report.mean_reward == 1.0, [t.error for t in report.trajectories]
    calls = {name for env in wrapped for name in env.calls}
    assert {"areset", "astep", "agrade", "arelease", "aclose", "task_ids"} <= calls
    # The conversation recorded is the env's own, tool-call ids included.
    trajectory = report.trajectories[0]
    assert trajectory.messages[2]["tool_calls"][0]["id"] == trajectory.messages[3][
        "tool_call_id"]


def test_a_limit_of_the_loop_ends_the_episode_through_aend():
    from agentgym.rollout.loop import RolloutConfig

    class Slow(TextPolicy):
        async def act(self, messages, task):
            await asyncio.sleep(0.02)
            return "still thinking"

    env = EchoEnv(num_tasks=1, max_turns=50)
    report = asyncio.run(evaluate("echo", Slow(), 1, make_env=lambda: env,
                                  config=RolloutConfig(max_wall_s=0.05)))
    (trajectory,) = report.trajectories
    assert trajectory.finish_reason == "wall_time" and trajectory.error is None
    assert trajectory.metrics == {"turns": trajectory.turns}
