"""A bounded context window: which messages of a long conversation the agent still sees.

An env whose episodes outgrow any context (weeks of chat history shown session by session)
can say, in a step's ``info["context_start"]``, that the agent's context is now the
conversation's system messages plus the messages from index ``context_start`` on (indices
into the whole conversation, opening messages included, as the rollout loop records it).
The loop then shows a text-level policy only that window; the trajectory keeps every
message. :func:`window_start` computes the index for a token budget.
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


def window_start(messages: Sequence[dict[str, Any]], budget_tokens: int) -> int:
    """The index from which ``messages`` fit ``budget_tokens`` (their system messages
    counted too): the most recent messages that fit, starting at a whole turn (never at a
    tool result, which belongs to the assistant message before it). The latest turn is
    always kept, whatever it costs."""
    if budget_tokens < 1:
        raise InvalidArgumentError(f"budget_tokens must be >= 1, got {budget_tokens}")
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


def visible(messages: Sequence[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """What the agent sees when its context starts at ``start``: the system messages
    before it, then every message from it on."""
    return [m for m in messages[:start] if m.get("role") == "system"] + list(messages[start:])
