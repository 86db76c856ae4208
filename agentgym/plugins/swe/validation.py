"""Task validity for SWE rows: the real grader must agree before a task ships.

A row (an SWE-bench instance dict) is valid in a sandbox backend when the grading path of
an episode, a :class:`DiffGrader` (the SWE env's
:meth:`~agentgym.plugins.swe.env.SWEEnv.grade_diff`: a fresh workspace built from the row
as the env builds it, then :func:`agentgym.plugins.swe.grading.grade`), scores

* its gold ``patch`` 1.0,
* no change (an empty diff) 0.0,
* a change that cannot fix anything (:data:`NO_OP_DIFF`: a new text file) 0.0. Grading
  short-cuts an empty diff to 0.0 without running a test; this one runs the tests on the
  unfixed code in the grader's order, which is where an order-dependent suite can pass
  without a fix.

:class:`TaskValidator` runs the three gradings at once and returns a :class:`Validation`:
:attr:`Validation.reason` is None for a valid row, else :data:`GOLD_BELOW_ONE` or
:data:`NO_CHANGE_ABOVE_ZERO`; :meth:`Validation.record` is what a valid row carries in its
``validation`` field::

    {"backend": "local", "gold": 1.0, "empty": 0.0, "no_op": 0.0, "grader": GRADER_VERSION}

:data:`GRADER_VERSION` names the package version and a digest of the grading code, so a
row says which grader accepted it (and a cache keyed by it is not reused once grading
changes).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agentgym import __version__
from agentgym.plugins.swe import grading

if TYPE_CHECKING:
    from agentgym.plugins.swe.grading import GradeResult
    from agentgym.plugins.swe.instance import SWEInstance

#: The grader that validates rows: agentgym's version and a digest of the grading code
#: (the grading module, what it restores from the task, and its pytest plugin).
GRADER_VERSION = (f"agentgym {__version__}, grading " + hashlib.sha256(b"".join(
    Path(grading.__file__).with_name(name).read_bytes()
    for name in ("grading.py", "grader_files.py", "pytest_report.py"))).hexdigest()[:12])
#: Why a row is rejected.
GOLD_BELOW_ONE = "gold patch < 1.0"
NO_CHANGE_ABOVE_ZERO = "no change > 0.0"
REASONS = (GOLD_BELOW_ONE, NO_CHANGE_ABOVE_ZERO)
#: A change that fixes nothing but makes the grader run the tests: one new text file.
NO_OP_FILE = "AGENTGYM_NO_OP.txt"
NO_OP_DIFF = (f"diff --git a/{NO_OP_FILE} b/{NO_OP_FILE}\n"
              "new file mode 100644\n"
              "--- /dev/null\n"
              f"+++ b/{NO_OP_FILE}\n"
              "@@ -0,0 +1 @@\n"
              "+This file changes no behaviour.\n")


@dataclass(frozen=True)
class Validation:
    """The grader's verdict on one row.

    Attributes:
        backend: the sandbox backend it was graded in.
        gold, empty, no_op: the rewards of the gold patch, of no change, of
            :data:`NO_OP_DIFF`.
        reason: None when valid, else :data:`GOLD_BELOW_ONE` or :data:`NO_CHANGE_ABOVE_ZERO`.
        detail: the grader's own reason for the failing grading ("" when valid).
        seconds: wall time of the three gradings (run at once).
    """

    backend: str
    gold: float
    empty: float
    no_op: float
    reason: str | None
    detail: str
    seconds: float

    def record(self) -> dict[str, Any]:
        """The row's ``validation`` field: deterministic (no timing), JSON-ready."""
        return {"backend": self.backend, "gold": self.gold, "empty": self.empty,
                "no_op": self.no_op, "grader": GRADER_VERSION}


class DiffGrader(Protocol):
    """What grades a diff as an episode of a row's task is graded (the SWE env is one):
    each call opens its own fresh workspace, so calls may overlap."""

    async def grade_diff(self, instance: SWEInstance, diff: str) -> GradeResult:
        """Grade ``diff`` applied to ``instance``'s repository at its base commit."""
        ...

    def close(self) -> None:
        """Release what grading holds."""
        ...


class TaskValidator:
    """Grades rows with the grader ``make_grader(first_row)`` gives: one grader, made at
    the first row, serves every later one (for the SWE env: its workspaces are built from
    each row, its project test envs checked once); :meth:`close` releases it. Calls may
    overlap.

    Args:
        make_grader: makes the grader from the first row.
        backend: the sandbox backend the grader runs in (recorded in each verdict).
    """

    def __init__(self, make_grader: Callable[[dict[str, Any]], DiffGrader],
                 backend: str = "local"):
        self.make_grader, self.backend = make_grader, backend
        self._grader: DiffGrader | None = None

    async def validate(self, row: dict[str, Any]) -> Validation:
        """Grade ``row``'s gold patch, no change and :data:`NO_OP_DIFF` at once."""
        from agentgym.plugins.swe.instance import SWEInstance

        if self._grader is None:
            self._grader = self.make_grader(row)
        grader = self._grader
        instance = SWEInstance.from_dict(row)
        started = time.monotonic()
        gold, empty, no_op = await asyncio.gather(
            grader.grade_diff(instance, instance.patch), grader.grade_diff(instance, ""),
            grader.grade_diff(instance, NO_OP_DIFF))
        seconds = time.monotonic() - started
        reason, detail = None, ""
        if gold.reward < 1.0:
            reason, detail = GOLD_BELOW_ONE, _why(gold)
        elif empty.reward > 0.0 or no_op.reward > 0.0:
            reason = NO_CHANGE_ABOVE_ZERO
            detail = _why(empty if empty.reward > 0.0 else no_op)
        return Validation(self.backend, gold.reward, empty.reward, no_op.reward, reason,
                          detail, seconds)

    async def close(self) -> None:
        grader, self._grader = self._grader, None
        if grader is not None:
            await asyncio.to_thread(grader.close)


def _why(result: GradeResult) -> str:
    return result.reason[:300]


__all__ = ["GOLD_BELOW_ONE", "GRADER_VERSION", "NO_CHANGE_ABOVE_ZERO", "NO_OP_DIFF", "REASONS",
           "DiffGrader", "TaskValidator", "Validation"]
