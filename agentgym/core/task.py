"""Tasks and where they come from.

A :class:`Task` is data: an id, the prompt, metadata the env and reward read, and an
optional reference solution. A solution is a list of assistant turns; each turn is text
already in the env's tool-call format, an assistant message, or a :class:`SolutionTurn`
(free text plus calls; ``{"content", "tool_calls"}`` in a task file) that the env renders
in whatever format it was made with. The ``oracle`` policy replays it.

**Known-wrong solutions** live in ``task.metadata["wrong_solutions"]``
(:data:`WRONG_SOLUTIONS`): a list of solutions, each a list of turns in the same forms as
``solution``, each expected to score *less than* 1.0 (an answer off by one, a patch that
deletes the failing tests instead of fixing the code). They are optional; any plugin can
provide them for any task. :meth:`Task.wrong_solutions` reads them, :meth:`Task.rendered`
writes them in the env's tool-call format as it does the solution, and ``agentgym
validate`` plays each one through the env's grader next to the oracle (must score 1.0) and
noop (must score 0.0).

A :class:`TaskSource` is a sized, indexable sequence of tasks that can also be looked up by
id. Sources here: :class:`TaskList` (in memory), :func:`load_tasks` (a JSONL or JSON file
of :meth:`Task.to_dict` rows), and :class:`GeneratedTasks` (a deterministic generator).
:func:`split_by_id` holds tasks out of a fixed list for evaluation (an env's ``split``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentgym.core.errors import InvalidArgumentError, MissingFileError, UnknownIdError
from agentgym.core.parsers import ToolCall

if TYPE_CHECKING:
    from agentgym.core.parsers import ToolCallParser

Message = dict[str, Any]
T = TypeVar("T")
#: The splits :func:`split_by_id` knows.
SPLITS = ("train", "test")
#: The metadata key of a task's known-wrong solutions (see the module docstring).
WRONG_SOLUTIONS = "wrong_solutions"


@dataclass
class SolutionTurn:
    """A format-neutral assistant turn of a reference solution.

    Args:
        tool_calls: the calls the turn makes (name and arguments, no ids).
        content: the turn's text besides its calls.
    """

    tool_calls: list[ToolCall]
    content: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in self.tool_calls],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SolutionTurn:
        calls = [ToolCall(c["name"], dict(c.get("arguments", {}))) for c in data["tool_calls"]]
        return cls(tool_calls=calls, content=data.get("content", ""))


@dataclass
class Task:
    """One task: what the agent is asked, what the grader needs, how it can be solved.

    Args:
        id: unique within its task set (``options={"task_id": id}`` at reset picks it).
        prompt: what the agent is asked: a string (one user message) or chat messages.
        metadata: what the env and its reward read (an expected answer, a repository and
            its tests), JSON-serialisable; ``"wrong_solutions"`` lists known-wrong
            solutions (:meth:`wrong_solutions`).
        solution: the reference solution, a list of assistant turns (text in the env's
            tool-call format, assistant messages or :class:`SolutionTurn`); the
            ``oracle`` policy replays it and must score 1.0. None when the task has none.
    """

    id: str
    prompt: str | list[Message]
    metadata: dict[str, Any] = field(default_factory=dict)
    solution: list[str | Message | SolutionTurn] | None = None

    def prompt_messages(self) -> list[Message]:
        """The prompt as chat messages (a string prompt is one user message)."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [dict(m) for m in self.prompt]

    def wrong_solutions(self) -> list[list[str | Message | SolutionTurn]]:
        """The task's known-wrong solutions (``metadata["wrong_solutions"]``; none when
        absent), their ``{"content", "tool_calls"}`` turns read as :class:`SolutionTurn`.

        Raises:
            InvalidArgumentError: the entry is not a list of solutions (lists of turns).
        """
        wrong = self.metadata.get(WRONG_SOLUTIONS)
        if wrong is None:
            return []
        if not isinstance(wrong, list) or not all(isinstance(s, list) for s in wrong):
            raise InvalidArgumentError(
                f"task {self.id!r}: metadata[{WRONG_SOLUTIONS!r}] must be a list of solutions,"
                f" each a list of turns like 'solution', got {wrong!r:.200}; e.g."
                ' [["<tool_call>{...}</tool_call>"], [{"content": "", "tool_calls": [...]}]]')
        return [_turns_from_data(solution) for solution in wrong]

    def rendered(self, parser: ToolCallParser) -> Task:
        """A copy whose solution turns, and known-wrong solutions' turns, are written in
        ``parser``'s format."""
        wrong = self.wrong_solutions()
        if self.solution is None and not wrong:
            return self
        metadata = self.metadata
        if wrong:
            metadata = {**metadata, WRONG_SOLUTIONS: [_render(s, parser) for s in wrong]}
        solution = None if self.solution is None else _render(self.solution, parser)
        return Task(self.id, self.prompt, metadata, solution)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        metadata = self.metadata
        if isinstance(metadata.get(WRONG_SOLUTIONS), list):
            metadata = {**metadata, WRONG_SOLUTIONS: [
                _turns_to_data(s) if isinstance(s, list) else s
                for s in metadata[WRONG_SOLUTIONS]]}
        data: dict[str, Any] = {"id": self.id, "prompt": self.prompt, "metadata": metadata}
        if self.solution is not None:
            data["solution"] = _turns_to_data(self.solution)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        if "id" not in data or "prompt" not in data:
            raise InvalidArgumentError(
                f"a task needs an 'id' and a 'prompt'; got the keys {sorted(data)}")
        solution = data.get("solution")
        if solution is not None:
            solution = _turns_from_data(solution)
        return cls(str(data["id"]), data["prompt"], dict(data.get("metadata") or {}), solution)


