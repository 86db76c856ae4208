"""Task validity for SWE rows: the real grader must agree before a task ships.

A row (an SWE-bench instance dict) is valid in a sandbox backend when the grading path of
an episode, :meth:`SWEEnv.grade_diff <agentgym.plugins.swe.env.SWEEnv.grade_diff>` (a
fresh workspace built from the row as the env builds it, then
:func:`agentgym.plugins.swe.grading.grade`), scores

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym import __version__
from agentgym.plugins.swe import grading

if TYPE_CHECKING:
    from agentgym.plugins.swe.env import SWEEnv
    from agentgym.plugins.swe.grading import GradeResult

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


class TaskValidator:
    """Grades rows as the ``swe-synth`` env on ``backend`` grades episodes.

    One env is made at the first row and serves every later one (its workspaces are built
    from each row, its project test envs checked once); :meth:`close` releases it. Calls
    may overlap: each grading opens its own fresh workspace.

    Args:
        backend: the sandbox backend the rows will be graded in.
        cache: the SWE cache the rows' repositories and test envs come from.
        test_timeout_s: the limit of one grading's test run.
    """

    def __init__(self, backend: str = "local", cache: Path | None = None,
                 test_timeout_s: float = 1800.0):
        self.backend, self.cache, self.test_timeout_s = backend, cache, test_timeout_s
        self._env: SWEEnv | None = None

    def _env_for(self, row: dict[str, Any]) -> SWEEnv:
        if self._env is None:
            from agentgym.plugins.swe.env import SWEEnv

            self._env = SWEEnv([row], backend=self.backend, cache=self.cache,
                               test_timeout_s=self.test_timeout_s, env_id="swe-synth")
        return self._env

    async def validate(self, row: dict[str, Any]) -> Validation:
        """Grade ``row``'s gold patch, no change and :data:`NO_OP_DIFF` at once."""
        from agentgym.plugins.swe.instance import SWEInstance

        env = self._env_for(row)
        instance = SWEInstance.from_dict(row)
        started = time.monotonic()
        gold, empty, no_op = await asyncio.gather(
            env.grade_diff(instance, instance.patch), env.grade_diff(instance, ""),
            env.grade_diff(instance, NO_OP_DIFF))
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
        env, self._env = self._env, None
        if env is not None:
            await asyncio.to_thread(env.close)


def _why(result: GradeResult) -> str:
    return result.reason[:300]


__all__ = ["GOLD_BELOW_ONE", "GRADER_VERSION", "NO_CHANGE_ABOVE_ZERO", "NO_OP_DIFF", "REASONS",
           "TaskValidator", "Validation"]
