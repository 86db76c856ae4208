"""Text-level policies: given the conversation so far, write the next assistant turn.

A text-level policy has one method, ``act(messages, task) -> str | message`` (it may be a
coroutine). It serves evaluation and demonstrations; token-level policies for training
build on the same loop. Built in (registered by the ``core`` plugin):

* ``oracle``: replays the task's reference solution, one turn per step, through the same
  ``step`` path a model's turns take. For an env whose tasks have solutions it scores 1.0:
  that validates the tasks and the grader.
* ``noop``: answers every turn with text that calls no tool and submits nothing; it
  scores 0.0 wherever the grader is sound.
* ``scripted:FILE.json``: replays a fixed list of turns from a JSON file
  (:class:`ScriptedPolicy`, also in :mod:`agentgym.testing`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentgym.core.errors import AgentGymError
from agentgym.core.task import Task

Message = dict[str, Any]
Turn = str | Message


@runtime_checkable
class TextPolicy(Protocol):
    """Writes the next assistant turn from the conversation so far."""

    def act(self, messages: list[Message], task: Task) -> Any:
        """Return the next turn (text or an assistant message), or an awaitable of it."""
        ...


def _turn_index(messages: list[Message]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


class OraclePolicy:
    """Replays ``task.solution``; the env renders it in its own tool-call format."""

    def act(self, messages: list[Message], task: Task) -> Turn:
        if not task.solution:
            raise AgentGymError(
                f"task {task.id!r} has no reference solution, so the oracle policy cannot play"
                " it; use tasks that carry a 'solution' or another policy"
            )
        index = _turn_index(messages)
        if index >= len(task.solution):
            return "The reference solution has no more turns."
        return task.solution[index]


class NoopPolicy:
    """Calls no tool and submits nothing: the floor every grader must score 0."""

    def act(self, messages: list[Message], task: Task) -> Turn:
        return "I will not do anything."


class ScriptedPolicy:
    """Plays fixed turns in order, or a function of the conversation.

    Args:
        turns: the turns to play, or ``f(messages, task) -> turn``.
        repeat_last: after the last turn, keep playing it (otherwise fall back to noop).
    """

    def __init__(
        self,
        turns: Sequence[Turn] | Callable[[list[Message], Task], Turn],
        repeat_last: bool = False,
    ):
        self.turns, self.repeat_last = turns, repeat_last

    def act(self, messages: list[Message], task: Task) -> Turn:
        if callable(self.turns):
            return self.turns(messages, task)
        index = _turn_index(messages)
        if index < len(self.turns):
            return self.turns[index]
        if self.repeat_last and self.turns:
            return self.turns[-1]
        return NoopPolicy().act(messages, task)

    @classmethod
    def from_file(cls, path: str | None) -> ScriptedPolicy:
        """``scripted:FILE.json``: a JSON list of turns (strings or assistant messages)."""
        if not path:
            raise AgentGymError("the scripted policy needs a file: --policy scripted:turns.json")
        try:
            turns = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise AgentGymError(f"cannot read scripted turns from {path!r}: {e}") from e
        if not isinstance(turns, list):
            kind = type(turns).__name__
            raise AgentGymError(f"{path!r} must hold a JSON list of turns, got a {kind}")
        return cls(turns)
