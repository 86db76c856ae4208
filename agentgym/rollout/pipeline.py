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
  graded never holds generation capacity. Episodes are admitted as measured stage times
  say they will be needed (:mod:`agentgym.rollout.scheduler`): enough running turns to
  keep the C slots busy, and their setups begun so that each is ready as a running
  episode ends; when the work left fits in one episode's length, all the rest. An
  episode's first turn is generated while its sandbox starts; a freed slot goes to the
  episode closest to done (after the last admission, to the farthest); grading overlaps
  other episodes' generation. Live sandboxes never exceed ``max_live_sandboxes`` (2C by
  default).

A run can also be open-ended (:meth:`RolloutPipeline.stream`): jobs arrive through a
:class:`JobFeed` while earlier ones play, and each trajectory is handed over as it
finishes (the asynchronous GRPO producer, :mod:`agentgym.trainers.async_grpo`).

Episodes can also be *prepared* ahead of a run (:meth:`RolloutPipeline.prepare`): their envs
reset and their sandboxes start while the caller does other work (a trainer's optimizer
step), at most ``max_live_sandboxes`` of them; :meth:`RolloutPipeline.run` then plays a
prepared episode for a matching job.

A failing episode records its error and finish reason; the rest go on
(``raise_on_error`` raises after the run instead, every trajectory delivered first). Envs
are pooled and reused (``arelease`` between episodes). ``make_env`` may build local envs or
remote ones (:mod:`agentgym.rollout.ray_executor`).

