"""Asynchronous GRPO: episodes keep playing while the trainer steps.

Synchronous GRPO plays every episode of a batch with the current weights, then steps while
generation waits: the GPU idles on each batch's long tail and during every optimizer step.
In asynchronous mode (``grpo.options.async``, :class:`AsyncOptions`) a producer keeps the
rollout pipeline playing (:meth:`~agentgym.rollout.pipeline.RolloutPipeline.stream`) and
each rollout call takes the groups that are complete:

* **Requests.** Each call asks for the groups TRL's sampler sent (unless asked for ahead)
  and for the next ``max_staleness`` calls' groups, read ahead from the sampler; a group
  left out (stale under the drop rule, or flat under dynamic sampling) is replaced by a
  group of another task. So at most ``max_staleness + 1`` calls' groups are in flight.
* **Taking.** A call takes complete groups, the longest-waiting first, never waiting for
  a given one: long episodes do not hold the batch. Each sampled token records the
  weights' version that sampled it (:attr:`Trajectory.versions`; the engine takes new
  weights between decode steps, so a long episode's later turns are sampled by newer
  weights); a group's *staleness* is the trainer's step minus its oldest token's version.
* **Stale groups** (staleness over ``max_staleness``): dropped (``stale: drop``), or kept
  (``stale: correct``, the default), and every kept token is weighted by its truncated
  importance ratio ``min(pi_now / pi_sampled, is_cap)`` (TIS; the sampling log-probs
  against the trainer's before the update), folded into its advantage.

Tasks that are always solved or never solved teach nothing; with ``skip_settled`` a task
whose last groups all came out so is skipped when asked for, and counted.

Dropping biases training toward the tasks that finish fast; the producer counts each
task's groups asked for and trained on, and logs the worst ratio of the two shares, and
the mean turns of trained episodes over those of every episode played (:class:`TurnsTally`).
:class:`GroupProducer` is the producer; :class:`~agentgym.trainers.grpo.EnvRollout`
decides what to take.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgym.core.settings import check_settings
from agentgym.rollout.pipeline import Job, JobFeed, RolloutPipeline
from agentgym.rollout.trajectory import Trajectory

__all__ = ["AsyncOptions", "GroupProducer", "PlayedGroup", "TurnsTally", "fairness",
           "importance_weights"]


@dataclass
class AsyncOptions:
    """``grpo.options.async``: asynchronous GRPO (see :mod:`agentgym.trainers.async_grpo`).

    Args:
        max_staleness: calls' worth of groups played ahead, and the staleness (optimizer
            steps between the oldest token's weights and the trained ones) past which a
            group is stale.
        stale: ``correct`` (train stale groups, weighted by their importance ratios) or
            ``drop`` (leave them out, and play a group of another task instead).
        is_cap: the most an importance ratio may weigh a token (truncated importance
            sampling); ratios are computed for every sampled token, stale or not.
        skip_settled: a task whose last ``skip_settled`` groups were all solved, or all
            failed (every episode), is settled: it is not played again when asked for
            (another task's group instead), and counted (0: never skip).
    """

    max_staleness: int = field(default=2, metadata={"min": 0})
    stale: Literal["correct", "drop"] = "correct"
    is_cap: float = field(default=2.0, metadata={"gt": 0})
    skip_settled: int = field(default=0, metadata={"min": 0})

    def __post_init__(self) -> None:
        check_settings(self)


@dataclass
class PlayedGroup:
    """A complete group of episodes, and when it was asked for."""

    order: int  # the producer's request order: lower waited longer
    asked_at: int  # the trainer step it was asked for
    episodes: list[Trajectory]

    @property
    def task_id(self) -> str:
        return self.episodes[0].task_id

    def oldest_version(self) -> int | None:
        """The oldest weights' version among its sampled tokens (None: not recorded)."""
        versions = [v for t in self.episodes for v, own in zip(t.versions, t.loss_mask,
                                                              strict=False) if own]
        return min(versions) if versions else None

    def staleness(self, step: int) -> int:
        """Optimizer steps between its oldest sampled token's weights and ``step``'s (0
        when the policy recorded no versions: the synchronous case)."""
        oldest = self.oldest_version()
        return 0 if oldest is None else max(0, step - oldest)


class GroupProducer:
    """Plays the groups asked for, continuously, on ``pipeline`` (create, use and close it
    on the pipeline's event loop).

    Jobs are ``(task_id, episode)``; a group's episodes are ``group_size`` consecutive
    episode numbers.
    """

    def __init__(self, pipeline: RolloutPipeline, group_size: int):
        self.pipeline, self.group_size = pipeline, group_size
        self.feed = JobFeed()
        self.asked: Counter[str] = Counter()  # groups asked for, per task
        self.trained: Counter[str] = Counter()  # groups handed to training, per task
        self.played: list[Trajectory] = []  # every finished episode since the last take
        # Per group (keyed by its first episode): request order, step, episodes done.
        self._pending: dict[int, tuple[int, int, list[Trajectory]]] = {}
        self._group_of: dict[int, int] = {}  # episode -> its group's first episode
        self._ready: list[PlayedGroup] = []
        self._arrived = asyncio.Event()
        self._order = 0
        self._stream: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> int:
        """Groups asked for and not complete yet."""
        return len(self._pending)

    @property
    def ready(self) -> int:
        """Complete groups not taken yet."""
        return len(self._ready)

    def ask(self, tasks: Iterable[str], step: int, first_episode: int) -> int:
        """Play a group of each of ``tasks`` (asked for at trainer step ``step``), numbered
        from ``first_episode``; returns the next free episode number."""
        jobs: list[Job] = []
        episode = first_episode
        for task in tasks:
            self._pending[episode] = (self._order, step, [])
            self._order += 1
            self.asked[task] += 1
            for i in range(self.group_size):
                self._group_of[episode + i] = episode
                jobs.append((task, episode + i))
            episode += self.group_size
        if self._stream is None:
            self._stream = asyncio.ensure_future(self.pipeline.stream(self.feed, self._done))
            # A stream that ends (its scheduler failed) wakes next_group, which raises.
            self._stream.add_done_callback(lambda _: self._arrived.set())
        self.feed.put(jobs)
        return episode

    async def next_group(self) -> PlayedGroup:
        """The complete group asked for first among those complete (waits for one)."""
        while not self._ready:
            if self._stream is not None and self._stream.done():
                self._stream.result()  # the scheduler itself failed: raise its error
                raise RuntimeError("the producer's stream ended with groups still asked for")
            self._arrived.clear()
            await self._arrived.wait()
        return self._ready.pop(0)

    def mark_trained(self, group: PlayedGroup) -> None:
        self.trained[group.task_id] += 1

    def take_played(self) -> list[Trajectory]:
        """The episodes finished since the last call (all of them: dropped groups too)."""
        played, self.played = self.played, []
        return played

    async def close(self) -> None:
        """Stop playing: episodes in flight are cancelled."""
        self.feed.close()
        if self._stream is not None:
            self._stream.cancel()
            await asyncio.gather(self._stream, return_exceptions=True)

    def _done(self, trajectory: Trajectory) -> None:
        self.played.append(trajectory)
        key = self._group_of.pop(trajectory.episode, None)
        if key is None or key not in self._pending:
            return  # not one of its groups
        order, step, episodes = self._pending[key]
        episodes.append(trajectory)
        if len(episodes) == self.group_size:
            del self._pending[key]
            episodes.sort(key=lambda t: t.episode)
            group = PlayedGroup(order, step, episodes)
            index = next((i for i, g in enumerate(self._ready) if g.order > order),
                         len(self._ready))
            self._ready.insert(index, group)
            self._arrived.set()


#: Tasks asked for fewer times than this are left out of the per-task shares: on a large
#: task set a task asked for once, and still in flight, would read as never trained.
MIN_ASKED = 2


def fairness(asked: Counter[str], trained: Counter[str],
             min_asked: int = MIN_ASKED) -> dict[str, Any]:
    """How each task's share of trained groups compares with its share of the groups
    asked for, over the ``tasks`` asked for at least ``min_asked`` times: ``worst_ratio``
    (the smallest trained-share / asked-share, 1.0 when fair), ``best_ratio`` (the
    largest), and the tasks at each end (``under``, ``over``); the ratios are None while
    no task qualifies (or nothing was trained)."""
    tasks = [t for t, n in asked.items() if n >= min_asked]
    total_asked = sum(asked[t] for t in tasks)
    total_trained = sum(trained[t] for t in tasks)
    if not tasks or not total_trained:
        return {"worst_ratio": None, "best_ratio": None, "under": None, "over": None,
                "tasks": len(tasks)}
    ratio = {t: (trained[t] / total_trained) / (asked[t] / total_asked) for t in tasks}
    under, over = min(ratio, key=ratio.__getitem__), max(ratio, key=ratio.__getitem__)
    return {"worst_ratio": ratio[under], "best_ratio": ratio[over], "under": under,
            "over": over, "tasks": len(tasks)}


@dataclass
class TurnsTally:
    """Mean turns per episode of the groups trained on against those of every group
    played (left out ones included): below 1.0, training leans to the short episodes
    (what dropping stale groups does); it needs no task to be asked for twice."""

    trained: list[float] = field(default_factory=lambda: [0.0, 0.0])  # turns, episodes
    played: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def add(self, group: list[Trajectory], trained: bool) -> None:
        turns = sum(t.turns for t in group)
        for tally in ([self.trained, self.played] if trained else [self.played]):
            tally[0] += turns
            tally[1] += len(group)

    def ratio(self) -> float | None:
        if not self.trained[1] or not self.played[0]:
            return None
        return (self.trained[0] / self.trained[1]) / (self.played[0] / self.played[1])


def importance_weights(policy_logps: Any, sampling_logps: Any, mask: Any, cap: float
                       ) -> tuple[Any, dict[str, float]]:
    """Truncated importance weights ``min(exp(policy - sampling), cap)`` per token (1 where
    ``mask`` is 0 or the sampling log-prob is unknown, NaN), and their statistics over
    the masked-in tokens: ``mean``, ``max`` (before truncation) and ``truncated`` (the
    share cut to ``cap``)."""
    import torch

    known = (mask > 0) & ~torch.isnan(sampling_logps)
    log_ratio = torch.where(known, policy_logps - sampling_logps.nan_to_num(0.0),
                            torch.zeros_like(policy_logps))
    ratio = torch.exp(log_ratio)
    weights = ratio.clamp(max=cap)
    count = int(known.sum())
    stats = {"mean": float(ratio[known].mean()) if count else 1.0,
             "max": float(ratio[known].max()) if count else 1.0,
             "truncated": float((ratio[known] > cap).float().mean()) if count else 0.0}
    if not math.isfinite(stats["max"]):
        stats["max"] = float("inf")
    return weights, stats


def staleness_metrics(groups: list[PlayedGroup], step: int) -> dict[str, float]:
    """``async/staleness_{mean,max}`` and the histogram ``async/staleness/<k>`` (share of
    the groups trained at ``step`` that are ``k`` steps stale)."""
    ages = [g.staleness(step) for g in groups]
    metrics: dict[str, float] = {"async/staleness_mean": sum(ages) / len(ages),
                                 "async/staleness_max": float(max(ages))}
    for age, count in Counter(ages).items():
        metrics[f"async/staleness/{age}"] = count / len(ages)
    return metrics


