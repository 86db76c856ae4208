import asyncio

import agentgym
from agentgym.core import OraclePolicy, evaluate
from agentgym.testing import ScriptedPolicy


def test_oracle_scores_one_and_noop_zero():
    env = agentgym.make("calculator")
    oracle = env.run_coroutine(evaluate(env, OraclePolicy(), 12))
    assert oracle.mean_reward == 1.0 and oracle.pass_rate == 1.0 and oracle.mean_turns == 2
    noop = env.run_coroutine(evaluate(env, agentgym.core.NoopPolicy(), 3))
    assert noop.summary()["finish_reasons"] == {"max_turns": 3}
    assert noop.mean_reward == 0.0
    env.close()


def test_episodes_cycle_over_tasks_in_order():
    env = agentgym.make("calculator", num_tasks=3)
    report = env.run_coroutine(evaluate(env, OraclePolicy(), 7))
    assert [r.task_id for r in report.results] == [f"calculator-train-{i % 3}" for i in range(7)]
    env.close()


def test_a_crashing_policy_ends_its_episode_not_the_run():
    calls = {"n": 0}

    def flaky(messages, task):
        calls["n"] += 1
        if task.id == "calculator-train-1":
            raise RuntimeError("model server went away")
        return OraclePolicy().act(messages, task)

    env = agentgym.make("calculator", num_tasks=3)
    report = env.run_coroutine(evaluate(env, ScriptedPolicy(flaky), 3))
    assert [r.finish_reason for r in report.results] == ["submitted", "error", "submitted"]
    assert "model server went away" in report.results[1].error
    assert report.summary()["errors"] == 1
    env.close()


def test_async_policies_are_awaited():
    class AsyncOracle:
        async def act(self, messages, task):
            await asyncio.sleep(0)
            return OraclePolicy().act(messages, task)

    env = agentgym.make("calculator")
    assert env.run_coroutine(evaluate(env, AsyncOracle(), 2)).mean_reward == 1.0
    env.close()