**The contract for any env and policy.** The pipeline drives envs only through the env
protocol (:mod:`agentgym.core.env`). Each reset gets the options ``task_id``,
``defer_grading`` (always: grading is its own stage), ``overlap_setup`` (per
:attr:`PipelineConfig.overlap_setup`), and ``attempt`` and ``group`` (``attempt_of``: the
k attempts of a task, a GRPO group), which a text policy also gets when its ``act`` takes
them. Grading may have its own bound (``grade_concurrency``) and live envs theirs
(``max_live_sandboxes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
import typing
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from agentgym.core.env import AgentEnv
from agentgym.core.errors import AgentGymError
from agentgym.core.settings import check_settings
from agentgym.core.task import Task
from agentgym.rollout.loop import EpisodeRunner, RolloutConfig
from agentgym.rollout.scheduler import (
    Admission,
    GenerationGate,
    PipelineStats,
    StageCounts,
)
from agentgym.rollout.trajectory import Trajectory

if TYPE_CHECKING:
    from agentgym.rollout.harness import HarnessRunner

Mode = Literal["sync", "async_batch", "pipeline"]
MODES: tuple[str, ...] = typing.get_args(Mode)


@dataclass
class PipelineConfig:
    """Scheduling of a rollout.

    Args:
        mode: ``sync``, ``async_batch`` or ``pipeline`` (see the module docstring).
        concurrency: episodes that may be generating at once (every mode).
        prefetch: pipeline only: a fixed number of episodes to set up ahead of need,
            instead of the measured one (default: measured, see
            :mod:`agentgym.rollout.scheduler`).
        overlap_setup: ``auto`` (the pipeline generates an episode's first turn while its
            sandbox starts; the other modes wait for it), ``on`` (every mode overlaps) or
            ``off`` (no mode does: for envs whose first turn needs the setup done).
        max_live_sandboxes: pipeline only: the most envs (sandboxes) alive at once
            (default: ``2 * concurrency``, or ``concurrency + prefetch`` when
            ``prefetch`` is given).
        grade_concurrency: episodes graded at once (default: no bound of its own).
        setup_timeout_s: an episode whose setup (sandbox start, reset) takes longer is
            cancelled and ends with its reason (default: no limit).
        raise_on_error: after the run, raise :class:`RolloutError` if any episode failed
            (every trajectory is still handed to ``on_done`` first); off by default: a
            failure is the episode's ``error`` and ``finish_reason``.
    """

    mode: Mode = "pipeline"
    concurrency: int = field(default=8, metadata={"min": 1})
    prefetch: int | None = field(default=None, metadata={"min": 0})
    overlap_setup: Literal["auto", "on", "off"] = "auto"
    max_live_sandboxes: int | None = field(default=None, metadata={"min": 1})
    grade_concurrency: int | None = field(default=None, metadata={"min": 1})
    setup_timeout_s: float | None = field(default=None, metadata={"gt": 0})
    raise_on_error: bool = False

    def __post_init__(self) -> None:
        check_settings(self)  # the bounds and choices above (agentgym.core.settings)

    @property
    def live_cap(self) -> int:
        """Envs (sandboxes) alive at once."""
        if self.mode != "pipeline":
            return self.concurrency
        if self.max_live_sandboxes is not None:
            return self.max_live_sandboxes
        return self.concurrency + (self.concurrency if self.prefetch is None else self.prefetch)

    def overlaps(self) -> bool:
        """Whether episodes generate their first turn while their setup runs: the one rule
        for every episode, prepared ones included."""
        return self.overlap_setup == "on" or (self.overlap_setup == "auto"
                                              and self.mode == "pipeline")


class RolloutError(AgentGymError, RuntimeError):
    """Episodes of a run failed (``PipelineConfig.raise_on_error``); ``trajectories``
    holds every episode of the run, the failed ones with their ``error``."""

    def __init__(self, trajectories: list[Trajectory]):
        self.trajectories = trajectories
        failed = [t for t in trajectories if t.error]
        first = failed[0]
        super().__init__(f"{len(failed)} of {len(trajectories)} episodes failed; the first,"
                         f" {first.task_id} (episode {first.episode}): {first.error}")


Job = tuple[str, int]  # (task_id, episode index)
_TICK_S = 0.05  # the scheduler looks at its estimates at least this often


@dataclass
class _Hold:
    runner: EpisodeRunner | None = None


class JobFeed:
    """Jobs handed to a running :meth:`RolloutPipeline.stream` as they come. Use it on the
    pipeline's event loop; :meth:`close` says no more will come (the stream then ends once
    the jobs handed over are played)."""

    def __init__(self) -> None:
        self.closed = False
        self._jobs: deque[Job] = deque()
        self._wake: Callable[[], None] = lambda: None

    def put(self, jobs: Iterable[Job]) -> None:
        if self.closed:
            raise AgentGymError("this job feed is closed: no job can be added to it")
        self._jobs.extend(jobs)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def take(self) -> list[Job]:
        """The jobs handed over since the last call (the scheduler's side)."""
        jobs = list(self._jobs)
        self._jobs.clear()
        return jobs


class RolloutPipeline:
    """Runs jobs ``(task_id, episode)`` and hands each finished trajectory to ``on_done``.

    Args:
        make_env: builds an env (or an awaitable of one); called at most ``live_cap`` times.
        policy: a text-level or token-level policy, shared by all episodes.
        config: scheduling; rollout: per-episode settings.
        on_done: called with each trajectory as soon as it is complete (e.g. a writer).
        on_stage: called with the episodes per stage (init: setting up, up to its first
            step's result; run; grade; done; live: envs held), a
            :class:`~agentgym.rollout.scheduler.StageCounts` whose ``stats`` is the
            run's :class:`~agentgym.rollout.scheduler.PipelineStats` (peak live,
            sandbox-seconds, idle sandbox-seconds), whenever they change.
        policy_for: where jobs play different policies side by side (``agentgym
            validate`` plays the oracle, noop and known-wrong solutions in one run): the
            ``(policy, policy_name)`` of a job, used instead of ``policy`` and
            ``policy_name``.
        attempt_of: a job's ``(group, attempt)``: which attempts of a task belong together
            (the k attempts of pass@k, a GRPO group) and which one it is. The env gets them
            as reset options (``setup_episode`` reads ``self.episode.attempt``), and so does
            a text policy whose ``act`` takes them. Default: every job its own group
            (its episode index), attempt 0.
        harness: a started :class:`~agentgym.rollout.harness.HarnessRunner`: every episode
            is played by its agent program in the task's sandbox, with the runner's policy
            behind it (``policy`` is then unused), instead of by the built-in loop. The
            program's whole run is the episode's one step.
    """

    def __init__(self, make_env: Callable[[], Any], policy: Any, *,
                 config: PipelineConfig | None = None, rollout: RolloutConfig | None = None,
                 env_id: str = "", policy_name: str = "",
                 on_done: Callable[[Trajectory], None] | None = None,
                 on_stage: Callable[[Counter], None] | None = None,
                 policy_for: Callable[[Job], tuple[Any, str]] | None = None,
                 attempt_of: Callable[[Job], tuple[int, int]] | None = None,
                 harness: HarnessRunner | None = None):
        self.make_env, self.policy, self.policy_for = make_env, policy, policy_for
        self.attempt_of, self.harness = attempt_of, harness
        self.config, self.rollout = config or PipelineConfig(), rollout or RolloutConfig()
        self.env_id, self.policy_name = env_id, policy_name
        self.on_done, self.on_stage = on_done, on_stage
        self.stages = StageCounts()
        #: What the current (or last) run cost in sandboxes; ``stages.stats`` is the same.
        self.stats = self.stages.stats = PipelineStats()
        self._pool: list[Any] = []
        self._made: list[Any] = []
        self._prepared: dict[Job, asyncio.Future[EpisodeRunner]] = {}
        self._grading: asyncio.Semaphore | None = None
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

    async def tasks(self, task_ids: Iterable[str]) -> list[Task] | None:
        """The env's tasks of ``task_ids`` (from a pooled env), to check what a run will
        play before it starts; None when the env is not an :class:`AgentEnv` (a remote
        one: its tasks stay where it runs)."""
        env = await self._take_env()
        try:
            return [env.tasks.get(t) for t in task_ids] if isinstance(env, AgentEnv) else None
        finally:
            self._pool.append(env)

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
        set up (with ``overlap_setup``, their sandboxes may still be starting then). At
        most ``live_cap`` are prepared at once, the first jobs (the ones a run admits
        first): more would be sandboxes alive beyond the bound, all starting together (32
        browsers on a 2-core machine for one GRPO step of MiniWoB)."""
        room = self.config.live_cap - len(self._prepared)
        for job in jobs:
            if room <= 0:
                break
            if job not in self._prepared:
                self._prepared[job] = asyncio.ensure_future(self._prepare_one(job))
                room -= 1

    async def _prepare_one(self, job: Job) -> EpisodeRunner:
        runner = self._runner(await self._take_env(), job)
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
        """Count an episode in ``stage`` (init, run, grade) while the block runs."""
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
        group, attempt = self.attempt_of(job) if self.attempt_of else (job[1], 0)
        if self.harness is not None:  # the same stages, played by the agent program
            return cast(EpisodeRunner, self.harness.episode(
                env, job[0], env_id=self.env_id, episode=job[1], attempt=attempt, group=group,
                seed=self.rollout.seed + job[1]))
        return EpisodeRunner(env, policy, job[0], job[1], env_id=self.env_id,
                             policy_name=name, config=self.rollout,
                             overlap_setup=self.config.overlaps(),
                             setup_timeout_s=self.config.setup_timeout_s, attempt=attempt,
                             group=group)

    def _finish(self, runner: EpisodeRunner, results: list[Trajectory] | Callable[
            [Trajectory], None]) -> None:
        trajectory = runner.trajectory()
        if callable(results):  # a stream's consumer
            results(trajectory)
        else:
            results.append(trajectory)
        self._count("done", +1)
        if self.on_done:
            self.on_done(trajectory)

    async def run(self, jobs: Iterable[Job]) -> list[Trajectory]:
        """Play every job; returns the trajectories in the order they finished."""
        jobs = list(jobs)
        results: list[Trajectory] = []
        self.prepared_hits = 0
        self.stats = self.stages.stats = PipelineStats()
        await self.discard_prepared(keep=jobs)
        schedule = {"sync": self._sync, "async_batch": self._async_batch,
                    "pipeline": self._pipeline}[self.config.mode]
        grading = self.config.grade_concurrency
        self._grading = asyncio.Semaphore(grading) if grading else None
        await schedule(jobs, results)
        if self.config.raise_on_error and any(t.error for t in results):
            raise RolloutError(results)
        return results

    async def stream(self, feed: JobFeed, on_done: Callable[[Trajectory], None]) -> None:
        """Play jobs as ``feed`` hands them over (``pipeline`` mode's scheduling), each
        trajectory to ``on_done`` the moment it is complete, until the feed is closed and
        every job handed over is played. Cancel it to stop at once: episodes in flight
        are cancelled."""
        if self.config.mode != "pipeline":
            raise AgentGymError(f"a stream is scheduled as the pipeline mode is, not"
                                f" {self.config.mode!r}: use PipelineConfig(mode='pipeline')")
        self.stats = self.stages.stats = PipelineStats()
        grading = self.config.grade_concurrency
        self._grading = asyncio.Semaphore(grading) if grading else None
        await self._pipeline([], on_done, feed)

    @contextlib.asynccontextmanager
    async def _grade_slot(self, runner: EpisodeRunner) -> AsyncIterator[None]:
        """Held while an episode is graded (``grade_concurrency``) and counted; the wait
        for it is the episode's ``queue`` time."""
        waited = time.perf_counter()
        async with self._grading or contextlib.nullcontext():
            timings = runner.record.timings
            timings["queue"] = timings.get("queue", 0.0) + time.perf_counter() - waited
            with self._in("grade"):
                yield

    @contextlib.asynccontextmanager
    async def _sandbox(self, key: int) -> AsyncIterator[_Hold]:
        """Counts one episode's env as live for the block (:class:`PipelineStats`); the
        block sets ``hold.runner``, whose record then gets its ``sandbox`` seconds."""
        hold, start = _Hold(), time.perf_counter()
        self.stats.open(key, start)
        self._count("live", +1)
        try:
            yield hold
        finally:
            now = time.perf_counter()
            idle = 0.0
            if hold.runner is not None:
                hold.runner.record.timings["sandbox"] = now - start
                idle = hold.runner.record.idle_sandbox_s
            self.stats.release(key, now, idle)
            self._count("live", -1)

    async def _sync(self, jobs: list[Job], results: list[Trajectory]) -> None:
        size = self.config.concurrency
        for start in range(0, len(jobs), size):
            batch = list(enumerate(jobs[start:start + size], start))
            async with contextlib.AsyncExitStack() as stack:
                holds = [await stack.enter_async_context(self._sandbox(key))
                         for key, _ in batch]
                started = [await self._start(job) for _, job in batch]
                runners = [runner for runner, _ in started]
                for hold, (runner, ready) in zip(holds, started, strict=True):
                    hold.runner = runner
                    if not ready:  # resets one after another, as TRL's loop does
                        with self._in("init"):
                            await runner.init()
                with self._in("run"):
                    active = list(runners)
                    while active:  # every episode plays turn k before any plays turn k + 1
                        over = await asyncio.gather(*(r.turn() for r in active))
                        active = [r for r, done in zip(active, over, strict=True) if not done]
                for runner in runners:
                    async with self._grade_slot(runner):
                        await runner.grade()
                for runner in runners:
                    await self._give_back(runner.env)
            for runner in runners:
                self._finish(runner, results)

    async def _async_batch(self, jobs: list[Job], results: list[Trajectory]) -> None:
        slots = asyncio.Semaphore(self.config.concurrency)

        async def episode(key: int, job: Job) -> None:
            async with slots, self._sandbox(key) as hold:
                runner, ready = await self._start(job)
                hold.runner = runner
                if not ready:
                    with self._in("init"):
                        await runner.init()
                with self._in("run"):
                    await runner.run()
                async with self._grade_slot(runner):
                    await runner.grade()
                await self._give_back(runner.env)
            self._finish(runner, results)

        await asyncio.gather(*(episode(key, job) for key, job in enumerate(jobs)))

    async def _pipeline(self, jobs: list[Job], results: list[Trajectory] | Callable[
            [Trajectory], None], feed: JobFeed | None = None) -> None:
        """Admission forecast from measured stage times, closest-to-done-first generation
        (see :mod:`agentgym.rollout.scheduler`); with ``feed``, more jobs may come until it
        is closed (no endgame until then: the last episodes are not known)."""
        config = self.config
        gate = GenerationGate(config.concurrency)
        admission = Admission(config.concurrency, config.prefetch)
        changed = asyncio.Event()
        queue = deque(enumerate(jobs))
        numbered = len(jobs)
        if feed is not None:
            feed._wake = changed.set

        def open_ended() -> bool:
            """Whether jobs may still come (and take the ones that came)."""
            nonlocal numbered
            if feed is None:
                return False
            for job in feed.take():
                queue.append((numbered, job))
                numbered += 1
            return not feed.closed
        live = 0
        starting: set[int] = set()  # admitted, first step not yet played
        playing: dict[int, EpisodeRunner] = {}  # running turns

        def observe(stage: str, seconds: float, played: int) -> None:
            if stage == "generate":
                admission.generated(seconds)
            elif played:  # a first step waits for the setup: not a tool's time
                admission.stepped(seconds, played + 1)
            changed.set()

        async def episode(key: int, job: Job) -> None:
            nonlocal live
            admitted = time.perf_counter()
            admission.setup_started(key, admitted)
            runner = None
            try:
                async with self._sandbox(key) as hold:
                    runner, ready = await self._start(job)
                    hold.runner = runner
                    with self._in("init"):  # until the first step's result: the setup
                        if not ready:
                            await runner.init()
                        over = runner.failed or await runner.turn(gate, observe)
                    if runner.record.turns:  # the first step waited for the setup
                        admission.setup_done(key, time.perf_counter() - admitted)
                    starting.discard(key)
                    if not over:
                        playing[key] = runner
                        with self._in("run"):
                            await runner.run(gate, observe)
                        del playing[key]
                    admission.finished(runner.record.turns)
                    changed.set()
                    async with self._grade_slot(runner):  # no generation slot held
                        await runner.grade()
                    await self._give_back(runner.env)
            finally:
                admission.setup_ended(key)
                live -= 1
                starting.discard(key)
                playing.pop(key, None)
                changed.set()
            self._finish(runner, results)

        tasks: set[asyncio.Task[None]] = set()
        ended: list[asyncio.Task[None]] = []

        def on_end(task: asyncio.Task[None]) -> None:
            ended.append(task)
            changed.set()

        try:
            while (more := open_ended()) or queue or tasks:
                now = time.perf_counter()
                played = [r.record.turns for r in playing.values()]
                endgame = not more and config.prefetch is None and admission.endgame(
                    now, len(queue), played + [0] * len(starting))
                if endgame or not (queue or more):
                    gate.drain()
                while queue and live < config.live_cap and (
                        endgame or admission.to_admit(now, len(starting), played) > 0):
                    key, job = queue.popleft()
                    live += 1
                    starting.add(key)
                    task = asyncio.ensure_future(episode(key, job))
                    task.add_done_callback(on_end)
                    tasks.add(task)
                if not ended:
                    changed.clear()
                    # Estimates move while setups run: look again soon even without news.
                    # (asyncio.wait, not wait_for: Python 3.11's wait_for can swallow a
                    # cancellation that lands as the event is set, and the run would go on.)
                    news = asyncio.ensure_future(changed.wait())
                    try:
                        await asyncio.wait({news}, timeout=_TICK_S)
                    finally:
                        news.cancel()
                while ended:
                    task = ended.pop()
                    tasks.discard(task)
                    task.result()  # an error of the scheduler itself, not an episode's
        finally:
            if feed is not None:
                feed._wake = lambda: None
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _close(env: Any) -> None:
    try:
        result = env.aclose()
        if inspect.isawaitable(result):
            await result
    except Exception:
        pass
