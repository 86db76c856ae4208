"""The state of one episode, and the exception a tool raises to end it.

An :class:`Episode` is what rewards read when an episode ends: the task, the whole
conversation, what the agent submitted, counters the env keeps while it runs, and the
resources the env set up for it (its sandbox, browser page or store), by name.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import PicklableException

if TYPE_CHECKING:
    from agentgym.core.task import Task

Message = dict[str, Any]

#: When the current turn's time budget ends (``time.monotonic()``), while its tools run.
_turn_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "agentgym_turn_deadline", default=None)


def turn_time_left() -> float | None:
    """Seconds left of the current turn's time budget (``AgentEnv(turn_timeout_s=...)``),
    for a tool running now; None outside a turn or without a budget.

    A tool that runs commands passes ``min(its timeout, turn_time_left())`` as their
    timeout, so that it stops on its own, with its output, before the env has to cancel it.
    """
    deadline = _turn_deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def within_turn(timeout: float) -> float:
    """``timeout`` shortened to what is left of the current turn's budget (never below a
    tenth of a second, so that a command can still report)."""
    left = turn_time_left()
    return timeout if left is None else max(0.1, min(timeout, left))


class Submitted(PicklableException, Exception):  # a signal, not an error: hence no "Error" suffix
    """Raised by a tool to end the episode (``terminated``): the agent is done.

    Args:
        answer: what the agent submitted, kept as ``episode.submission`` for the reward.
        message: the tool's answer shown to the agent.
    """

    def __init__(self, answer: Any = None, message: str = "Submitted."):
        super().__init__(message)
        self.answer, self.message = answer, message


@dataclass
class Episode:
    """One episode's state, owned by its env and read by rewards.

    ``resources`` holds what the env set up for the episode, by name, for rewards that
    check state: ``"sandbox"`` for an episode's :class:`~agentgym.core.sandbox.Sandbox`
    (a convention every built-in plugin keeps), ``"page"`` for a browser page.
    """

    task: Task
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    submitted: bool = False
    submission: Any = None
    tool_calls: int = 0
    tool_errors: int = 0
    finish_reason: str | None = None
    reward: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    #: Which attempt of its task this episode is (0, 1, ... for k attempts; the rollout
    #: passes it as the reset option ``attempt``), and the group of attempts it belongs to
    #: (``group``: a GRPO group, the k attempts of pass@k).
    attempt: int = 0
    group: int = 0

    @property
    def done(self) -> bool:
        return self.finish_reason is not None
