"""The state of one episode, and the exception a tool raises to end it.

An :class:`Episode` is what rewards read when an episode ends: the task, the whole
conversation, what the agent submitted, and counters the env keeps while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentgym.core.errors import PicklableException

if TYPE_CHECKING:
    from agentgym.core.env import AgentEnv
    from agentgym.core.task import Task

Message = dict[str, Any]


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
    """One episode's state, owned by its env and read by rewards."""

    task: Task
    env: AgentEnv
    messages: list[Message] = field(default_factory=list)
    turn: int = 0
    submitted: bool = False
    submission: Any = None
    tool_calls: int = 0
    tool_errors: int = 0
    finish_reason: str | None = None
    reward: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None
