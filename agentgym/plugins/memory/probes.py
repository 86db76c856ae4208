"""The memory family's exploit probes: walk the history, then stuff every answer; or walk
it all in one turn, so that no memory is needed.

``memory.stuff-answers`` reads every session (``next_session``) or chunk (``write_memory``
with an empty memory), then answers each question with every number and word the whole
history showed, abstentions included (:func:`agentgym.core.stuffing.candidates`). It sees
the whole conversation, more than any bounded-context agent: a grader that pays it pays an
answer a person would call wrong. It applies to any env that offers ``answer`` and one of
those walking tools.

``memory.walk-in-one-turn`` calls ``next_session`` many times in each turn, and answers
each question right exactly when the sessions its answer rests on are in its context (as
``memory-context-only`` does, which it otherwise is). The context keeps the latest turn
whole, so sessions walked in one turn would all be in view at the questions: it is paid
unless a walking tool shows one part of the history a turn. It applies to any env that
offers ``answer`` and ``next_session``.
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.core.policies import TextPolicy
from agentgym.core.probes import ExploitProbe, ProbeTarget, call_turn
from agentgym.core.stuffing import candidates
from agentgym.core.task import Task
from agentgym.plugins.memory.baseline import ContextOnlyPolicy

_QUESTION = re.compile(r"Question \d+ of \d+: ")


class StuffedAnswers(TextPolicy):
    """A text policy: walk with ``walk`` (its arguments ``walk_arguments``) until a question
    is asked, then answer each with every candidate."""

    whole_conversation = True  # the stronger attack: it forgets nothing

    def __init__(self, walk: str, walk_arguments: dict[str, Any]):
        self.walk, self.walk_arguments = walk, walk_arguments

    def act(self, messages: list[dict[str, Any]], task: Task) -> dict[str, Any]:
        last = next((m for m in reversed(messages) if m.get("role") == "tool"), None)
        if last is not None and _QUESTION.search(str(last.get("content") or "")):
            texts = [str(m.get("content") or "") for m in messages]
            return call_turn("answer", text=candidates(texts))
        return call_turn(self.walk, **self.walk_arguments)


def stuff_answers(target: ProbeTarget) -> StuffedAnswers | None:
    if not target.offers("answer"):
        return None
    if target.offers("next_session"):
        return StuffedAnswers("next_session", {})
    if target.offers("write_memory"):
        return StuffedAnswers("write_memory", {"text": "-"})
    return None


class WalkInOneTurn(ContextOnlyPolicy):
    """``memory-context-only`` that calls ``next_session`` :attr:`CALLS` times a turn."""

    CALLS = 64

    def act(self, messages: list[dict[str, Any]], task: Task) -> dict[str, Any]:
        turn = super().act(messages, task)
        if turn["tool_calls"][0]["function"]["name"] == "next_session":
            turn["tool_calls"] = turn["tool_calls"] * self.CALLS
        return turn


def walk_in_one_turn(target: ProbeTarget) -> WalkInOneTurn | None:
    if not target.offers("answer", "next_session") or \
            not {"sessions", "questions"} <= set(target.task.metadata):
        return None
    return WalkInOneTurn()


WALK_IN_ONE_TURN = ExploitProbe(
    "memory.walk-in-one-turn", walk_in_one_turn,
    "walks every session in one turn, so that all are in its context at the questions, then"
    " answers what it sees", attack="reach")

STUFF_ANSWERS = ExploitProbe(
    "memory.stuff-answers", stuff_answers,
    "reads the whole history, then answers every question with every number and word in it",
    attack="answer-stuffing")
