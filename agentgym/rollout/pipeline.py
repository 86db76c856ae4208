"""The rollout pipeline: many episodes, scheduled so the GPU never waits on sandboxes.

Each episode flows through three stages (see :class:`~agentgym.rollout.loop.EpisodeRunner`):
init (sandbox + reset), run (generate / step turns), grade. Three schedules, all with the
same *generation concurrency* C (episodes in their run stage at once):

* ``sync``: lock-step, as TRL's environment loop does: the next C episodes are reset one
  after another, then all play turn 1, then turn 2, ..., then are graded one by one.
* ``async_batch``: every episode is a task holding one of C slots from its init to its
  grade ("gather everything"): setup and grading occupy slots generation could use.
* ``pipeline``: bounded stages. At most C episodes generate at once, counted per
  generation rather than per episode, so an episode running a tool or being set up or
  graded never holds generation capacity; up to ``prefetch`` (default C) further episodes
  are set up ahead of need, so a freed generation slot finds a sandbox ready; an episode's
  first turn is generated while its sandbox starts; grading overlaps other episodes'
  generation. Live sandboxes are capped at C + prefetch, so setup
  never runs far ahead of generation.

Episodes can also be *prepared* ahead of a run (:meth:`RolloutPipeline.prepare`): their envs
reset and their sandboxes start while the caller does other work (a trainer's optimizer
step); :meth:`RolloutPipeline.run` then plays a prepared episode for a matching job.

A failing episode records its error and finish reason; the rest go on. Envs are pooled and
reused (``arelease`` between episodes). ``make_env`` may build local envs or remote ones
(:mod:`agentgym.rollout.ray_executor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from agentgym.rollout.loop import EpisodeRunner, RolloutConfig
from agentgym.rollout.trajectory import Trajectory

Mode = Literal["sync", "async_batch", "pipeline"]
MODES: tuple[str, ...] = ("sync", "async_batch", "pipeline")


@dataclass
class PipelineConfig:
    """Scheduling of a rollout.

    Args:
        mode: ``sync``, ``async_batch`` or ``pipeline`` (see the module docstring).
        concurrency: episodes that may be generating at once (every mode).
        prefetch: pipeline only: episodes initialised ahead of a free run slot
            (default: ``concurrency``).
    """

    mode: Mode = "pipeline"
    concurrency: int = 8
    prefetch: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {self.prefetch}")

    @property
    def live_cap(self) -> int:
        """Envs (sandboxes) alive at once."""
        if self.mode != "pipeline":
            return self.concurrency
        return self.concurrency + (self.concurrency if self.prefetch is None else self.prefetch)


Job = tuple[str, int]  # (task_id, episode index)


class RolloutPipeline:
    """Runs jobs ``(task_id, episode)`` and hands each finished trajectory to ``on_done``.

    Args:
        make_env: builds an env (or an awaitable of one); called at most ``live_cap`` times.
        policy: a text-level or token-level policy, shared by all episodes.
        config: scheduling; rollout: per-episode settings.
        on_done: called with each trajectory as soon as it is complete (e.g. a writer).
        on_stage: called with a :class:`collections.Counter` of episodes per stage
            (init, run, grade, done) whenever it changes, for progress displays.
        policy_for: where jobs play different policies side by side (``agentgym
            validate`` plays the oracle, noop and known-wrong solutions in one run): the
            ``(policy, policy_name)`` of a job, used instead of ``policy`` and
            ``policy_name``.
    """

    def __init__(self, make_env: Callable[[], Any], policy: Any, *,
                 config: PipelineConfig | None = None, rollout: RolloutConfig | None = None,
                 env_id: str = "", policy_name: str = "",
                 on_done: Callable[[Trajectory], None] | None = None,
                 on_stage: Callable[[Counter], None] | None = None,
                 policy_for: Callable[[Job], tuple[Any, str]] | None = None):
        self.make_env, self.policy, self.policy_for = make_env, policy, policy_for
        self.config, self.rollout = config or PipelineConfig(), rollout or RolloutConfig()
        self.env_id, self.policy_name = env_id, policy_name
        self.on_done, self.on_stage = on_done, on_stage
        self.stages: Counter = Counter()
        self._pool: list[Any] = []
        self._made: list[Any] = []
        self._prepared: dict[Job, asyncio.Future[EpisodeRunner]] = {}
        #: Jobs of the last run that found their episode prepared.
        self.prepared_hits = 0

    # ---- env pool -----------------------------------------------------------------------

    def add_env(self, env: Any) -> None:
        """Put an env made elsewhere into the pool; the pipeline closes it at the end."""
        env = getattr(env, "unwrapped", env)
        self._made.append(env)
        self._pool.append(env)

    async def _take_env(self) -> Any:
        if self._pool:
            return self._pool.pop()
        env = self.make_env()
        if inspect.isawaitable(env):
            env = await env
        env = getattr(env, "unwrapped", env)
        self._made.append(env)
        return env

    async def task_ids(self) -> list[str]:
        """The env's task ids (from a pooled env, made now if the pool is empty)."""
        env = await self._take_env()
        try:
            return list(env.task_ids())
        finally:
            self._pool.append(env)

    async def _give_back(self, env: Any) -> None:
        try:
            await env.arelease()
            self._pool.append(env)
        except Exception:  # a broken env is dropped, not reused
            await _close(env)

    async def close(self) -> None:
        """Close every env the pipeline made."""
        await self.discard_prepared()
        await asyncio.gather(*(_close(env) for env in self._made))
        self._made, self._pool = [], []

    # ---- prepared episodes ----------------------------------------------------------------

    def prepare(self, jobs: Iterable[Job]) -> None:
        """Start resetting envs for ``jobs`` in the background (call from the pipeline's
        loop, without awaiting anything): a later :meth:`run` with the same jobs finds them
        set up. Their sandboxes keep starting in the background (``overlap_setup``)."""
        for job in jobs:
            if job not in self._prepared:
                self._prepared[job] = asyncio.ensure_future(self._prepare_one(job))

    async def _prepare_one(self, job: Job) -> EpisodeRunner:
        runner = self._runner(await self._take_env(), job)
        runner.overlap_setup = True
        await runner.init()  # records its own failure; a failed init plays as failed
        return runner

    async def discard_prepared(self, keep: Iterable[Job] = ()) -> None:
        """Release the prepared episodes whose jobs are not in ``keep``."""
        keep = set(keep)
        stale = [self._prepared.pop(job) for job in list(self._prepared) if job not in keep]
        for prepared in stale:
            try:
                runner = await prepared
            except Exception:
                continue
            await self._give_back(runner.env)

    async def _start(self, job: Job) -> tuple[EpisodeRunner, bool]:
        """The episode for ``job`` and whether it is already initialised."""
        prepared = self._prepared.pop(job, None)
        if prepared is not None:
            with contextlib.suppress(Exception):
                runner = await prepared
                self.prepared_hits += 1
                return runner, True
        return self._runner(await self._take_env(), job), False

    # ---- stages -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _in(self, stage: str) -> Iterator[None]:
        """Count an episode in ``stage`` (init, ready, run, grade) while the block runs."""
        self._count(stage, +1)
        try:
            yield
        finally:
            self._count(stage, -1)

    def _count(self, stage: str, delta: int) -> None:
        self.stages[stage] += delta
        if self.on_stage:
            self.on_stage(self.stages)

    def _runner(self, env: Any, job: Job) -> EpisodeRunner:
        policy, name = self.policy_for(job) if self.policy_for else (self.policy,
                                                                      self.policy_name)
        return EpisodeRunner(env, policy, job[0], job[1], env_id=self.env_id,
                             policy_name=name, config=self.rollout)

    def _finish(self, runner: EpisodeRunner, results: list[Trajectory]) -> None:
        trajectory = runner.trajectory()
        results.append(trajectory)
        self._count("done", +1)
        if self.on_done:
            self.on_done(trajectory)

    async def run(self, jobs: Iterable[Job]) -> list[Trajectory]:
        """Play every job; returns the trajectories in the order they finished."""
        jobs = list(jobs)
        results: list[Trajectory] = []
        self.prepared_hits = 0
        await self.discard_prepared(keep=jobs)
        schedule = {"sync": self._sync, "async_batch": self._async_batch,
                    "pipeline": self._pipeline}[self.config.mode]
        await schedule(jobs, results)
        return results

    async def _sync(self, jobs: list[Job], results: list[Trajectory]) -> None:
        size = self.config.concurrency
        for start in range(0, len(jobs), size):
            batch = jobs[start:start + size]
            started = [await self._start(job) for job in batch]
            runners = [runner for runner, _ in started]
            for runner, ready in started:  # resets one after another, as TRL's loop does
                if not ready:
                    with self._in("init"):
                        await runner.init()
            with self._in("run"):
                active = list(runners)
                while active:  # every episode plays turn k before any plays turn k + 1
                    over = await asyncio.gather(*(r.turn() for r in active))
                    active = [r for r, done in zip(active, over, strict=True) if not done]
            for runner in runners:
                with self._in("grade"):
                    await runner.grade()
                self._finish(runner, results)
            for runner in runners:
                await self._give_back(runner.env)

    async def _async_batch(self, jobs: list[Job], results: list[Trajectory]) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)

        async def episode(job: Job) -> None:
            async with slots:
                runner, ready = await self._start(job)
                if not ready:
                    with self._in("init"):
                        await runner.init()
                with self._in("run"):
                    await runner.run()
                with self._in("grade"):
                    await runner.grade()
                await self._give_back(runner.env)
            self._finish(runner, results)

        await asyncio.gather(*(episode(job) for job in jobs))

    async def _pipeline(self, jobs: list[Job], results: list[Trajectory]) -> None:
        live = asyncio.Semaphore(self.config.live_cap)
        generating = asyncio.Semaphore(self.config.concurrency)

        async def episode(job: Job) -> None:
            async with live:
                runner, ready = await self._start(job)
                runner.generation_gate = generating
                runner.overlap_setup = True  # the first turn is generated during setup
                if not ready:
                    with self._in("init"):
                        await runner.init()
                with self._in("run"):
                    await runner.run()
                with self._in("grade"):  # holds no generation slot: overlaps generation
                    await runner.grade()
                await self._give_back(runner.env)
            self._finish(runner, results)

        await asyncio.gather(*(episode(job) for job in jobs))


async def _close(env: Any) -> None:
    try:
        result = env.aclose()
        if inspect.isawaitable(result):
            await result
    except Exception:
        pass
