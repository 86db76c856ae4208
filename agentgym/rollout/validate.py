"""Task validity: an env's real grader, in the backend it grades in, scores every task's
reference solution 1.0, doing nothing 0.0 and each known-wrong solution below 1.0.

:func:`validate` checks that for the selected tasks of any env (``agentgym validate`` and
:func:`agentgym.testing.assert_valid` call it). Per task it plays, as ordinary episodes
through the :class:`~agentgym.rollout.pipeline.RolloutPipeline` (so setup, play and grading
of different episodes overlap, and a crashed episode fails only its own check):

* ``oracle``: the task's reference solution (the ``oracle`` policy); passes at reward 1.0.
* ``noop``: a turn that calls no tool, every turn (the ``noop`` policy); passes at 0.0.
* ``wrong solution #k``: the task's k-th known-wrong solution (1-based;
  ``task.metadata["wrong_solutions"]``, see :mod:`agentgym.core.task`), replayed as the
  oracle replays the solution; passes below 1.0. These run once the oracle and noop
  episodes have shown which tasks carry them (the env protocol hands a policy the task
  only when an episode starts).
* ``probe ID``: each exploit probe (:mod:`agentgym.core.probes`, the plugins'
  ``agentgym_exploit_probes``) that applies to the task, a scripted hostile solution that
  tries to be paid without doing the task; passes below the task's pass threshold
  (:func:`~agentgym.core.probes.pass_threshold`, 1.0 unless the task says otherwise).
  Probes run with the known-wrong solutions, once the first episodes have shown each task
  and the tools it offers. A probe episode that crashed was not paid: it passes, its reason
  says why it crashed; one whose policy found nothing to attack
  (:class:`~agentgym.core.probes.ProbeNotApplicable`) is listed in
  :attr:`ValidationReport.skipped` ("not applicable: ...").

With ``repeat=K`` the oracle plays K times per task (``oracle``, ``oracle (repeat 2)``,
...): a grader that does not pay a correct solution every time is flaky, and each run that
scored below 1.0 fails.

A check whose episode crashed (its ``error`` is set) fails whatever its reward: the grader
never judged it. A task without a reference solution cannot be given its oracle check: it
is listed in :attr:`ValidationReport.skipped` ("no solution"), or counted as a failure with
``require_solutions=True``; its other checks still run.

Tasks: ``task_ids`` when given, else the first ``n`` of the env's task ids in order (all
with ``n=None``). ``backend`` is passed to the env as its ``backend`` keyword argument
(the sandbox backend it runs and grades in); an env that takes none is an error
(:class:`NoBackendError`).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import InvalidArgumentError, UnknownIdError
from agentgym.core.policies import (
    PolicyContractError,
    ScriptedPolicy,
    TextPolicy,
    TokenPolicy,
    WrongSolutionPolicy,
    build_policy,
    policy_level,
)
from agentgym.core.probes import (
    ExploitProbe,
    Plan,
    ProbeNotApplicable,
    ProbeTarget,
    pass_threshold,
)
from agentgym.core.task import Task
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig, RolloutPipeline
from agentgym.rollout.trajectory import Trajectory

__all__ = ["DEFAULT_TASKS", "CheckResult", "NoBackendError", "ValidationReport",
           "avalidate", "env_kwargs_with_backend", "probes_for", "validate"]

#: Tasks checked when neither ``task_ids`` nor ``n`` says otherwise (``agentgym validate``
#: without ``-n`` or ``--all``).
DEFAULT_TASKS = 10
ORACLE, NOOP, WRONG, PROBE = "oracle", "noop", "wrong solution #", "probe "
NO_SOLUTION = "no solution"
#: The start of the reason of a probe that found nothing to attack (skipped, not played).
NOT_APPLICABLE = "not applicable: "
#: Characters of a failure's reason kept (an error's traceback line, compact metrics).
REASON_CHARS = 300


class NoBackendError(InvalidArgumentError):
    """A backend was asked of an env that takes no ``backend`` argument."""


@dataclass
class CheckResult:
    """One check of one task: which (``oracle``, ``noop``, ``wrong solution #k``, ``probe
    ID``), whether it held, the episode's reward and finish reason, why it failed (empty
    when it held; for a probe the grader's metrics say what it was paid for) and, for a
    probe, its attack class."""

    task_id: str
    check: str
    passed: bool
    reward: float | None = None
    finish_reason: str = ""
    reason: str = ""
    attack: str = ""

    @property
    def probe(self) -> str | None:
        """The probe's id, for a probe check."""
        return self.check.removeprefix(PROBE) if self.check.startswith(PROBE) else None

    def to_dict(self) -> dict[str, Any]:
        data = {"task_id": self.task_id, "check": self.check, "reward": self.reward,
                "finish_reason": self.finish_reason, "reason": self.reason}
        if self.attack:
            data["attack"] = self.attack
        return data


