"""The text-level evaluation loop: an env, a text-level policy, per-episode rewards.

:func:`run_episode` plays one episode; :func:`evaluate` plays ``n`` episodes over the
env's tasks in order (cycling when there are fewer tasks than episodes) and summarises
them in an :class:`EvalReport`. An episode that raises (a crashing policy, an env bug) is
recorded with ``finish_reason="error"`` and reward 0; the others go on.
"""

from __future__ import annotations

import inspect
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from agentgym.core.env import AgentEnv
from agentgym.core.policies import TextPolicy


@dataclass
class EpisodeResult:
    """The outcome of one episode."""

    task_id: str
    index: int
    reward: float
    turns: int
    finish_reason: str
    tool_errors: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EvalReport:
    """Episodes of one policy on one env, and their summary."""

    env: str
    policy: str
    results: list[EpisodeResult]

    @property
    def n(self) -> int:
        return len(self.results)

    @property
    def mean_reward(self) -> float:
        return sum(r.reward for r in self.results) / max(self.n, 1)

    @property
    def pass_rate(self) -> float:
        """Share of episodes with reward 1.0."""
        return sum(r.reward >= 1.0 for r in self.results) / max(self.n, 1)

    @property
    def mean_turns(self) -> float:
        return sum(r.turns for r in self.results) / max(self.n, 1)

    def summary(self) -> dict[str, Any]:
        """The JSON summary ``agentgym eval --json`` prints."""
        return {
            "env": self.env,
            "policy": self.policy,
            "n": self.n,
            "mean_reward": self.mean_reward,
            "pass_rate": self.pass_rate,
            "mean_turns": self.mean_turns,
            "finish_reasons": dict(Counter(r.finish_reason for r in self.results)),
            "errors": sum(r.error is not None for r in self.results),
        }

    def records(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.results]


async def run_episode(
    env: AgentEnv, policy: TextPolicy, task_id: str, index: int = 0, seed: int | None = None
) -> EpisodeResult:
    """Play one episode of ``task_id`` to its end; errors end the episode, not the caller."""
    turns, reward = 0, 0.0
    try:
        messages, _ = await env.areset(seed=seed, options={"task_id": task_id})
        history = list(messages)
        while True:
            assert env.task is not None
            action = policy.act(list(history), env.task)
            if inspect.isawaitable(action):
                action = await action
            _, reward, terminated, truncated, info = await env.astep(action)
            turns += 1
            assert env.episode is not None
            history = list(env.episode.messages)
            if terminated or truncated:
                episode = env.episode
                return EpisodeResult(
                    task_id,
                    index,
                    reward,
                    turns,
                    info["finish_reason"],
                    episode.tool_errors,
                    episode.metrics,
                    messages=episode.messages,
                )
    except Exception as e:
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return EpisodeResult(
            task_id,
            index,
            0.0,
            turns,
            "error",
            error=detail,
            messages=list(env.episode.messages) if env.episode else [],
        )


async def evaluate(
    env: AgentEnv,
    policy: TextPolicy,
    n: int,
    *,
    env_id: str = "",
    policy_name: str = "",
    seed: int = 0,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> EvalReport:
    """Play ``n`` episodes over ``env.tasks`` in order, cycling; one env, one at a time."""
    if n < 1:
        raise ValueError(f"the number of episodes must be >= 1, got {n}")
    ids = env.tasks.ids()
    results = []
    for index in range(n):
        result = await run_episode(env, policy, ids[index % len(ids)], index, seed + index)
        results.append(result)
        if on_episode:
            on_episode(result)
    return EvalReport(env_id or type(env).__name__, policy_name or type(policy).__name__, results)
