"""The pipeline's scheduler: generation order, admission from measured times, costs."""

import asyncio
import time

import pytest

from agentgym.cli import EpisodeProgress
from agentgym.core import AgentEnv, Reward, RewardResult, Submitted, Task, TaskList, tool
from agentgym.core.policies import TextPolicy
from agentgym.rollout.evaluate import evaluate, rollout
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.rollout.scheduler import Admission, GenerationGate, PipelineStats, StageCounts


async def _grant_order(gate: GenerationGate, turns: list[int], drain: bool = False):
    """Queue one waiter per entry of ``turns`` behind a held slot; the order they get it."""
    order = []
    holder = gate.slot(0)
    await holder.__aenter__()

    async def wait(turns_played):
        async with gate.slot(turns_played):
            order.append(turns_played)

    waiters = [asyncio.ensure_future(wait(t)) for t in turns]
    await asyncio.sleep(0)
    if drain:
        gate.drain()
    await holder.__aexit__(None, None, None)
    await asyncio.gather(*waiters)
    return order


def test_a_first_turn_goes_first_then_the_episode_closest_to_done():
    order = asyncio.run(_grant_order(GenerationGate(1), [2, 5, 0, 3, 5]))
    assert order == [0, 5, 5, 3, 2]


def test_once_all_are_admitted_the_episode_farthest_from_done_goes_first():
    order = asyncio.run(_grant_order(GenerationGate(1), [2, 5, 0, 3], drain=True))
    assert order == [0, 2, 3, 5]


def test_a_cancelled_waiter_does_not_keep_a_slot():
    async def main():
        gate = GenerationGate(2)
        held = [gate.slot(1), gate.slot(1)]
        for slot in held:
            await slot.__aenter__()

        async def wait():
            async with gate.slot(3):
                await asyncio.sleep(1)

        waiter = asyncio.ensure_future(wait())
        await asyncio.sleep(0)
        waiter.cancel()
        for slot in held:
            await slot.__aexit__(None, None, None)
        await asyncio.gather(waiter, return_exceptions=True)
        return gate.free

    assert asyncio.run(main()) == 2


def test_admission_follows_littles_law_on_measured_times():
    admission = Admission(concurrency=4)
    assert admission.budget(now=0.0) == 4  # nothing measured: fill the slots
    for _ in range(4):
        admission.generated(1.0)  # g = 1 s
        admission.stepped(1.0, turns_so_far=2)  # t = 1 s
    # 4 (g + t) / g = 8 running keep 4 slots busy; setups take no time yet.
    assert admission.budget(now=0.0) == 8
    # A 10 s setup: episodes of 4 turns finish at 4 / (4 * 1) = 1 per second, and
    # 10 - g - t = 8 s of each setup must run ahead: 8 more.
    admission.finished(turns=4)
    admission.setup_started(key=1, now=0.0)
    admission.setup_done(key=1, seconds=10.0)
    assert admission.budget(now=0.0) == 16


def test_admission_begins_setups_as_running_episodes_near_their_end():
    admission = Admission(concurrency=2)
    for _ in range(3):
        admission.generated(1.0)
        admission.stepped(0.0, turns_so_far=2)
    admission.finished(turns=10)
    admission.setup_started(key=1, now=0.0)
    admission.setup_done(key=1, seconds=4.0)  # 3 s to begin ahead of a first turn
    # Target: 2 running. Episodes with 9 turns left stay; ones in their last turns go.
    assert admission.to_admit(0.0, starting=0, played=[1, 1]) == 0
    assert admission.to_admit(0.0, starting=0, played=[1, 8]) == 1
    assert admission.to_admit(0.0, starting=1, played=[8, 9]) == 1


def test_the_endgame_admits_the_rest_when_their_work_fits_in_one_episode():
    admission = Admission(concurrency=4)
    admission.generated(1.0)
    admission.stepped(0.0, turns_so_far=2)
    admission.finished(turns=4)  # an episode: 4 s; its work: 4 slot-seconds
    assert admission.endgame(0.0, queued=2, played=[3, 3])  # (8 + 2) / 4 <= 4
    assert not admission.endgame(0.0, queued=8, played=[3, 3])  # (32 + 2) / 4 > 4