@dataclass
class ValidationReport:
    """The checks of one env's tasks.

    Attributes:
        env: the env id.
        task_ids: the tasks checked, in order.
        results: every check that ran (skipped ones excluded), in task order.
        skipped: checks that did not count: oracle checks of tasks without a solution,
            when they do not count as failures (``reason`` "no solution"), and probes
            that found nothing to attack (``reason`` "not applicable: ...").
        trajectories: the episodes played, for a closer look.
    """

    env: str
    task_ids: list[str]
    results: list[CheckResult]
    skipped: list[CheckResult] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list, repr=False)

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if not r.passed]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def unsolved(self) -> list[CheckResult]:
        """The skipped oracle checks: tasks without a reference solution."""
        return [r for r in self.skipped if r.reason == NO_SOLUTION]

    def probe_counts(self) -> dict[str, dict[str, Any]]:
        """Per probe that played: its attack class, the tasks it played (``played``), those
        where it was paid (``paid``) and those where, once playing, it found nothing to
        attack (``not_applicable``, not counted as played), in the order probes first
        played."""
        counts: dict[str, dict[str, Any]] = {}
        for result in [*self.results, *self.skipped]:
            if result.probe is not None:
                row = counts.setdefault(result.probe, {"attack": result.attack, "played": 0,
                                                       "paid": 0, "not_applicable": 0})
                applicable = not result.reason.startswith(NOT_APPLICABLE)
                row["played"] += applicable
                row["paid"] += not result.passed
                row["not_applicable"] += not applicable
        return counts

    def summary(self) -> str:
        """One line: tasks and checks, failures, skips, probes."""
        failed_tasks = len({r.task_id for r in self.failed})
        line = (f"{self.env}: {_count(len(self.task_ids), 'task')} checked"
                f" ({_count(len(self.results), 'check')}), {failed_tasks} failed"
                f" ({_count(len(self.failed), 'check')})")
        if self.unsolved:
            line += f", {len(self.unsolved)} without a solution (oracle check skipped)"
        counts = self.probe_counts()
        if counts:
            played = sum(row["played"] for row in counts.values())
            paid = sum(row["paid"] for row in counts.values())
            line += (f"; {_count(len(counts), 'exploit probe')} played {played} times,"
                     f" paid {paid}")
            idle = sum(row["not_applicable"] for row in counts.values())
            if idle:
                line += f" ({idle} found nothing to attack)"
        return line

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``agentgym validate --json`` prints: ``env``, ``tasks`` (how many
        tasks were checked), ``checked`` (how many checks ran), ``failed`` and ``skipped``
        (:meth:`CheckResult.to_dict` each), ``probes`` (:meth:`probe_counts`) and ``ok``."""
        return {"env": self.env, "tasks": len(self.task_ids), "checked": len(self.results),
                "failed": [r.to_dict() for r in self.failed],
                "skipped": [r.to_dict() for r in self.skipped],
                "probes": self.probe_counts(), "ok": self.ok}


def env_kwargs_with_backend(env_id: str, env_kwargs: dict[str, Any] | None,
                            backend: str | None) -> dict[str, Any]:
    """``env_kwargs`` with ``backend`` added as the env's ``backend`` argument.

    Raises:
        NoBackendError: the env takes no ``backend`` argument.
        InvalidArgumentError: ``env_kwargs`` already names another backend.
        UnknownIdError: no plugin registers that sandbox backend.
    """
    kwargs = dict(env_kwargs or {})
    if backend is None:
        return kwargs
    from agentgym.core.env_kwargs import env_signature
    from agentgym.core.plugins import plugin_host

    signature = env_signature(env_id)
    if "backend" not in signature.parameters:
        raise NoBackendError(f"the env {signature.env_id!r} takes no backend: it runs where it"
                             " is made; leave the backend out")
    if kwargs.get("backend", backend) != backend:
        raise InvalidArgumentError(f"two backends given, {kwargs['backend']!r} in the env's"
                                   f" arguments and {backend!r}: give one")
    plugin_host().get("sandboxes", backend)  # an unknown id names the known ones
    return {**kwargs, "backend": backend}


def validate(env_id: str, env_kwargs: dict[str, Any] | None = None,
             task_ids: Sequence[str] | None = None, **options: Any) -> ValidationReport:
    """:func:`avalidate` from synchronous code (not from inside a running event loop)."""
    return asyncio.run(avalidate(env_id, env_kwargs, task_ids, **options))


async def avalidate(env_id: str, env_kwargs: dict[str, Any] | None = None,
                    task_ids: Sequence[str] | None = None, *, n: int | None = DEFAULT_TASKS,
                    backend: str | None = None, require_solutions: bool = False,
                    probes: bool | Sequence[str] = True, repeat: int = 1,
                    concurrency: int = 4, seed: int = 0,
                    make_env: Callable[[], Any] | None = None,
                    on_result: Callable[[CheckResult], None] | None = None,
                    on_stage: Callable[[Counter], None] | None = None,
                    on_planned: Callable[[int], None] | None = None) -> ValidationReport:
    """Check the tasks of ``env_id`` (see the module docstring).

    Args:
        env_kwargs: keyword arguments of ``agentgym.make(env_id, ...)``.
        task_ids: the tasks to check; None: the first ``n`` (all with ``n=None``).
        backend: the sandbox backend, passed as the env's ``backend`` argument.
        require_solutions: a task without a reference solution fails its oracle check.
        probes: play the exploit probes that apply (True), none (False), or only those
            with these ids.
        repeat: play each task's oracle this many times; each run must score 1.0.
        concurrency: episodes playing at once (the pipeline's concurrency).
        make_env: builds the env instead of ``agentgym.make(env_id, **env_kwargs)``.
        on_result: called with each check's result as its episode finishes.
        on_stage: the pipeline's per-stage episode counts, for progress displays.
        on_planned: called with the number of episodes each phase adds (for a progress
            total): oracle and noop first, then the known-wrong solutions.
    """
    import agentgym

    if n is not None and n < 1:
        raise InvalidArgumentError(f"need at least one task to check, got n={n}")
    if repeat < 1:
        raise InvalidArgumentError(f"repeat must be >= 1 (oracle runs per task), got {repeat}")
    kwargs = env_kwargs_with_backend(env_id, env_kwargs, backend)
    probe_list = probes_for(probes)
    seen: dict[str, Task] = {}  # each task as the env rendered it, from its first episode
    checks: dict[int, str] = {}  # episode index -> check name
    probe_policies: dict[int, Any] = {}  # episode index -> the probe's policy
    oracle, noop = _Seeing(build_policy("oracle"), seen), _Seeing(build_policy("noop"), seen)

    def policy_for(job: tuple[str, int]) -> tuple[Any, str]:
        check = checks[job[1]]
        if check.startswith(ORACLE):
            return oracle, check
        if check == NOOP:
            return noop, check
        if check.startswith(PROBE):
            return probe_policies[job[1]], check
        return WrongSolutionPolicy(int(check.removeprefix(WRONG)) - 1), check

    results: dict[int, CheckResult] = {}  # episode index -> its check's result
    attacks = {f"{PROBE}{probe.id}": probe.attack for probe in probe_list}

    def finished(trajectory: Trajectory) -> None:
        result = _judge(trajectory, seen.get(trajectory.task_id), require_solutions)
        result.attack = attacks.get(result.check, "")
        results[trajectory.episode] = result
        if on_result:
            on_result(result)

    def plan(task_id: str, check: str) -> tuple[str, int]:
        checks[len(checks)] = check
        return (task_id, len(checks) - 1)

    failures: list[CheckResult] = []  # probes that could not even be planned
    make = make_env or (lambda: agentgym.make(env_id, **kwargs))
    pipeline = RolloutPipeline(make, None, config=PipelineConfig(concurrency=concurrency),
                               rollout=RolloutConfig(seed=seed), env_id=env_id,
                               policy_for=policy_for, on_done=finished, on_stage=on_stage)
    try:
        known = await pipeline.task_ids()
        ids = known[:n] if task_ids is None else list(task_ids)
        if not ids:
            raise InvalidArgumentError(f"the env {env_id!r} has no tasks to check")
        unknown = sorted(set(ids) - set(known))
        if unknown:
            raise UnknownIdError("task", unknown[0], known, "agentgym eval ENV -n N")
        first = [ORACLE, *(f"{ORACLE} (repeat {k})" for k in range(2, repeat + 1)), NOOP]
        jobs = [plan(task_id, check) for task_id in ids for check in first]
        if on_planned:
            on_planned(len(jobs))
        trajectories = await pipeline.run(jobs)
        # The tasks as the env rendered them show which carry known-wrong solutions, and
        # the first episodes which tools each offers: what the probes need.
        jobs = [plan(task_id, f"{WRONG}{k + 1}") for task_id in ids
                for k in range(len(seen[task_id].wrong_solutions()) if task_id in seen else 0)]
        schemas = {t.task_id: {s["function"]["name"]: s["function"] for s in t.tools
                               if isinstance(s.get("function"), dict)}
                   for t in trajectories if t.tools}
        for task_id in ids:
            if task_id not in seen:
                continue  # no episode reached the policy: its oracle check says why
            offered = schemas.get(task_id, {})
            target = ProbeTarget(env_id, seen[task_id], tuple(offered), offered)
            for probe in probe_list:
                check = f"{PROBE}{probe.id}"
                try:
                    policy = _probe_policy(probe.plan(target))
                except Exception as e:  # a broken probe fails its own check, not the run
                    failures.append(CheckResult(task_id, check, False, reason=_short(
                        f"the probe itself failed: {type(e).__name__}: {e}"),
                        attack=probe.attack))
                    continue
                if policy is not None:
                    job = plan(task_id, check)
                    probe_policies[job[1]] = policy
                    jobs.append(job)
        if jobs:
            if on_planned:
                on_planned(len(jobs))
            trajectories += await pipeline.run(jobs)
    finally:
        await pipeline.close()
    order = {task_id: i for i, task_id in enumerate(ids)}
    trajectories.sort(key=lambda t: (order[t.task_id], t.episode))
    ran, skipped = [], []
    for trajectory in trajectories:
        result = results[trajectory.episode]
        skip = result.passed and (result.reason == NO_SOLUTION
                                  or result.reason.startswith(NOT_APPLICABLE))
        (skipped if skip else ran).append(result)
    ran += failures
    ran.sort(key=lambda r: order[r.task_id])  # stable: each task's checks in play order
    return ValidationReport(env_id, ids, ran, skipped, trajectories)


def probes_for(selection: bool | Sequence[str]) -> list[ExploitProbe]:
    """The registered exploit probes ``selection`` names: all (True), none (False), or
    those with the given ids (an unknown id names the known ones)."""
    from agentgym.core.plugins import plugin_host

    if selection is False:
        return []
    host = plugin_host()
    if selection is True:
        return [entry.item for entry in host.entries("probes").values()]
    return [host.get("probes", probe_id) for probe_id in selection]


# ---- policies and verdicts --------------------------------------------------------------------


def _probe_policy(plan: Plan) -> TextPolicy | None:
    """The text policy that plays a probe's plan: its turns replayed in order (then no-op
    turns until the episode ends), a text policy as it is; None when the probe does not
    apply. Anything else fails the probe's check with what it lacks."""
    if plan is None or isinstance(plan, TextPolicy):
        return plan
    if not isinstance(plan, Iterable):
        policy_level(plan)  # raises, naming what a text policy lacks
        raise PolicyContractError(f"a probe's plan is turns or a text-level policy, not the"
                                  f" token-level {type(plan).__name__}")
    turns = list(plan)
    return ScriptedPolicy(turns) if turns else None


