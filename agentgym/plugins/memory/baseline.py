"""``memory-context-only``: the best a policy without memory tools can do on a memory task.

It reads every session (``next_session`` each turn) and saves nothing. At each question it
answers right exactly when every session the answer rests on is still in its context
window, and otherwise says it does not know: a perfect reader of what it was shown, and
nothing more. Its score against the ``oracle``'s is what the memory tools are worth on a
task (with the whole history in context, ``context_budget=None``, it scores what the
oracle does).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import TextPolicy
from agentgym.core.task import Task
from agentgym.plugins.memory.generator import ABSTAIN_ANSWER

_QUESTION = re.compile(r"Question (\d+) of \d+: ")


class ContextOnlyPolicy(TextPolicy):
    """A text-level policy; see the module docstring."""

    def act(self, messages: list[dict[str, Any]], task: Task) -> dict[str, Any]:
        asked = None
        for message in reversed(messages):  # the latest question the env showed
            found = _QUESTION.findall(str(message.get("content") or ""))
            if message.get("role") not in ("system", "assistant") and found:
                asked = int(found[-1]) - 1
                break
        if asked is None:
            return _call("next_session", {})
        question = task.metadata["questions"][asked]
        seen = "\n".join(str(m.get("content") or "") for m in messages)
        total = len(task.metadata["sessions"])
        # Every session the answer rests on must still be in view (a fact said in several
        # sessions, as a count's, is needed from each of them).
        knows = all(f"Session {item['session'] + 1} of {total} (" in seen
                    for item in question["evidence"])
        return _call("answer", {"text": question["answer"] if knows else ABSTAIN_ANSWER})


def context_only_policy(argument: str | None = None) -> ContextOnlyPolicy:
    """The registered factory (the policy takes no argument)."""
    if argument:
        raise InvalidArgumentError(
            f"the memory-context-only policy takes no argument; got {argument!r}")
    return ContextOnlyPolicy()


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {
                "name": name, "arguments": json.dumps(arguments)}}]}
