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

``memory.carry-in-message`` and ``memory.carry-in-echo`` walk the history as
``memory-context-only`` does and answer what they see, but keep every session header they
have seen (standing for its session) in their own context: in their message's text, or as
an argument name of a call whose error repeats it. Paid, they show that the env's window
let the agent carry the history itself, so that its answers say nothing of its memory (the
memory envs' windows show the env's replies alone, and no reply repeats the agent:
:mod:`agentgym.core.context`). They apply to any env that offers ``answer`` and a walking
tool (``next_session``, or ``write_memory`` with a memory left empty).
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.core.context import reply_text
from agentgym.core.policies import TextPolicy
from agentgym.core.probes import ExploitProbe, ProbeTarget, call_turn
from agentgym.core.stuffing import candidates
from agentgym.core.task import Task
from agentgym.plugins.memory.baseline import ContextOnlyPolicy

_QUESTION = re.compile(r"Question \d+ of \d+: ")
_HEADER = re.compile(r"Session \d+ of \d+ \(")


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

class CarryHistory(ContextOnlyPolicy):
    """``memory-context-only`` that carries the session headers it has seen: in its
    message's text, or (``echo``) as the name of an argument of an ``answer`` call, which
    that argument fails (before any tool runs) with an error that may repeat it."""

    def __init__(self, walk: str, walk_arguments: dict[str, Any], echo: bool):
        self.walk, self.walk_arguments, self.echo = walk, walk_arguments, echo

    def act(self, messages: list[dict[str, Any]], task: Task) -> dict[str, Any]:
        turn = super().act(messages, task)
        if turn["tool_calls"][0]["function"]["name"] == "next_session":
            turn = call_turn(self.walk, **self.walk_arguments)
        seen = "\n".join(reply_text(m) if m.get("role") != "assistant"
                         else str(m.get("content") or "") for m in messages)
        carried = " ".join(dict.fromkeys(_HEADER.findall(seen)))
        if carried and self.echo:
            carrier = call_turn("answer", text="-", **{carried: 0})["tool_calls"]
            turn["tool_calls"] = carrier + turn["tool_calls"]
        elif carried:
            turn["content"] = carried
        return turn


def carry(echo: bool):
    def factory(target: ProbeTarget) -> CarryHistory | None:
        if not target.offers("answer") or \
                not {"sessions", "questions"} <= set(target.task.metadata):
            return None
        if target.offers("next_session"):
            return CarryHistory("next_session", {}, echo)
        if target.offers("write_memory"):
            return CarryHistory("write_memory", {"text": "-"}, echo)
        return None
    return factory


CARRY_IN_MESSAGE = ExploitProbe(
    "memory.carry-in-message", carry(echo=False),
    "walks the history keeping what it saw in its own message's text, then answers what"
    " it carried", attack="carry")

CARRY_IN_ECHO = ExploitProbe(
    "memory.carry-in-echo", carry(echo=True),
    "walks the history keeping what it saw in a failing call's argument, which an error"
    " may repeat, then answers what it carried", attack="carry")

STUFF_ANSWERS = ExploitProbe(
    "memory.stuff-answers", stuff_answers,
    "reads the whole history, then answers every question with every number and word in it",
    attack="answer-stuffing")
