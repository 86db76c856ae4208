"""check_env passes on sound envs and fails, naming the rule, on broken ones."""

import random

import gymnasium
import pytest

import agentgym
from agentgym.core import AgentEnv, Reward, RewardResult, SolutionTurn, Task, TaskList, ToolCall
from agentgym.core.tools import submit
from agentgym.testing import EnvCheckError, check_env


@pytest.mark.parametrize("parser", ["hermes", "xml", "openai"])
def test_calculator_passes(parser):
    check_env(agentgym.make("calculator", parser=parser))


class Exact(Reward):
    def score(self, episode):
        return RewardResult(float(episode.submission == "yes"))


class Always(Reward):
    def score(self, episode):
        return RewardResult(1.0)


def tasks():
    solution = [SolutionTurn([ToolCall("submit", {"answer": "yes"})])]
    return TaskList([Task(f"t{i}", f"Say yes ({i}).", solution=solution) for i in range(5)])


class SoundEnv(AgentEnv):
    reward = Exact()
    submit = submit

    def __init__(self, render_mode=None):
        super().__init__(tasks(), max_turns=3, render_mode=render_mode)


class UnseededEnv(SoundEnv):
    """Draws the task with Python's global random: reset(seed) is not reproducible."""

    def initial_messages(self, task):
        return [{"role": "user", "content": f"Say yes ({random.random()})."}]


class GenerousEnv(SoundEnv):
    """Its grader pays for doing nothing."""

    reward = Always()


class RaisingEnv(SoundEnv):
    """Lets malformed tool calls escape as exceptions."""

    async def astep(self, action):
        if isinstance(action, dict) and "{not json" in str(action):
            raise ValueError("cannot parse")
        return await super().astep(action)


@pytest.fixture(params=[SoundEnv, UnseededEnv, GenerousEnv, RaisingEnv])
def registered(request):
    env_id = f"check-{request.param.__name__}"
    gymnasium.register(
        env_id, entry_point=request.param, order_enforce=False, disable_env_checker=True
    )
    yield request.param, env_id
    del gymnasium.registry[env_id]


def test_check_env_catches_what_is_broken(registered):
    cls, env_id = registered
    expected = {
        SoundEnv: None,
        UnseededEnv: "non-deterministic",
        GenerousEnv: "NoopPolicy scored 1.0",
        RaisingEnv: "raised on a malformed tool call",
    }[cls]
    if expected is None:
        check_env(gymnasium.make(env_id))
    else:
        with pytest.raises(EnvCheckError, match=expected):
            check_env(gymnasium.make(env_id))


def test_check_env_rejects_non_agent_envs():
    with pytest.raises(EnvCheckError, match="expected an AgentEnv"):
        check_env(gymnasium.make("CartPole-v1"))
