"""The pipeline's scheduler: how many episodes to start, who generates next, and what it cost.

**Admission** (:class:`Admission`). A free generation slot should never wait for a sandbox
to start, and no sandbox should be started long before a slot is free for it. The
scheduler measures, as the run goes:

* ``g`` and ``t``, the mean seconds a turn spends generating (slot held) and in the env
  (tools); ``n``, the turns an episode plays (the mean of finished episodes; until one
  finishes, one more than any has played);
* ``s``, an episode's setup: admission to its first step's result, averaged over the
  episodes past it and the time so far of those still in it (so a slow start raises the
  estimate before it ends). The first turn is generated while the sandbox starts, so
  only ``s - g - t`` must be started ahead.

Then, by Little's law, ``C (g + t) / g`` episodes running turns keep the C generation
slots busy (while one runs a tool its slot serves another). New episodes are admitted so
that this many are running when a setup begun now would end: the target, less the running
episodes still playing then (turns left times ``g + t`` longer than the lead time), less
those already starting. Until an episode finishes, the count is Little's law on the
whole stage, ``C (g + t) / g + rate * (s - g - t)`` with ``rate = C / (n g)``, and before
any generation is measured, C: enough to fill the slots. When the work left (the
queued episodes' turns and the running ones' remaining turns, at ``g`` each, over C
slots) fits in the time one new episode takes (``s + n (g + t)``), every remaining
episode is admitted: admitted one by one, the last would play almost alone at the end.
All of it within the user's bound on live sandboxes (``max_live_sandboxes``, default
2C). Grading is counted apart (``grade_concurrency``), so a backlog of grading never
stops setups from starting. A fixed ``prefetch`` replaces the measured setup-ahead.

**Generation order** (:class:`GenerationGate`). A first turn goes first (it hides its
sandbox's start). Then, while episodes still wait to be admitted, the one that has played
the most turns, so episodes finish and free their sandboxes; once all are admitted, the
one that has played the fewest, whose remaining turns now bound the run's end.

**Costs** (:class:`PipelineStats`). Peak live sandboxes; sandbox-seconds (admission to
release, summed over episodes) and idle sandbox-seconds: the time an env was held while
its episode was in none of its stages (waiting for a generation or grading slot, or in
the lock-step modes for the other episodes of its batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


class Admission:
    """How many episodes may be starting or running at once (see the module docstring).

    Args:
        concurrency: generation slots (C).
        ahead: a fixed number of episodes to keep starting ahead of need (``prefetch``);
            None: measured (Little's law).
    """

    def __init__(self, concurrency: int, ahead: int | None = None):
        self.concurrency, self.ahead = concurrency, ahead
        self._setups = [0.0, 0]  # seconds, episodes past their setup
        self._starting: dict[int, float] = {}
        self._gen = [0.0, 0]  # seconds, turns
        self._tool = [0.0, 0]
        self._turns = [0, 0]  # turns of finished episodes, episodes
        self._most_turns = 0

    # ---- measurements -------------------------------------------------------------------

    def setup_started(self, key: int, now: float) -> None:
        self._starting[key] = now

    def setup_done(self, key: int, seconds: float) -> None:
        """The episode's first step is done, ``seconds`` of reset, first generation (not
        the wait for its slot) and first step after admission."""
        if self._starting.pop(key, None) is not None:
            self._setups[0] += seconds
            self._setups[1] += 1

    def setup_ended(self, key: int) -> None:
        """The episode left its setup without a measurement (it failed): forget it."""
        self._starting.pop(key, None)

    def generated(self, seconds: float) -> None:
        self._gen[0] += seconds
        self._gen[1] += 1

    def stepped(self, seconds: float, turns_so_far: int) -> None:
        """A turn's env step took ``seconds``; not called for a step that waited on setup."""
        self._tool[0] += seconds
        self._tool[1] += 1
        self._most_turns = max(self._most_turns, turns_so_far)

    def finished(self, turns: int) -> None:
        self._turns[0] += turns
        self._turns[1] += 1
        self._most_turns = max(self._most_turns, turns)

    # ---- estimates ----------------------------------------------------------------------

    def setup_s(self, now: float) -> float:
        """Mean setup seconds: finished setups, and the time so far of running ones."""
        total, count = self._setups
        total += sum(now - start for start in self._starting.values())
        count += len(self._starting)
        return total / count if count else 0.0

    def endgame(self, now: float, queued: int, played: list[int]) -> bool:
        """Whether to admit every episode left now: the GPU's remaining work (theirs, and
        the turns left to the admitted episodes, which have played ``played``) fits in
        the time one new episode takes to play through. Admitted one by one instead, the
        last ones would play almost alone at the end, the GPU mostly idle."""
        if not self._gen[1] or not self._turns[1]:
            return False
        g = self._gen[0] / self._gen[1]
        t = self._tool[0] / self._tool[1] if self._tool[1] else 0.0
        turns = max(self._turns[0] / self._turns[1], 1.0)
        left = queued * turns + sum(max(turns - p, 1.0) for p in played)
        return left * g / self.concurrency <= self.setup_s(now) + turns * (g + t)

    def to_admit(self, now: float, starting: int, played: list[int]) -> int:
        """Episodes to admit now, given ``starting`` ones in their setup and the turns
        ``played`` by each running one."""
        # Episodes can finish before any generation was measured (they failed at reset, or
        # their policy had nothing to play): then nothing is known of g yet.
        if not self._turns[1] or not self._gen[1] or self.ahead is not None:
            return self.budget(now) - starting - len(played)
        g = max(self._gen[0] / self._gen[1], 1e-6)
        t = self._tool[0] / self._tool[1] if self._tool[1] else 0.0
        turns = max(self._turns[0] / self._turns[1], 1.0)
        setup = max(0.0, self.setup_s(now) - g - t)
        # Running episodes that will still be running when a setup begun now ends.
        staying = sum(max(turns - p, 1.0) * (g + t) > setup for p in played)
        return math.ceil(self.concurrency * (g + t) / g) - staying - starting

    def budget(self, now: float) -> int:
        """Episodes that may be starting or running now."""
        c = self.concurrency
        if self._gen[1] == 0:  # nothing measured yet: fill the generation slots
            return c + (self.ahead or 0)
        g = max(self._gen[0] / self._gen[1], 1e-6)
        t = self._tool[0] / self._tool[1] if self._tool[1] else 0.0
        running = c * (g + t) / g
        if self.ahead is not None:
            return math.ceil(running) + self.ahead
        # Turns an episode plays: the mean of finished ones; until one finishes, more
        # than any has played so far.
        turns = (self._turns[0] / self._turns[1] if self._turns[1]
                 else self._most_turns + 1.0)
        rate = c / (max(turns, 1.0) * g)
        # A setup longer than a turn (its first, generated meanwhile) must start ahead.
        return math.ceil(running + rate * max(0.0, self.setup_s(now) - g - t))