class _Seeing(TextPolicy):
    """A text policy that also keeps each task it is shown (the env's rendered copy)."""

    def __init__(self, policy: TextPolicy | TokenPolicy, seen: dict[str, Task]):
        if not isinstance(policy, TextPolicy):
            raise PolicyContractError(f"validation replays text turns; {policy!r} is not a"
                                      " text-level policy")
        self.policy, self.seen = policy, seen
        self.whole_conversation = policy.whole_conversation
        self.takes_attempt = policy.takes_attempt

    def act(self, messages: list[dict[str, Any]], task: Task, **attempt: int) -> Any:
        self.seen.setdefault(task.id, task)
        return self.policy.act(messages, task, **attempt)


def _judge(trajectory: Trajectory, task: Task | None, require_solutions: bool) -> CheckResult:
    check, reward = trajectory.policy, trajectory.reward
    result = CheckResult(trajectory.task_id, check, False, reward, trajectory.finish_reason)
    if check.startswith(ORACLE) and task is not None and not task.solution:
        result.passed = not require_solutions
        result.reward, result.finish_reason, result.reason = None, "", NO_SOLUTION
    elif (trajectory.error or "").partition(":")[0].rpartition(".")[2] == \
            ProbeNotApplicable.__name__ and check.startswith(PROBE):
        result.passed, result.reward, result.finish_reason = True, None, ""
        result.reason = _short(NOT_APPLICABLE + trajectory.error.partition(": ")[2])
    elif trajectory.error and check.startswith(PROBE):
        # The attack broke its own episode: nothing was paid.
        result.passed = True
        result.reason = _short(f"crashed, not paid: {trajectory.error}")
    elif trajectory.error:
        result.reason = _short(f"crashed before grading: {trajectory.error}")
    elif check.startswith(PROBE):
        threshold = pass_threshold(task) if task is not None else 1.0
        result.passed = reward < threshold
        result.reason = "" if result.passed else _short(
            f"paid {reward:g} (pass threshold {threshold:g}) for no work: "
            + _metrics_reason(trajectory.metrics))
    else:
        result.passed = (reward >= 1.0 if check.startswith(ORACLE) else reward == 0.0
                         if check == NOOP else reward < 1.0)
        result.reason = "" if result.passed else _short(
            _tool_errors_reason(trajectory) + _metrics_reason(trajectory.metrics))
    return result


