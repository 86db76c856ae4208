"""``play_turns``: play fixed assistant turns through an env, as a test of its tools and
grader would (the oracle's turns, a turn that deletes the tests, a bare submit)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gymnasium


def play_turns(env: gymnasium.Env, turns: Iterable[Any], *,
               options: dict[str, Any] | None = None, seed: int | None = None
               ) -> tuple[float, dict[str, Any]]:
    """Reset ``env`` (with ``options``, e.g. ``{"task_id": ...}``), step each turn, and
    return the reward and info of the step that ended the episode.

    Raises ``AssertionError`` if the turns run out before the episode ends.
    """
    env.reset(seed=seed, options=options)
    for turn in turns:
        _, reward, terminated, truncated, info = env.step(turn)
        if terminated or truncated:
            return float(reward), info
    raise AssertionError("the turns ran out before the episode ended")