class GenerationGate:
    """``slots`` generations at once. While episodes still wait to be admitted, a freed
    slot goes to the waiting episode with the most turns played, so episodes finish and
    free their sandboxes for new ones; once every episode is admitted (:meth:`drain`),
    to the one with the fewest, whose remaining turns now bound the run's end. Ties: first
    come."""

    def __init__(self, slots: int):
        self.free = slots
        self._waiting: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._sign = -1  # -1: most turns first; +1: fewest first (draining)

    def drain(self) -> None:
        """Every episode is admitted: the fewest turns played go first from now on."""
        if self._sign == 1:
            return
        self._sign = 1
        self._waiting = [(self._rank(turns), order, turns, future)
                         for _, order, turns, future in self._waiting]
        heapq.heapify(self._waiting)

    def _rank(self, turns: int) -> int:
        # A first turn is generated while its sandbox starts: it goes first, or the
        # setup it could hide is lost.
        return -(1 << 30) if turns == 0 else self._sign * turns

    @contextlib.asynccontextmanager
    async def slot(self, turns_played: int) -> AsyncIterator[float]:
        """Hold a slot for the block; yields the seconds waited for it."""
        start = time.perf_counter()
        if self.free > 0 and not self._waiting:
            self.free -= 1
        else:
            future = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiting, (self._rank(turns_played), next(self._order),
                                           turns_played, future))
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._release()  # handed a slot as it was cancelled: pass it on
                else:
                    future.cancel()
                raise
        try:
            yield time.perf_counter() - start
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            future = heapq.heappop(self._waiting)[-1]
            if not future.done():
                future.set_result(None)
                return
        self.free += 1


@dataclass
class PipelineStats:
    """What a run cost in sandboxes, kept up to date as it runs (``on_stage`` gets it)."""

    #: The most envs (sandboxes) held at once.
    peak_live: int = 0
    #: Sandbox-seconds of released episodes: admission to release.
    sandbox_s: float = 0.0
    #: Of those, seconds spent waiting on the scheduler (generation or grading slot).
    idle_sandbox_s: float = 0.0
    #: Admission times of the episodes still live.
    opened: dict[int, float] = field(default_factory=dict)

    def open(self, key: int, now: float) -> None:
        self.opened[key] = now
        self.peak_live = max(self.peak_live, len(self.opened))

    def release(self, key: int, now: float, idle_s: float) -> None:
        start = self.opened.pop(key, None)
        if start is not None:
            self.sandbox_s += now - start
        self.idle_sandbox_s += idle_s

    @property
    def idle_share(self) -> float:
        return self.idle_sandbox_s / self.sandbox_s if self.sandbox_s else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"peak_live": self.peak_live, "sandbox_s": self.sandbox_s,
                "idle_sandbox_s": self.idle_sandbox_s}


class StageCounts(Counter):
    """Episodes per stage (init, run, grade, done), as ``on_stage`` receives them; also
    carries the run's :class:`PipelineStats` (``stats``) for displays."""

    stats: PipelineStats | None = None