def test_episodes_that_end_before_anything_was_generated_leave_admission_working():
    """Episodes that failed at reset, or whose policy had nothing to play (validate's
    oracle on a task without a solution), finish with 0 turns and no generation measured:
    admission falls back to filling the slots (it divided by zero here)."""
    admission = Admission(concurrency=4)
    admission.finished(0)
    admission.finished(0)
    assert admission.to_admit(now=1.0, starting=0, played=[]) == 4
    assert not admission.endgame(now=1.0, queued=10, played=[])
    admission.generated(0.5)  # then a generation: measured, with at least a turn each
    assert admission.to_admit(now=2.0, starting=0, played=[0]) >= 1
    assert admission.budget(now=2.0) >= 4
    assert isinstance(admission.endgame(now=2.0, queued=3, played=[1]), bool)


def test_stats_count_sandbox_and_idle_seconds():
    stats = PipelineStats()
    stats.open(1, 0.0)
    stats.open(2, 1.0)
    stats.release(1, 4.0, idle_s=1.0)
    assert stats.peak_live == 2 and stats.sandbox_s == 4.0
    assert list(stats.opened) == [2]
    assert stats.idle_share == 0.25
    assert stats.as_dict() == {"peak_live": 2, "sandbox_s": 4.0, "idle_sandbox_s": 1.0}


class Done(Reward):
    def score(self, episode):
        return RewardResult(float(episode.submitted))


class TimedEnv(AgentEnv):
    """``setup_s`` to start, three turns, then submit; tools take no time."""

    reward = Done()

    def __init__(self, setup_s: float):
        super().__init__(TaskList([Task(f"t{i}", "Go.") for i in range(40)]), max_turns=8)
        self.setup_s = setup_s

    async def setup_episode(self, task):
        await asyncio.sleep(self.setup_s)

    @tool
    def work(self) -> str:
        """Work."""
        return "ok"

    @tool
    def submit(self) -> str:
        """Finish."""
        raise Submitted(True)


class ThreeTurns(TextPolicy):
    """A text policy: 20 ms per turn, two work calls, then submit."""

    async def act(self, messages, task):
        await asyncio.sleep(0.02)
        done = sum(m["role"] == "tool" for m in messages) >= 2
        name = "submit" if done else "work"
        return f'<tool_call>{{"name": "{name}", "arguments": {{}}}}</tool_call>'


def _play(setup_s: float, concurrency: int = 4, n: int = 40):
    seen: list[StageCounts] = []
    start = time.perf_counter()
    trajectories = asyncio.run(rollout(
        None, ThreeTurns(), n, make_env=lambda: TimedEnv(setup_s),
        pipeline=PipelineConfig(concurrency=concurrency),
        on_stage=lambda counts: seen[:] or seen.append(counts)))
    stats = seen[0].stats
    stats.mean_live = stats.sandbox_s / (time.perf_counter() - start)
    return trajectories, stats


def test_live_sandboxes_follow_the_setup_time():
    """Instant setups need about C live sandboxes (C = 4 here); slow ones need more
    started ahead, up to the 2C default bound."""
    fast, fast_stats = _play(setup_s=0.0)
    slow, slow_stats = _play(setup_s=0.6)
    assert all(t.reward == 1.0 for t in fast + slow)
    assert fast_stats.mean_live < 5.5 and fast_stats.peak_live <= 8
    assert slow_stats.mean_live > 6.5 and slow_stats.peak_live == 8  # never more than 2C


def test_each_trajectory_and_the_run_record_sandbox_and_idle_time():
    trajectories, stats = _play(setup_s=0.05, n=12)
    for t in trajectories:
        assert t.timings["sandbox"] >= t.timings["init"] + t.timings["generate"]
        assert t.timings["queue"] >= 0 and 0 <= t.idle_sandbox_s <= t.timings["sandbox"]
    assert stats.sandbox_s == pytest.approx(sum(t.timings["sandbox"] for t in trajectories))
    assert stats.idle_sandbox_s == pytest.approx(sum(t.idle_sandbox_s for t in trajectories))
    report = asyncio.run(evaluate(None, ThreeTurns(), 4, make_env=lambda: TimedEnv(0.0)))
    summary = report.summary()
    assert summary["sandbox_s"] > 0 and 0 <= summary["idle_sandbox_s"] <= summary["sandbox_s"]
    assert "queue" in summary["stage_time_s"]


def test_the_progress_line_shows_live_sandboxes_and_the_idle_share():
    counts = StageCounts(init=1, run=3, live=5)
    counts.stats = PipelineStats(sandbox_s=10.0, idle_sandbox_s=1.5)
    progress = EpisodeProgress("eval", 8, quiet=True)
    progress.stages(counts)
    assert progress.progress.tasks[0].fields["stages"] == "init 1 run 3 | live 5 idle 15%"
