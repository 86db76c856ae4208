"""``assert_valid``: the ``agentgym validate`` checks, as an assertion for a plugin's tests.

::

    from agentgym.testing import assert_valid

    def test_tasks_are_valid():
        assert_valid("my-env")                      # the first 10 tasks
        assert_valid("my-env", n=None, split="test")  # every task of the test split

Each checked task's reference solution must score 1.0, doing nothing 0.0, each
known-wrong solution (``task.metadata["wrong_solutions"]``) below 1.0 and every exploit
probe that applies (:mod:`agentgym.core.probes`) below the task's pass threshold, by the
env's own grader (:mod:`agentgym.rollout.validate`). A failure raises :class:`TaskValidityError`
listing every failed check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym.core.errors import AgentGymError
from agentgym.rollout.validate import DEFAULT_TASKS, ValidationReport, validate


class TaskValidityError(AgentGymError, AssertionError):
    """Checks of ``agentgym validate`` failed; ``report`` holds them all."""

    def __init__(self, report: ValidationReport):
        self.report = report
        lines = [f"  {r.task_id} [{r.check}] reward={r.reward} finish={r.finish_reason}:"
                 f" {r.reason}" for r in report.failed]
        super().__init__("\n".join([report.summary(), *lines]))


def assert_valid(env_id: str, *, n: int | None = DEFAULT_TASKS, backend: str | None = None,
                 require_solutions: bool = False, probes: bool | Sequence[str] = True,
                 repeat: int = 1, task_ids: Sequence[str] | None = None,
                 concurrency: int = 4, **env_kwargs: Any) -> ValidationReport:
    """Validate the first ``n`` tasks of ``env_id`` (all with ``n=None``; or ``task_ids``)
    made with ``env_kwargs``, in ``backend`` when given, as ``agentgym validate`` does:
    with every exploit probe that applies (``probes``: True, False, or probe ids) and the
    oracle played ``repeat`` times. Return the report, or raise
    :class:`TaskValidityError` when a check fails. Call it from synchronous code (a test
    function), not from inside a running event loop."""
    report = validate(env_id, env_kwargs, task_ids, n=n, backend=backend,
                      require_solutions=require_solutions, probes=probes, repeat=repeat,
                      concurrency=concurrency)
    if not report.ok:
        raise TaskValidityError(report)
    return report
