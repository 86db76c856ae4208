"""Evaluation and collection: run a policy on an env through the rollout pipeline.

:func:`rollout` plays episodes and streams their trajectories to a callback (a
:class:`~agentgym.rollout.trajectory.TrajectoryWriter` for ``agentgym rollout``);
:func:`evaluate` does the same and summarises them in an :class:`EvalReport` (mean reward,
pass@1, pass@k, mean turns, finish reasons, per-stage time). Both take any policy, text-level
(oracle, noop, scripted) or token-level (hf, openai, vllm).

Episodes are ``-n`` tasks taken from the env's tasks in order (cycling when there are fewer),
each attempted ``k`` times.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from math import comb
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import OraclePolicy, policy_level
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig, RolloutPipeline
from agentgym.rollout.trajectory import Trajectory

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from agentgym.core.harness import Harness

#: Where an episode's time goes (``Trajectory.timings``): its stages, then ``queue``, the
#: wait for a generation or grading slot.
STAGES = ("init", "generate", "tool", "grade", "queue")


def plan_jobs(task_ids: list[str], n: int, k: int = 1,
              first: int = 0) -> list[tuple[str, int]]:
    """``n`` tasks in order from the ``first``-th (cycling), ``k`` attempts each:
    ``(task_id, episode)`` pairs, episodes numbered from 0."""
    if n < 1 or k < 1:
        raise InvalidArgumentError(f"need n >= 1 and k >= 1 episodes, got n={n}, k={k}")
    if first < 0:
        raise InvalidArgumentError(f"first={first} must be >= 0 (the index of a task)")
    if not task_ids:
        raise InvalidArgumentError("the env has no tasks")
    return [(task_ids[(first + i) % len(task_ids)], i * k + a)
            for i in range(n) for a in range(k)]


def pass_at_k(attempts: int, successes: int, k: int) -> float:
    """The unbiased pass@k estimate from ``attempts`` tries with ``successes`` passes."""
    if attempts - successes < k:
        return 1.0
    return 1.0 - comb(attempts - successes, k) / comb(attempts, k)


@dataclass
class EvalReport:
    """Trajectories of one policy on one env, and their summary."""

    env: str
    policy: str
    trajectories: list[Trajectory]
    k: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.trajectories)

    def _mean(self, values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    @property
    def mean_reward(self) -> float:
        return self._mean([t.reward for t in self.trajectories])

    @property
    def pass_rate(self) -> float:
        """Share of episodes with reward 1.0 (pass@1)."""
        return self._mean([float(t.reward >= 1.0) for t in self.trajectories])

    def pass_at(self, k: int) -> float:
        """pass@k averaged over tasks with at least ``k`` attempts."""
        per_task: dict[str, list[bool]] = {}
        for t in self.trajectories:
            per_task.setdefault(t.task_id, []).append(t.reward >= 1.0)
        scores = [pass_at_k(len(v), sum(v), k) for v in per_task.values() if len(v) >= k]
        return self._mean(scores)

    def summary(self) -> dict[str, Any]:
        """The JSON object ``agentgym eval --json`` prints."""
        data: dict[str, Any] = {
            "env": self.env,
            "policy": self.policy,
            "n": self.n,
            "mean_reward": self.mean_reward,
            "pass_rate": self.pass_rate,
            "pass@1": self.pass_rate,
        }
        if self.k > 1:
            data[f"pass@{self.k}"] = self.pass_at(self.k)
        data.update(
            mean_turns=self._mean([t.turns for t in self.trajectories]),
            finish_reasons=dict(Counter(t.finish_reason for t in self.trajectories)),
            errors=sum(t.error is not None for t in self.trajectories),
            stage_time_s={s: self._mean([t.timings.get(s, 0.0) for t in self.trajectories])
                          for s in STAGES},
            sandbox_s=sum(t.timings.get("sandbox", 0.0) for t in self.trajectories),
            idle_sandbox_s=sum(t.idle_sandbox_s for t in self.trajectories),
        )
        graded = [t.metrics for t in self.trajectories if t.error is None]
        metrics, counts = mean_metrics(graded), count_metrics(graded)
        if metrics:
            data["reward_metrics"] = metrics
        if counts:
            data["reward_counts"] = counts
        data.update(self.extra)
        return data


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def mean_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each score-like reward metric over the episodes that report it: numbers
    that are not always whole (counts are :func:`count_metrics`'), booleans (a share), and
    each number inside a metric that is a dict of numbers (per-type scores, such as the
    memory envs' ``by_type``); other metrics (text, lists) are left out."""
    numbers: dict[str, list[float]] = {}
    groups: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, int | float):
                numbers.setdefault(key, []).append(float(value))
            elif isinstance(value, dict) and value and all(
                    isinstance(v, int | float) for v in value.values()):
                for name, number in value.items():
                    groups.setdefault(key, {}).setdefault(name, []).append(float(number))
    counts = count_metrics(rows)
    means: dict[str, Any] = {key: sum(v) / len(v) for key, v in numbers.items()
                             if key not in counts}
    for key, group in groups.items():
        if key not in means and key not in counts:  # a number in some rows stays a number
            means[key] = {name: sum(v) / len(v) for name, v in group.items()}
    return dict(sorted(means.items()))


