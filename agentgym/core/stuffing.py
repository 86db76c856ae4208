"""The built-in answer-stuffing probe: one answer that lists every candidate.

A grader that checks an answer by "it mentions the expected value" pays an agent that
mentions everything. :data:`STUFF_ANSWER` applies to any env whose ``submit`` or
``answer`` tool takes one required argument: it answers once with every number and word
the conversation showed (and the usual abstentions), so a grader that pays it accepts
answers a person would call wrong. Families whose answers come after a walk (memory
sessions, web pages) ship probes of their own that collect candidates on the way.
"""

from __future__ import annotations

import re
from typing import Any

from agentgym.core.policies import TextPolicy
from agentgym.core.probes import ExploitProbe, ProbeTarget, call_turn
from agentgym.core.task import Task

#: Tools that take a final answer, by the names envs give them.
ANSWER_TOOLS = ("submit", "answer")
#: Characters of a stuffed answer (well within every parser's bound on a call).
MAX_STUFFED_CHARS = 6000
#: Said besides the candidates, for graders that pay an abstention anywhere in the text.
ABSTENTIONS = ("I don't know", "unknown", "none", "yes", "no", "true", "false")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[A-Za-z][\w'-]{1,40}")


def candidates(texts: list[str], limit: int = MAX_STUFFED_CHARS) -> str:
    """Every number and word in ``texts`` (numbers first, then the small integers and each
    distinct word in order of appearance), with :data:`ABSTENTIONS`, as one answer of at
    most ``limit`` characters."""
    found: dict[str, None] = {}
    for text in texts:
        for number in _NUMBER.findall(text):
            found.setdefault(number)
    for number in range(-10, 101):
        found.setdefault(str(number))
    for word in ABSTENTIONS:
        found.setdefault(word)
    for text in texts:
        for word in _WORD.findall(text):
            found.setdefault(word)
    answer = ""
    for item in found:
        if len(answer) + len(item) + 2 > limit:
            break
        answer = f"{answer}, {item}" if answer else item
    return answer


class StuffedAnswer(TextPolicy):
    """Answers the first turn with :func:`candidates` of everything shown so far."""

    whole_conversation = True

    def __init__(self, tool: str, argument: str):
        self.tool, self.argument = tool, argument

    def act(self, messages: list[dict[str, Any]], task: Task) -> dict[str, Any]:
        texts = [str(m.get("content") or "") for m in messages]
        return call_turn(self.tool, **{self.argument: candidates(texts)})


def stuff_answer(target: ProbeTarget) -> StuffedAnswer | None:
    """The probe's plan: None unless an answer tool takes exactly one required argument."""
    for name in ANSWER_TOOLS:
        required = target.required(name)
        if name in target.tools and len(required) == 1:
            return StuffedAnswer(name, required[0])
    return None


STUFF_ANSWER = ExploitProbe(
    "answer.stuff", stuff_answer,
    "submits one answer listing every number and word the conversation showed",
    attack="answer-stuffing")
