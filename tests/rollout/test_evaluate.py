"""Evaluation through the rollout pipeline with text-level policies."""

import asyncio
import json
import re

import pytest

from agentgym.core import NoopPolicy, OraclePolicy
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import TextPolicy
from agentgym.rollout.evaluate import evaluate, pass_at_k, plan_jobs, rollout
from agentgym.rollout.pipeline import MODES, PipelineConfig
from agentgym.testing import ScriptedPolicy


@pytest.mark.parametrize("mode", MODES)
def test_oracle_scores_one_and_noop_zero_in_every_mode(mode):
    pipeline = PipelineConfig(mode=mode, concurrency=3)
    oracle = asyncio.run(evaluate("calculator", OraclePolicy(), 12, pipeline=pipeline))
    assert oracle.mean_reward == 1.0 and oracle.pass_rate == 1.0
    assert oracle.summary()["mean_turns"] == 2.0
    assert oracle.summary()["finish_reasons"] == {"submitted": 12}
    noop = asyncio.run(evaluate("calculator", NoopPolicy(), 3, pipeline=pipeline))
    assert noop.summary()["finish_reasons"] == {"max_turns": 3}
    assert noop.mean_reward == 0.0


def test_episodes_cycle_over_tasks_in_order_with_k_attempts():
    assert plan_jobs(["a", "b"], 3, k=2) == [("a", 0), ("a", 1), ("b", 2), ("b", 3),
                                             ("a", 4), ("a", 5)]
    assert plan_jobs(["a", "b", "c"], 3, first=2) == [("c", 0), ("a", 1), ("b", 2)]
    with pytest.raises(InvalidArgumentError, match="first=-1"):
        plan_jobs(["a"], 1, first=-1)
    report = asyncio.run(evaluate("calculator", OraclePolicy(), 4, k=2,
                                  env_kwargs={"num_tasks": 3}))
    assert [t.task_id for t in report.trajectories] == [
        f"calculator-train-{i % 3}" for i in range(4) for _ in range(2)]
    assert report.summary()["pass@2"] == 1.0


def test_cycling_back_before_the_first_task_warns_and_from_task_0_does_not(caplog):
    # From task 0 cycling is how an eval of more episodes than tasks works: no warning.
    asyncio.run(rollout("calculator", OraclePolicy(), 5, env_kwargs={"num_tasks": 3}))
    assert "run past" not in caplog.text
    # From a later task, the caller meant to skip the earlier ones: say they come back.
    trajectories = asyncio.run(rollout("calculator", OraclePolicy(), 5, first_task=2,
                                       env_kwargs={"num_tasks": 3}))
    assert re.search(r"5 tasks from task 2 run past the 3 tasks of 'calculator': tasks 0-1,"
                     r" before 2, are played too.*Fix: fewer", caplog.text)
    assert [t.task_id for t in sorted(trajectories, key=lambda t: t.episode)] == [
        f"calculator-train-{i % 3}" for i in range(2, 7)]


def test_pass_at_k_estimator():
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(2, 1, 1) == pytest.approx(0.5)


def test_a_crashing_policy_ends_its_episode_not_the_run():
    def flaky(messages, task):
        if task.id == "calculator-train-1":
            raise RuntimeError("model server went away")
        return OraclePolicy().act(messages, task)

    report = asyncio.run(evaluate("calculator", ScriptedPolicy(flaky), 3,
                                  env_kwargs={"num_tasks": 3}))
    assert [t.finish_reason for t in report.trajectories] == ["submitted", "error", "submitted"]
    assert "model server went away" in report.trajectories[1].error
    assert report.summary()["errors"] == 1


def test_async_policies_are_awaited():
    class AsyncOracle(TextPolicy):
        async def act(self, messages, task):
            await asyncio.sleep(0)
            return OraclePolicy().act(messages, task)

    assert asyncio.run(evaluate("calculator", AsyncOracle(), 2)).mean_reward == 1.0


def test_trajectories_keep_the_conversation_and_timings():
    seen = []
    asyncio.run(rollout("calculator", OraclePolicy(), 2, on_done=seen.append))
    trajectory = seen[0]
    assert [m["role"] for m in trajectory.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool"]
    call = trajectory.messages[2]["tool_calls"][0]["function"]
    assert isinstance(call["arguments"], str) and json.loads(call["arguments"])
    assert set(trajectory.timings) == {"init", "generate", "tool", "grade", "queue", "sandbox"}
    assert trajectory.prompt_ids == [] and trajectory.loss_mask == []


def test_reward_metrics_are_averaged_in_the_summary_and_counts_kept_apart():
    from agentgym.rollout.evaluate import count_metrics, mean_metrics

    rows = [{"by_type": {"a": 1.0, "b": 0.0}, "answered": 2, "reason": "x", "scores": [1],
             "score": 1},
            {"by_type": {"a": 0.0}, "answered": 4, "ok": True, "score": 0.5}]
    assert mean_metrics(rows) == {"by_type": {"a": 0.5, "b": 0.0}, "ok": 1.0,
                                  "score": 0.75}
    assert count_metrics(rows) == {"answered": {"total": 6, "per_episode": 3.0}}
    assert mean_metrics([]) == {} and count_metrics([]) == {}


def test_a_count_in_the_eval_summary_is_not_a_score():
    from agentgym.rollout.evaluate import EvalReport
    from agentgym.rollout.trajectory import Trajectory

    # Two failed episodes of a site task with three checks each (web-shop's metrics).
    runs = [Trajectory(env="web-shop", task_id=f"t{i}", episode=i, reward=0.0,
                       metrics={"checks": 3, "failed": ["price"], "reason": "price"})
            for i in range(2)]
    summary = EvalReport("web-shop", "noop", runs).summary()
    assert summary["mean_reward"] == 0.0 and "reward_metrics" not in summary
    assert summary["reward_counts"] == {"checks": {"total": 6, "per_episode": 3.0}}
