"""The schedules keep their promises: generation concurrency, live sandboxes, overlap."""

import asyncio
import time

import pytest

from agentgym.core import AgentEnv, Reward, RewardResult, Submitted, Task, TaskList, tool
from agentgym.core.policies import Sampling, TextPolicy
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import MODES, PipelineConfig, RolloutPipeline

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


class CountingPolicy(TextPolicy):
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


def test_overlap_setup_is_a_setting_of_every_mode():
    for mode, setting, overlapped in (("pipeline", "off", False), ("async_batch", "on", True),
                                      ("sync", "on", True), ("pipeline", "auto", True)):
        SETUP_DONE.clear()
        policy = CountingPolicy()
        asyncio.run(rollout("x", policy, 3, make_env=SlowSetupEnv, pipeline=PipelineConfig(
            mode=mode, concurrency=3, overlap_setup=setting)))
        assert {(started < SETUP_DONE[task_id]) for task_id, started in
                policy.first_turn_at.items()} == {overlapped}, (mode, setting)


@pytest.mark.parametrize(("mode", "setting", "overlapped"), [
    ("sync", "auto", False), ("pipeline", "auto", True), ("pipeline", "off", False),
    ("async_batch", "on", True)])
def test_prepared_episodes_follow_the_same_overlap_rule(mode, setting, overlapped):
    """An episode prepared ahead of a run is built as a run's own would be (one rule)."""
    SETUP_DONE.clear()
    policy = CountingPolicy()
    jobs = [(f"t{i}", i) for i in range(3)]

    async def main():
        pipeline = RolloutPipeline(SlowSetupEnv, policy, config=PipelineConfig(
            mode=mode, concurrency=3, overlap_setup=setting))
        try:
            pipeline.prepare(jobs)
            await pipeline.run(jobs)
            return pipeline.prepared_hits
        finally:
            await pipeline.close()

    assert asyncio.run(main()) == 3
    assert {(started < SETUP_DONE[task_id]) for task_id, started in
            policy.first_turn_at.items()} == {overlapped}


def test_prepared_episodes_stay_within_the_live_sandbox_bound():
    """Preparing a whole GRPO batch ahead starts at most ``live_cap`` sandboxes, the jobs a
    run admits first; the run plays every job."""
    SETUP_DONE.clear()
    jobs = [(f"t{i}", i) for i in range(12)]

    async def main():
        pipeline = RolloutPipeline(SlowSetupEnv, CountingPolicy(), config=PipelineConfig(
            mode="pipeline", concurrency=2, max_live_sandboxes=3))
        try:
            pipeline.prepare(jobs)
            pipeline.prepare(jobs)  # again: nothing more
            prepared = list(pipeline._prepared)
            played = await pipeline.run(jobs)
            return prepared, pipeline.prepared_hits, len(played), len(pipeline._made)
        finally:
            await pipeline.close()

    prepared, hits, played, made = asyncio.run(main())
    assert prepared == jobs[:3] and hits == 3 and played == 12
    assert made <= 3  # envs built: never more than the bound


def test_the_pipeline_builds_its_runners_whole():
    """Every setting reaches an EpisodeRunner through its constructor: the pipeline assigns
    no attribute of a runner after building it."""
    import ast
    import inspect

    from agentgym.rollout import pipeline

    tree = ast.parse(inspect.getsource(pipeline))
    assigned = [ast.unparse(target) for node in ast.walk(tree)
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                for sub in ast.walk(target)
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                and sub.value.id == "runner"]
    assert assigned == []


class SlowGrade(Reward):
    """Grading takes 0.1 s and counts how many grade at once."""

    def __init__(self):
        self.now = self.peak = 0

    async def score(self, episode):
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.1)
        self.now -= 1
        return RewardResult(float(episode.submitted))


