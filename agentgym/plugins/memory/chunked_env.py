"""``memory-chunked``: read a long document chunk by chunk into a bounded memory, then
answer from the memory alone (the MemAgent recipe).

The document is a memory task's history written out as a transcript (each session's
header, then its turns), cut into chunks of about ``chunk_tokens`` tokens at line breaks.
Every observation shows the questions to be answered at the end, the agent's memory as it
stands, and the next chunk. The agent's one move per chunk is ``write_memory(text)``: the
whole new memory, at most ``memory_tokens`` tokens (estimated at 4 characters a token; a
longer one is refused with the reason, and the chunk stays). The agent's context is only
the env's latest view (``info["context_start"]``), and never its own messages
(``context_replies_only``), so whatever it did not write into its memory is gone. After
the last chunk, the questions come one at a time, with the memory shown, and
``answer(text)`` answers each.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from agentgym.core.context import CHARS_PER_TOKEN
from agentgym.core.env_info import ExtraInfo
from agentgym.core.episode import Episode, Message
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.parsers import ToolCall
from agentgym.core.task import SolutionTurn, Task, TaskSource
from agentgym.core.tools import ToolError, tool
from agentgym.plugins.memory.base import MemoryTaskEnv, task_content
from agentgym.plugins.memory.generator import ABSTAIN_ANSWER, note_of, render_session

SYSTEM_PROMPT = f"""\
You will read a long document, one chunk at a time, and then answer questions about it.
You cannot see earlier chunks again: all you keep is your memory, a text of limited
length that you rewrite after each chunk with write_memory(text) (the whole new memory,
keeping what still matters). Each step shows the questions, your memory and the next
chunk. After the last chunk, answer each question with answer(text): the answer only,
short. If the document never said, answer "{ABSTAIN_ANSWER}"."""


def transcript(sessions: list[dict[str, Any]]) -> tuple[str, list[list[int]]]:
    """The sessions as one document, and the character offset of each session's turns."""
    parts, offsets, at = [], [], 0
    for number in range(len(sessions)):
        lines = render_session(sessions, number).split("\n")
        header, turns = lines[0], lines[1:]
        at += len(header) + 1
        starts = []
        for line in turns:
            starts.append(at)
            at += len(line) + 1
        offsets.append(starts)
        parts.append("\n".join(lines) + "\n")
    return "".join(parts), offsets


def chunk_starts(document: str, chunk_chars: int) -> list[int]:
    """Where each chunk starts: about ``chunk_chars`` characters each, cut after a line
    break when one falls in the chunk's second half, else at ``chunk_chars``."""
    starts, at = [0], 0
    while len(document) - at > chunk_chars:
        end = at + chunk_chars
        newline = document.rfind("\n", at + chunk_chars // 2, end)
        at = newline + 1 if newline >= 0 else end
        starts.append(at)
    return starts


class MemoryChunkedEnv(MemoryTaskEnv):
    """Read a document in chunks into a bounded memory; answer from the memory alone.

    Args:
        chunk_tokens: the size of a chunk, in tokens (estimated; 4 characters a token).
        memory_tokens: the most the memory may hold, in tokens (estimated).
        **kwargs: the tasks and limits of
            :class:`~agentgym.plugins.memory.base.MemoryTaskEnv` (``source``,
            ``sessions`` (here 200 by default), ``num_tasks``, ``seed``, ``questions``,
            ``tasks``, ``extra_turns``, ``parser``, ``turn_timeout_s``, ``render_mode``).
    """

    system_prompt = SYSTEM_PROMPT
    view_tools = ("write_memory", "answer")

    def __init__(self, chunk_tokens: int = 1024, memory_tokens: int = 512,
                 sessions: int = 200, **kwargs: Any):
        for name, value, least in (("chunk_tokens", chunk_tokens, 64),
                                   ("memory_tokens", memory_tokens, 32)):
            if not isinstance(value, int) or value < least:
                raise InvalidArgumentError(f"{name}={value!r}: give a number of tokens >="
                                           f" {least}")
        super().__init__(sessions=sessions, **kwargs)
        self.chunk_tokens, self.memory_tokens = chunk_tokens, memory_tokens
        self.tasks = WithChunkedSolutions(self.tasks, chunk_tokens, memory_tokens)
        self._chunks: list[str] = []
        self._read = 0
        self._memory = ""

    # ---- the episode ----------------------------------------------------------------------

    async def setup_episode(self, task: Task) -> None:
        await super().setup_episode(task)
        self._chunks = chunks_of(task, self.chunk_tokens)
        self._read, self._memory = 1, ""
        # One turn a chunk (rewrite the memory) and one a question.
        self.max_turns = len(self._chunks) + len(task_content(task)[1]) + self.extra_turns

    def initial_messages(self, task: Task) -> list[Message]:
        chunks = chunks_of(task, self.chunk_tokens)
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self._view(task, "", 0, chunks)}]

    async def extra_info(self, episode: Episode) -> ExtraInfo:
        """After each step, the agent's context is the env's latest view (questions,
        memory and chunk, or the current question) and the replies after it
        (:meth:`view_start`)."""
        if episode.turn == 0:
            return {}
        return {"context_start": self.view_start(episode.messages)}

    @tool
    def write_memory(self, text: str) -> str:
        """Replace your memory with ``text`` and read the next chunk (after the last one:
        the first question).

        Args:
            text: Your whole new memory: what you need from the document so far.
        """
        if self.asking:
            raise ToolError("the document is read and your memory is final; answer the"
                            f" question with answer(text): {self.question_text()}")
        text = str(text).strip()
        limit = self.memory_tokens * CHARS_PER_TOKEN
        if len(text) > limit:
            raise ToolError(f"the memory may hold {self.memory_tokens} tokens (about {limit}"
                            f" characters); yours has {len(text)} characters: shorten it and"
                            " call write_memory again")
        self.walk_once_per_turn("write_memory", "chunk")
        self._memory = text
        task = self.current_task()
        if self._read < len(self._chunks):
            self._read += 1
            return self._view(task, text, self._read - 1, self._chunks)
        return "The document is read.\n\n" + self.start_questions()

    def question_text(self, index: int | None = None) -> str:
        # The context holds only this turn: each question comes with the memory.
        return f"Your memory:\n{self._memory or '(empty)'}\n\n{super().question_text(index)}"

    def not_asking_yet(self) -> str:
        return (f"the questions come after the last chunk; call write_memory(text) to read on"
                f" ({len(self._chunks) - self._read} chunks left)")

    # ---- internals ------------------------------------------------------------------------

    def _view(self, task: Task, memory: str, index: int, chunks: list[str]) -> str:
        questions = task_content(task)[1]
        asked = "\n".join(f"{i + 1}. {q['question']}" for i, q in enumerate(questions))
        return (f"Questions you will answer at the end:\n{asked}\n\nYour memory:\n"
                f"{memory or '(empty)'}\n\nChunk {index + 1} of {len(chunks)}:\n"
                f"{chunks[index]}")


