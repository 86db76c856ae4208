"""The schedules keep their promises: generation concurrency, live sandboxes, overlap."""

import asyncio
import time

import pytest

from agentgym.core import AgentEnv, Reward, RewardResult, Submitted, Task, TaskList, tool
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.pipeline import MODES, PipelineConfig

LIVE = {"now": 0, "max": 0}
SETUP_DONE = {}


class Passed(Reward):
    def score(self, episode):
        return RewardResult(float(episode.submitted))


class SlowSetupEnv(AgentEnv):
    """Setup takes 0.2 s and counts live episodes; 'fail' tasks fail their setup."""

    reward = Passed()

    def __init__(self):
        tasks = TaskList([Task(f"t{i}", f"Task {i}.") for i in range(6)] +
                         [Task("fail", "Broken task.")])
        super().__init__(tasks, max_turns=3)

    async def setup_episode(self, task):
        LIVE["now"] += 1
        LIVE["max"] = max(LIVE["max"], LIVE["now"])
        await asyncio.sleep(0.2)
        if task.id == "fail":
            raise RuntimeError("the sandbox image is missing")
        SETUP_DONE[task.id] = time.perf_counter()

    async def teardown_episode(self):
        LIVE["now"] -= 1

    @tool
    def finish(self) -> str:
        """Finish."""
        raise Submitted(True)


class CountingPolicy:
    """A text policy that takes 50 ms per turn and records concurrency and timing."""

    def __init__(self):
        self.active = self.peak = 0
        self.first_turn_at = {}

    async def act(self, messages, task):
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.first_turn_at.setdefault(task.id, time.perf_counter())
        await asyncio.sleep(0.05)
        self.active -= 1
        return '<tool_call>{"name": "finish", "arguments": {}}</tool_call>'


@pytest.mark.parametrize("mode", MODES)
def test_generation_concurrency_and_live_sandboxes_are_bounded(mode):
    LIVE.update(now=0, max=0)
    policy = CountingPolicy()
    config = PipelineConfig(mode=mode, concurrency=3)
    trajectories = asyncio.run(rollout("x", policy, 18, make_env=SlowSetupEnv, pipeline=config))
    assert policy.peak <= 3
    assert LIVE["max"] <= config.live_cap
    assert LIVE["now"] == 0
    failed = [t for t in trajectories if t.task_id == "fail"]
    assert failed and all(t.finish_reason == "error" for t in failed)
    assert all("image is missing" in t.error for t in failed)
    assert all(t.reward == 1.0 for t in trajectories if t.task_id != "fail")


def test_the_pipeline_generates_the_first_turn_during_setup():
    for mode, overlapped in (("pipeline", True), ("async_batch", False)):
        SETUP_DONE.clear()
        policy = CountingPolicy()
        asyncio.run(rollout("x", policy, 3, make_env=SlowSetupEnv,
                            pipeline=PipelineConfig(mode=mode, concurrency=3)))
        for task_id, started in policy.first_turn_at.items():
            assert (started < SETUP_DONE[task_id]) is overlapped, (mode, task_id)