def _tool_errors_reason(trajectory: Trajectory) -> str:
    """For a failed check: how many tool calls failed and the first one's error, since a
    reference solution that failed an action explains its reward."""
    if not trajectory.tool_errors:
        return ""
    first = next((m["content"] for m in trajectory.messages if m.get("role") == "tool"
                  and str(m.get("content", "")).startswith("Error: ")), "")
    first = first.removeprefix("Error: ").splitlines()[0] if first else ""
    return f"{_count(trajectory.tool_errors, 'tool error')} (first: {first}); " if first \
        else f"{_count(trajectory.tool_errors, 'tool error')}; "


#: Characters of the end of a grader's log (``metrics["log_tail"]``) shown after its reason:
#: "reward.txt says 0" alone does not say which check failed.
LOG_CHARS = 160


def _metrics_reason(metrics: dict[str, Any]) -> str:
    """The grader's own reason when its metrics hold one (with the end of its log, when
    they hold that), else the metrics in brief."""
    if isinstance(metrics.get("reason"), str) and metrics["reason"]:
        log = " ".join(str(metrics.get("log_tail") or "").split())
        if not log:
            return metrics["reason"]
        return f"{metrics['reason']}; log: ...{log[-LOG_CHARS:]}"
    if not metrics:
        return "no metrics"
    parts = []
    for key, value in metrics.items():
        if isinstance(value, dict | list):
            value = f"<{len(value)} {'keys' if isinstance(value, dict) else 'items'}>"
        elif not isinstance(value, str):
            value = json.dumps(value, default=str)
        parts.append(f"{key}={value}")
    return " ".join(parts)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."
