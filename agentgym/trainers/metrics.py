"""``metrics.jsonl``: every log of every trainer of a training run, one JSON line each.

Each line is ``{"stage": "01-grpo", "kind": "grpo", "step": N, ...}`` with the trainer's
keys (TRL's and agentgym's). :class:`MetricsCallback` writes a trainer's logs to a
:class:`MetricsLog`, which appends each line in a single write through
:class:`~agentgym.rollout.jsonl.JsonlAppender` (the same appender trajectory files use), so
an interrupted run leaves only complete lines. Values are made JSON-safe first
(:func:`json_safe`): tensors and numpy scalars become numbers, NaN and infinities null.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agentgym.rollout.jsonl import JsonlAppender, complete_lines

__all__ = ["MetricsCallback", "MetricsLog", "json_safe", "read_metrics"]


def json_safe(value: Any) -> Any:
    """A JSON-safe value: tensors and numpy scalars as numbers, NaN and infinities as null."""
    if hasattr(value, "item") and callable(value.item):
        with contextlib.suppress(Exception):
            value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return str(value)


class MetricsLog:
    """``metrics.jsonl``: one JSON object per line, each appended in a single write
    (:class:`~agentgym.rollout.jsonl.JsonlAppender`), so a reader (or a crash) never leaves
    half a line behind."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._out = JsonlAppender(self.path)

    def write(self, record: dict[str, Any]) -> None:
        self._out.append(json.dumps(json_safe(record), allow_nan=False))

    def read(self) -> list[dict[str, Any]]:
        """Every complete line."""
        return read_metrics(self.path)

    def keep(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        """Rewrite the file with only the records ``predicate`` accepts (on resume)."""
        self._out.rewrite([json.dumps(r) for r in self.read() if predicate(r)])

    def close(self) -> None:
        self._out.close()


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (none when it does not exist)."""
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in complete_lines(path)]


class MetricsCallback(TrainerCallback):
    """Appends each trainer log to a :class:`MetricsLog` as
    ``{"stage", "kind", "step", ...logs}``."""

    def __init__(self, log: MetricsLog, stage: str, kind: str):
        self.log, self.stage, self.kind = log, stage, kind

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kwargs: Any) -> None:
        if logs and state.is_world_process_zero:
            self.log.write({"stage": self.stage, "kind": self.kind, "step": state.global_step,
                            **logs})
