"""k attempts of one task: each episode knows which attempt it is, in the env's setup, in
reset's info and in the policy, in every pipeline mode; rollout() takes make_env alone."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.core import OraclePolicy
from agentgym.plugins.calculator.env import CalculatorEnv
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.pipeline import MODES, PipelineConfig


class Recording(CalculatorEnv):
    """Calculator, remembering which attempt each set-up episode was."""

    seen: list[tuple[int, int, int]] = []

    async def setup_episode(self, task):
        await super().setup_episode(task)
        self.seen.append((self.episode.attempt, self.episode.group, id(self)))


class AttemptAware(OraclePolicy):
    """The oracle, noting the attempt and group it is told each turn."""

    takes_attempt = True

    def __init__(self):
        self.told: set[tuple[int, int]] = set()

    def act(self, messages, task, *, attempt, group):
        self.told.add((group, attempt))
        return super().act(messages, task)


@pytest.mark.parametrize("mode", MODES)
def test_four_attempts_of_one_task_each_see_their_own_index(mode):
    Recording.seen = []
    policy = AttemptAware()
    trajectories = asyncio.run(rollout(
        None, policy, 2, k=4, make_env=Recording,
        pipeline=PipelineConfig(mode=mode, concurrency=3)))
    assert sorted(t.episode for t in trajectories) == list(range(8))
    assert all(t.reward == 1.0 and t.env == "Recording" for t in trajectories)
    assert sorted((g, a) for a, g, _ in Recording.seen) == [
        (g, a) for g in (0, 1) for a in range(4)]
    assert policy.told == {(g, a) for g in (0, 1) for a in range(4)}


def test_reset_info_carries_the_attempt():
    env = CalculatorEnv()
    try:
        _, info = env.reset(seed=0, options={"attempt": 3, "group": 7})
        assert (info["attempt"], info["group"]) == (3, 7)
        assert (env.episode.attempt, env.episode.group) == (3, 7)
        _, info = env.reset(seed=0)
        assert (info["attempt"], info["group"]) == (0, 0)
    finally:
        env.close()


def test_rollout_needs_an_env():
    with pytest.raises(ValueError, match="env_id or make_env"):
        asyncio.run(rollout(None, OraclePolicy(), 1))
