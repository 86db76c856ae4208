"""Rewards: a score for a finished episode, plus metrics that explain it.

A :class:`Reward` reads the :class:`~agentgym.core.episode.Episode` (task, conversation,
submission, and in ``episode.resources`` the episode's sandbox or browser) and returns a
:class:`RewardResult`. ``score`` may be sync or async. Envs compose rewards with
:class:`WeightedSum`; plugins publish reusable ones through the ``agentgym_rewards`` hook.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError


@dataclass
class RewardResult:
    """A reward value and the metrics behind it (e.g. per-test results).

    Args:
        value: the reward (1.0 for a solved task, for the built-in graders).
        metrics: what explains it, JSON-serialisable: kept in the episode's trajectory
            and shown by ``agentgym view``.
    """

    value: float
    metrics: dict[str, Any] = field(default_factory=dict)


class Reward(ABC):
    """Scores a finished episode."""

    name: str = "reward"

    @abstractmethod
    def score(self, episode: Episode) -> RewardResult | Awaitable[RewardResult]:
        """Score ``episode``; may be a coroutine."""

    async def __call__(self, episode: Episode) -> RewardResult:
        result = self.score(episode)
        if inspect.isawaitable(result):
            result = await result
        return RewardResult(float(result.value), dict(result.metrics))


class WeightedSum(Reward):
    """``sum(weight * reward)``; each part's value and metrics appear under its name."""

    name = "weighted_sum"

    def __init__(self, parts: list[tuple[Reward, float]]):
        if not parts:
            raise InvalidArgumentError("WeightedSum needs at least one (reward, weight) pair")
        self.parts = parts

    async def score(self, episode: Episode) -> RewardResult:
        total, metrics = 0.0, {}
        for reward, weight in self.parts:
            result = await reward(episode)
            total += weight * result.value
            metrics[reward.name] = result.value
            metrics.update({f"{reward.name}/{k}": v for k, v in result.metrics.items()})
        return RewardResult(total, metrics)
