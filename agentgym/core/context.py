"""A bounded context window: which messages of a long conversation the agent still sees.

An env whose episodes outgrow any context (weeks of chat history shown session by session)
can say, in a step's ``info["context_start"]``, that the agent's context is now the
conversation's system messages plus the messages from index ``context_start`` on (indices
into the whole conversation, opening messages included, as the rollout loop records it).
The loop then shows a text-level policy only that window; the trajectory keeps every
message. :func:`window_start` computes the index for a token budget.

**Replies only.** An env whose agent must not carry anything in its own context (a memory
env: the answers must come from the memory tools) also sets ``info["context_replies_only"]``.
The window then shows none of the agent's own messages: it holds the env's replies from
``context_start`` on (tool results, the env's user messages), merged into one user message
(:func:`visible`), so whatever the agent wrote (its text, its calls' arguments) is gone the
turn after. The env's replies must not repeat what the agent wrote either; the core's own
error messages do not under this flag (:class:`~agentgym.core.env.AgentEnv`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from agentgym.core.errors import InvalidArgumentError

#: Characters per token in :func:`estimate_tokens`: a tokenizer-free estimate.
CHARS_PER_TOKEN = 4
#: Tokens a chat template adds around each message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(message: dict[str, Any]) -> int:
    """About how many tokens ``message`` takes in a prompt: its text and tool calls at
    :data:`CHARS_PER_TOKEN` characters a token, plus the template's overhead."""
    chars = len(str(message.get("content") or ""))
    for call in message.get("tool_calls") or ():
        function = call.get("function", call)
        arguments = function.get("arguments", "")
        chars += len(str(function.get("name", ""))) + len(
            arguments if isinstance(arguments, str) else json.dumps(arguments))
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def window_start(messages: Sequence[dict[str, Any]], budget_tokens: int,
                 replies_only: bool = False) -> int:
    """The index from which ``messages`` fit ``budget_tokens`` (their system messages
    counted too): the most recent messages that fit, starting at a whole turn (never at a
    tool result, which belongs to the assistant message before it). The latest turn is
    always kept, whatever it costs. With ``replies_only`` (module docstring) the agent's
    messages cost nothing and are not shown: the window may start at any reply, and the
    latest turn's replies are always kept."""
    if budget_tokens < 1:
        raise InvalidArgumentError(f"budget_tokens must be >= 1, got {budget_tokens}")
    if replies_only:
        return _replies_start(messages, budget_tokens)
    boundaries = [i for i, m in enumerate(messages) if m.get("role") in ("assistant", "user")]
    if not boundaries:
        return 0
    system = sum(estimate_tokens(m) for m in messages if m.get("role") == "system")
    costs = [0 if m.get("role") == "system" else estimate_tokens(m) for m in messages]
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + costs[i]
    # The last turn starts at the last assistant message (its tool results follow it).
    assistants = [i for i in boundaries if messages[i].get("role") == "assistant"]
    latest = assistants[-1] if assistants else boundaries[-1]
    if system + suffix[0] <= budget_tokens:
        return 0  # everything fits: nothing leaves the context
    for start in boundaries:
        if start > latest or system + suffix[start] <= budget_tokens:
            return min(start, latest)
    return latest


def _replies_start(messages: Sequence[dict[str, Any]], budget_tokens: int) -> int:
    """:func:`window_start` with ``replies_only``."""
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    latest = assistants[-1] + 1 if assistants else 0  # the latest turn's first reply
    used = sum(estimate_tokens(m) for m in messages if m.get("role") == "system")
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        role = messages[i].get("role")
        if role in ("system", "assistant"):
            continue
        used += estimate_tokens(messages[i])
        if i < latest and used > budget_tokens:
            return min(start, latest)
        start = i
    return 0  # every reply fits: nothing leaves the context


def visible(messages: Sequence[dict[str, Any]], start: int,
            replies_only: bool = False) -> list[dict[str, Any]]:
    """What the agent sees when its context starts at ``start``: the system messages
    before it, then every message from it on. With ``replies_only`` (module docstring),
    the messages from ``start`` on are the env's replies alone, as one user message."""
    shown = [m for m in messages[:start] if m.get("role") == "system"]
    if not replies_only:
        return shown + list(messages[start:])
    replies: list[str] = []
    for message in messages[start:]:
        role = message.get("role")
        if role == "system":
            shown += [*_merged(replies), message]
            replies = []
        elif role != "assistant":
            replies.append(reply_text(message))
    return shown + _merged(replies)


def reply_text(message: dict[str, Any]) -> str:
    """An env's reply as a replies-only window shows it: a tool result after its tool's
    name in brackets (the call itself is not shown), any other message as its text."""
    content = str(message.get("content") or "")
    if message.get("role") == "tool":
        return f"[{message.get('name') or 'tool'}] {content}"
    return content


def _merged(replies: list[str]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "\n\n".join(replies)}] if replies else []