class WithChunkedSolutions(TaskSource):
    """``tasks`` with their reference solutions for this env's chunking (a memory task's
    own solution is for ``memory-sessions``)."""

    def __init__(self, tasks: TaskSource, chunk_tokens: int, memory_tokens: int):
        self.inner, self.chunk_tokens, self.memory_tokens = tasks, chunk_tokens, memory_tokens

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> Task:  # type: ignore[override]
        return self._rewrite(self.inner[index])

    def get(self, task_id: str) -> Task:
        return self._rewrite(self.inner.get(task_id))

    def ids(self) -> list[str]:
        return self.inner.ids()

    def _rewrite(self, task: Task) -> Task:
        return dataclasses.replace(task, solution=chunked_solution(
            task, self.chunk_tokens, self.memory_tokens))


def chunks_of(task: Task, chunk_tokens: int) -> list[str]:
    """The task's document cut into chunks (module docstring)."""
    document, _ = transcript(task_content(task)[0])
    starts = chunk_starts(document, chunk_tokens * CHARS_PER_TOKEN)
    return [document[a:b] for a, b in zip(starts, [*starts[1:], len(document)], strict=True)]


def chunked_solution(task: Task, chunk_tokens: int, memory_tokens: int) -> list[SolutionTurn]:
    """The reference solution: at each chunk, the memory so far plus each fact a question
    needs that the chunk holds (dated); then the answers."""
    sessions, questions = task_content(task)
    document, offsets = transcript(sessions)
    starts = chunk_starts(document, chunk_tokens * CHARS_PER_TOKEN)
    found: dict[int, list[str]] = {}
    for question in questions:
        for item in question["evidence"]:
            turns = sessions[item["session"]]["turns"]
            line = next(i for i, t in enumerate(turns)
                        if item["text"][1:].lower() in t["content"].lower())
            chunk = bisect.bisect_right(starts, offsets[item["session"]][line]) - 1
            found.setdefault(chunk, []).append(note_of(sessions[item["session"]], item["text"]))
    memory: list[str] = []
    turns = []
    for chunk in range(len(starts)):
        memory += [n for n in dict.fromkeys(found.get(chunk, ())) if n not in memory]
        turns.append(SolutionTurn([ToolCall("write_memory", {"text": _fit(memory,
                                                                            memory_tokens)})]))
    turns += [SolutionTurn([ToolCall("answer", {"text": q["answer"]})]) for q in questions]
    return turns


def _fit(notes: list[str], memory_tokens: int) -> str:
    limit = memory_tokens * CHARS_PER_TOKEN
    share = max(40, limit // max(1, len(notes)) - 1)
    text = "\n".join(n if len(n) <= share else n[:share - 3] + "..." for n in notes)
    return text[:limit]