@pytest.mark.parametrize("mode", ["async_batch", "pipeline"])
def test_grading_and_live_sandboxes_have_bounds_of_their_own(mode):
    grade = SlowGrade()
    LIVE.update(now=0, max=0)

    def make():
        env = SlowSetupEnv()
        env.reward = grade
        return env

    config = PipelineConfig(mode=mode, concurrency=4, grade_concurrency=2,
                            max_live_sandboxes=5)
    trajectories = asyncio.run(rollout("x", CountingPolicy(), 12, make_env=make,
                                       pipeline=config))
    assert len(trajectories) == 12 and grade.peak == 2
    assert LIVE["max"] <= (5 if mode == "pipeline" else 4) and LIVE["now"] == 0


def test_raise_on_error_raises_after_every_episode_is_delivered():
    from agentgym.rollout.pipeline import RolloutError

    delivered = []
    config = PipelineConfig(concurrency=2, raise_on_error=True)
    with pytest.raises(RolloutError, match=r"1 of 7 episodes failed; the first, fail"
                                           r" \(episode 6\): RuntimeError: the sandbox image"):
        asyncio.run(rollout("x", CountingPolicy(), 7, make_env=SlowSetupEnv,
                            pipeline=config, on_done=delivered.append))
    assert len(delivered) == 7


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match=r"PipelineConfig\.overlap_setup must be one of auto,"
                                         " on, off; got 'yes'"):
        PipelineConfig(overlap_setup="yes")
    with pytest.raises(ValueError, match="grade_concurrency must be >= 1, got 0"):
        PipelineConfig(grade_concurrency=0)
    with pytest.raises(ValueError, match="mode must be one of sync, async_batch, pipeline;"
                                         " got 'pipe'; did you mean 'pipeline'"):
        PipelineConfig(mode="pipe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Sampling.top_p must be <= 1, got 1.5"):
        Sampling(top_p=1.5)
    with pytest.raises(ValueError, match=r"RolloutConfig.max_wall_s must be > 0, got 0"):
        RolloutConfig(max_wall_s=0)


class Faulty(SlowSetupEnv):
    """SlowSetupEnv, where 'hang' tasks never finish their setup and 'crash' tasks' grader
    raises; counts setups still running."""

    running = 0

    def __init__(self):
        AgentEnv.__init__(self, TaskList([Task("t0", "Task 0."), Task("hang", "Hangs."),
                                          Task("crash", "Crashes."), Task("t1", "Task 1.")]),
                          max_turns=3)

    async def setup_episode(self, task):
        Faulty.running += 1
        try:
            await super().setup_episode(task)
            if task.id == "hang":
                await asyncio.sleep(3600)
        finally:
            Faulty.running -= 1

    async def grade(self, episode):
        if episode.task.id == "crash":
            raise RuntimeError("the grader's test runner died")
        return await super().grade(episode)


@pytest.mark.parametrize("mode", MODES)
def test_a_hanging_setup_and_a_crashing_grader_end_only_their_episode(mode):
    LIVE.update(now=0, max=0)

    async def play():
        trajectories = await rollout(None, CountingPolicy(), 8, make_env=Faulty,
                                     pipeline=PipelineConfig(mode=mode, concurrency=2,
                                                             setup_timeout_s=0.5))
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return trajectories, left

    started = time.perf_counter()
    trajectories, left = asyncio.run(play())
    assert time.perf_counter() - started < 30
    by_task: dict[str, list] = {}
    for t in trajectories:
        by_task.setdefault(t.task_id, []).append(t)
    assert all(t.reward == 1.0 and not t.error for t in by_task["t0"] + by_task["t1"])
    for t in by_task["hang"]:
        assert t.finish_reason == "error" and "SetupTimeoutError" in t.error
        assert "within 0.5 s (setup_timeout_s)" in t.error
    for t in by_task["crash"]:
        assert t.finish_reason == "error" and "test runner died" in t.error
    assert not left and Faulty.running == 0 and LIVE["now"] == 0  # nothing left running
