"""Gymnasium spaces for chat: observations are message lists, actions are model text.

Gymnasium's ``Text`` space admits only a fixed charset and length, which model output does
not respect, so agentgym defines two small spaces. ``sample()`` is seeded like every
Gymnasium space, which is what ``check_env``'s determinism checks rely on.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

ROLES = ("system", "user", "assistant", "tool")
_CHARSET = np.array(list(string.ascii_letters + string.digits + string.punctuation + " \n"))


def _random_text(rng: np.random.Generator, max_length: int) -> str:
    return "".join(rng.choice(_CHARSET, size=int(rng.integers(0, max_length + 1))))


def is_message(value: Any) -> bool:
    """True for an OpenAI-format chat message: a dict with a known role and text content."""
    if not isinstance(value, dict) or value.get("role") not in ROLES:
        return False
    content = value.get("content")
    return isinstance(content, str) or (
        content is None and value["role"] == "assistant" and "tool_calls" in value
    )


class MessagesSpace(Space[list[dict[str, Any]]]):
    """Lists of chat messages ``{"role", "content", ...}`` (OpenAI format)."""

    def __init__(self, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(is_message(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        count = int(self.np_random.integers(1, 4))
        return [
            {"role": str(self.np_random.choice(ROLES)), "content": _random_text(self.np_random, 64)}
            for _ in range(count)
        ]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessagesSpace)

    def __repr__(self) -> str:
        return "MessagesSpace()"


class TextActionSpace(Space[Any]):
    """One assistant turn: the model's raw text, or an already-parsed assistant message."""

    def __init__(self, max_sample_length: int = 128, seed: int | np.random.Generator | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_sample_length = max_sample_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) or (is_message(x) and x["role"] == "assistant")

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return _random_text(self.np_random, self.max_sample_length)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextActionSpace)

    def __repr__(self) -> str:
        return "TextActionSpace()"
