"""Trajectory records and the JSONL file they are written to.

A :class:`Trajectory` is one episode as a trainer needs it: the exact token sequence the
model saw (``prompt_ids`` then ``completion_ids``), which completion tokens the model
sampled (``loss_mask`` 1) and which the environment wrote (0), the sampling logprobs, the
reward, why the episode ended, per-stage timings, the conversation (tool-call
arguments as JSON strings, as in the OpenAI format) and the tools' JSON schemas the
episode offered (so a text-level conversation can be tokenized later exactly as the model
would have seen it). Text-level policies (oracle, chat APIs) have no token ids: their id
lists are empty.

:class:`TrajectoryWriter` appends one JSON line per episode and flushes it, so an
interrupted run leaves only complete lines (a line cut by a crash is dropped on resume),
and ``datasets.load_dataset("json", data_files=path)`` reads the file. ``resume=True``
skips the ``(task_id, episode)`` pairs already written.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym.rollout.jsonl import JsonlAppender, complete_lines


@dataclass
class Trajectory:
    """One episode, token by token."""

    env: str
    task_id: str
    episode: int
    policy: str = ""
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    finish_reason: str = ""
    turns: int = 0
    tool_errors: int = 0
    timings: dict[str, float] = field(
        default_factory=lambda: {"init": 0.0, "generate": 0.0, "tool": 0.0, "grade": 0.0}
    )
    messages: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.episode)

    def to_json(self) -> str:
        data = asdict(self)
        # Free-form per-env metrics and tool schemas as JSON strings keep the file's schema
        # the same for every row (and every env), which `datasets` needs to read it.
        data["metrics"] = json.dumps(self.metrics, default=str)
        data["tools"] = json.dumps(self.tools, default=str)
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        data = json.loads(line)
        data["metrics"] = json.loads(data.get("metrics") or "{}")
        tools = data.get("tools") or "[]"  # files written before the field have none
        data["tools"] = json.loads(tools) if isinstance(tools, str) else tools
        return cls(**data)


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Every complete record of a trajectory file."""
    return [Trajectory.from_json(line) for line in complete_lines(path)]


class TrajectoryWriter:
    """Appends trajectories to a JSONL file, one flushed line per episode
    (:class:`~agentgym.rollout.jsonl.JsonlAppender`).

    Args:
        path: the file.
        resume: keep what the file holds and skip its (task_id, episode) pairs; without it
            an existing file is an error, so no run is overwritten by accident.
    """

    def __init__(self, path: str | Path, resume: bool = False):
        self.path = Path(path)
        self.done: set[tuple[str, int]] = set()
        if self.path.exists() and self.path.stat().st_size and not resume:
            raise FileExistsError(
                f"{str(self.path)!r} already holds trajectories; pass --resume to continue"
                " that run, or choose another --out"
            )
        self._out = JsonlAppender(self.path)  # drops a line cut short by a crash
        if resume:
            self.done = {t.key for t in read_trajectories(self.path)}

    def write(self, trajectory: Trajectory) -> None:
        """Append one line in a single write: readers never see half of it."""
        self._out.append(trajectory.to_json())
        self.done.add(trajectory.key)

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