def _turns_from_data(turns: list[Any]) -> list[str | Message | SolutionTurn]:
    """Solution turns as a task file holds them: ``{"content", "tool_calls"}`` dicts (not
    assistant messages, which have a role) become :class:`SolutionTurn`."""
    return [
        SolutionTurn.from_dict(t) if isinstance(t, dict) and "tool_calls" in t and "role" not in t
        else t
        for t in turns
    ]


def _turns_to_data(turns: list[Any]) -> list[Any]:
    return [t.to_dict() if isinstance(t, SolutionTurn) else t for t in turns]


def _render(turns: list[Any], parser: ToolCallParser) -> list[str | Message]:
    return [parser.render(t.content, t.tool_calls) if isinstance(t, SolutionTurn) else t
            for t in turns]


class TaskSource(Sequence[Task]):
    """A sized, indexable sequence of tasks that can also be looked up by id."""

    def get(self, task_id: str) -> Task:
        """The task with this id, or :class:`UnknownIdError` suggesting close ids."""
        index = self._index().get(task_id)
        if index is None:
            raise UnknownIdError("task", task_id, self._index(), "agentgym eval ENV -n N")
        return self[index]

    def ids(self) -> list[str]:
        return list(self._index())

    def _index(self) -> dict[str, int]:
        if getattr(self, "_ids", None) is None:
            self._ids = {task.id: i for i, task in enumerate(self)}
        return self._ids

    def __iter__(self) -> Iterator[Task]:
        return (self[i] for i in range(len(self)))


class TaskList(TaskSource):
    """Tasks held in memory."""

    def __init__(self, tasks: Sequence[Task]):
        if not tasks:
            raise InvalidArgumentError("a task source needs at least one task; got an empty list")
        self._tasks = list(tasks)
        self._ids = None
        if len(self._index()) < len(self._tasks):  # a task_id would pick one of several
            seen: set[str] = set()
            twice = sorted({t.id for t in self._tasks if t.id in seen or seen.add(t.id)})
            raise InvalidArgumentError(
                f"task ids must be unique, and {len(twice)} repeat:"
                f" {', '.join(map(repr, twice[:5]))}{', ...' if len(twice) > 5 else ''};"
                " give every task its own id (episodes, reports and task_id name a task by"
                " it)")

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, index: int) -> Task:  # type: ignore[override]
        return self._tasks[index]


class GeneratedTasks(TaskSource):
    """``size`` tasks made on demand by ``make(index)``; ``make`` must be deterministic.

    ``task_id(index)``, when given, is the id ``make(index)`` will have: looking a task up
    by id then costs one ``make``, where without it the first lookup makes every task.
    """

    def __init__(self, size: int, make: Callable[[int], Task],
                 task_id: Callable[[int], str] | None = None):
        if size < 1:
            raise InvalidArgumentError(f"a generated task source needs size >= 1, got {size}")
        self._size, self._make, self._task_id, self._ids = size, make, task_id, None

    def _index(self) -> dict[str, int]:
        if self._ids is None and self._task_id is not None:
            self._ids = {self._task_id(i): i for i in range(self._size)}
        return super()._index()

    def get(self, task_id: str) -> Task:
        task = super().get(task_id)
        if task.id != task_id:
            raise InvalidArgumentError(
                f"generated task {task_id!r} came out with id {task.id!r}: the source's"
                " task_id(index) must give the id make(index) gives")
        return task

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int) -> Task:  # type: ignore[override]
        if not -self._size <= index < self._size:
            raise IndexError(f"task index {index} out of range for {self._size} tasks")
        return self._make(index % self._size)


def load_tasks(path: str | Path) -> TaskList:
    """Read tasks from a JSONL file (one :meth:`Task.to_dict` row a line) or a JSON list."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(
            f"Task file {str(path)!r} does not exist",
            "Point the env at an existing JSONL file of tasks, e.g."
            " agentgym.make(ENV, tasks='tasks.jsonl') or `-e tasks=tasks.jsonl` on the CLI",
        )
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return TaskList([Task.from_dict(row) for row in rows])
    except (json.JSONDecodeError, ValueError, TypeError, KeyError) as e:
        raise InvalidArgumentError(
            f"cannot read tasks from {str(path)!r}: {e}. A task file holds one JSON object"
            " a line (Task.to_dict: at least 'id' and 'prompt'), or a .json list of them"
        ) from e


def split_by_id(items: Sequence[T], split: str, key: Callable[[T], str],
                test_share: float = 0.25) -> list[T]:
    """The items of ``split`` (``"train"`` or ``"test"``): an item is ``"test"`` when a hash
    of its id (``key(item)``) falls in the first ``test_share`` of the hash range. The same
    id is always on the same side, whatever else the list holds, so adding tasks never
    moves one across; order is kept."""
    if split not in SPLITS:
        raise InvalidArgumentError(f"split={split!r}: choose 'train' or 'test' (or None for"
                                   " every task)")
    if not 0 < test_share < 1:
        raise InvalidArgumentError(f"test_share={test_share!r} must be between 0 and 1")

    def held_out(item: T) -> bool:
        digest = hashlib.sha256(key(item).encode()).digest()
        return int.from_bytes(digest[:8], "big") < test_share * 2**64

    chosen = [item for item in items if held_out(item) == (split == "test")]
    if not chosen:
        raise InvalidArgumentError(
            f"split={split!r} holds none of these {len(items)} tasks (test_share="
            f"{test_share}): use split=None, or more tasks")
    return chosen