def count_metrics(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The reward metrics that are counts (whole numbers, not booleans, in every episode
    that reports them: checks run, tests passed, questions answered): their ``total`` and
    their mean ``per_episode`` (over the episodes that report them). Averaging a count
    with the scores would read as a score: ``checks 1.000`` beside ``mean_reward 0.000``."""
    values: dict[str, list[Any]] = {}
    for row in rows:
        for key, value in row.items():
            if isinstance(value, int | float):
                values.setdefault(key, []).append(value)
    return {key: {"total": sum(v), "per_episode": sum(v) / len(v)}
            for key, v in sorted(values.items()) if all(map(_is_count, v))}


async def rollout(env_id: str | None, policy: Any, n: int, *, k: int = 1,
                  env_kwargs: dict[str, Any] | None = None, policy_name: str = "",
                  pipeline: PipelineConfig | None = None, config: RolloutConfig | None = None,
                  skip: set[tuple[str, int]] | None = None,
                  make_env: Callable[[], Any] | None = None,
                  on_done: Callable[[Trajectory], None] | None = None,
                  on_stage: Callable[[Counter], None] | None = None,
                  harness: str | Harness | None = None,
                  first_task: int = 0) -> list[Trajectory]:
    """Play ``n`` tasks x ``k`` attempts of ``policy`` on ``env_id`` (or on the envs
    ``make_env`` builds: then ``env_id`` may be None, and labels the trajectories when
    given), the env's tasks in order from its ``first_task``-th; ``skip`` lists
    ``(task_id, episode)`` pairs already done (resume). Attempt ``a`` of the ``i``-th task
    is episode ``i * k + a``; the env and the policy learn ``attempt`` and ``group``
    (:class:`RolloutPipeline`). ``harness`` (an id of ``agentgym list harnesses``): each
    episode is played by that agent program in the task's sandbox, with ``policy``
    (token-level) behind it, sampling as ``config`` says
    (:mod:`agentgym.rollout.harness`)."""
    import agentgym

    if env_id is None and make_env is None:
        raise InvalidArgumentError("rollout() needs env_id or make_env: the env to play")
    kwargs = dict(env_kwargs or {})
    make = make_env or (lambda: agentgym.make(env_id, **kwargs))
    runner = None
    if harness is not None:
        from agentgym.rollout.harness import HarnessRunner

        if policy_level(policy) != "token":
            raise InvalidArgumentError(
                f"the harness {getattr(harness, 'id', harness)!r} calls a model server, so it"
                f" needs a token-level policy behind it (hf:PATH, vllm:MODEL, openai:URL);"
                f" {policy_name or type(policy).__name__!r} is text-level")
        runner = HarnessRunner(harness, policy, sampling=(config or RolloutConfig()).sampling)
    try:
        if runner is not None:
            await asyncio.to_thread(runner.start)  # installs the program the first time
        pipeline_runner = RolloutPipeline(
            make, policy, config=pipeline, rollout=config, env_id=env_id or "",
            policy_name=policy_name or (f"harness:{runner.harness.id}" if runner else ""),
            on_done=on_done, on_stage=on_stage,
            attempt_of=lambda job: (job[1] // k, job[1] % k), harness=runner)
        return await _run_jobs(pipeline_runner, env_id, n, k, skip,
                               oracle=runner is None and isinstance(policy, OraclePolicy),
                               first=first_task)
    finally:
        if runner is not None:
            runner.close()


async def _run_jobs(runner: RolloutPipeline, env_id: str | None, n: int, k: int,
                    skip: set[tuple[str, int]] | None, oracle: bool,
                    first: int = 0) -> list[Trajectory]:
    """Plan the jobs (``n`` tasks x ``k``, from the ``first``-th task), check the oracle
    has solutions, run them; the pipeline's envs are closed after."""
    try:
        task_ids = await runner.task_ids()
        if first and first + n > len(task_ids):
            _warn_wrap(env_id, len(task_ids), n, first)
        jobs = [job for job in plan_jobs(task_ids, n, k, first) if job not in (skip or set())]
        if oracle:  # before any sandbox or browser starts
            await _check_solutions(runner, env_id, list(dict.fromkeys(t for t, _ in jobs)))
        return await runner.run(jobs)
    finally:
        await runner.close()


def _warn_wrap(env_id: str | None, total: int, n: int, first: int) -> None:
    """Say that tasks from ``first`` on run past the env's ``total`` and cycle back to the
    tasks before ``first``: a caller starts past them to skip tasks already used (an rft
    stage starts after its run's demonstrations), so those come back silently otherwise."""
    again = min(first, first + n - total)
    logger.warning(
        "%d tasks from task %d run past the %d tasks of %r: tasks 0-%d, before %d, are played"
        " too (an rft stage starts after the tasks its run's demonstrations and earlier"
        " attempts came from, so the model may have been shown these solved). Fix: fewer"
        " tasks, or an env with more (its kwargs)", n, first, total, env_id or "the env",
        again - 1, first)


async def _check_solutions(runner: RolloutPipeline, env_id: str | None,
                           task_ids: list[str]) -> None:
    """Refuse to play the oracle on tasks without a reference solution: each of its
    episodes would set up its sandbox or browser only to fail."""
    tasks = await runner.tasks(task_ids)
    unsolved = [task.id for task in tasks or () if not task.solution]
    if unsolved:
        shown = ", ".join(unsolved[:3]) + (", ..." if len(unsolved) > 3 else "")
        raise InvalidArgumentError(
            f"the oracle policy replays each task's reference solution, but"
            f" {len(unsolved)} of the {len(task_ids)} tasks of {env_id or 'the env'!r} to play"
            f" have none ({shown}); choose another policy (noop, scripted:FILE.json,"
            " hf:PATH, openai:URL, vllm:MODEL: `agentgym list policies`), or tasks that"
            " carry a 'solution' (-e tasks=FILE)")


async def evaluate(env_id: str | None, policy: Any, n: int, *, k: int = 1,
                   **kwargs: Any) -> EvalReport:
    """:func:`rollout`, summarised. Keyword arguments are :func:`rollout`'s."""
    trajectories = await rollout(env_id, policy, n, k=k, **kwargs)
    trajectories.sort(key=lambda t: t.episode)
    label = env_id or (trajectories[0].env if trajectories else "")
    return EvalReport(label, kwargs.get("policy_name") or type(policy).__name__,
                      trajectories, k=k)
