"""Trajectory records and the JSONL file they are written to.

A :class:`Trajectory` is one episode as a trainer needs it: the exact token sequence the
model saw (``prompt_ids`` then ``completion_ids``), which completion tokens the model
sampled (``loss_mask`` 1) and which the environment wrote (0), the sampling logprobs, the
reward, why the episode ended, per-stage timings (seconds in ``init``, ``generate``,
``tool`` and ``grade``; ``queue``, waiting for a generation or grading slot; ``sandbox``,
its env's whole time held, under a pipeline), the conversation (tool-call
arguments as JSON strings, as in the OpenAI format) and the tools' JSON schemas the
episode offered (so a text-level conversation can be tokenized later exactly as the model
would have seen it). Text-level policies (oracle, chat APIs) have no token ids: their id
lists are empty.

:class:`TrajectoryWriter` appends one JSON line per episode and flushes it, so an
interrupted run leaves only complete lines (a line cut by a crash is dropped on resume),
and ``datasets.load_dataset("json", data_files=path)`` reads the file. ``resume=True``
skips the ``(task_id, episode)`` pairs already written.

**Metrics** (the grader's free-form dict: the SWE grader's holds per-test results keyed by
test id) are written as the JSON object they are, so the file reads as it was graded
(``jq '.metrics.reason'``) and :func:`read_trajectories` gives back the same dict (values
that are not JSON are written as their ``str``). Their keys vary from row to row, which
Arrow's struct columns cannot hold: ``datasets`` (5.x) reads such a column as its ``Json``
type (JSON text in Arrow, decoded back to the dict per row), deciding so from the file's
first block (10 MB). A file whose first block is uniform and whose later rows differ has
no inferable schema; :func:`trajectory_features` gives one that reads any trajectory file
(``load_dataset("json", data_files=path, features=trajectory_features())``). Files written
before, with metrics as a JSON string, are read as well.
``tools`` (the tool schemas) stays a JSON string: one schema per row, the same in every
row of a run, read only to tokenize the conversation again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from agentgym.rollout.jsonl import JsonlAppender, complete_lines

#: The stages of an episode that use its env (``Trajectory.timings``).
BUSY_STAGES = ("init", "generate", "tool", "grade")


class Sample(NamedTuple):
    """One sequence the model saw: its prompt, and what followed (the model's tokens, mask
    1, and the env's, mask 0), with the sampled tokens' logprobs when known."""

    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None


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
    #: The weights' version that sampled each completion token (-1: the env wrote it);
    #: empty when the policy does not say (:attr:`Generation.versions`).
    versions: list[int] = field(default_factory=list)
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
    #: Screenshots the env returned (``info["screenshot"]``, PNG bytes, e.g. web envs made
    #: with ``screenshot=True``): ``{"message": index of the message they go with, "png":
    #: base64}``; empty for envs without them.
    screenshots: list[dict[str, Any]] = field(default_factory=list)
    #: The samples of the episode before its last (which the token fields above hold), in
    #: order, each ``{"token_ids", "loss_mask", "logprobs", "versions"}`` over its whole
    #: sequence (``logprobs`` None when unknown; a harness sample adds ``"calls"``). An
    #: episode has several samples when what the model saw was rewritten mid-episode: the
    #: env moved its context window (:mod:`agentgym.rollout.loop`), or an agent program
    #: rewrote its history (:mod:`agentgym.rollout.harness`). Empty for every other episode.
    earlier_samples: list[dict[str, Any]] = field(default_factory=list)
    #: Where the agent's context window started (a message index) at each turn, when the
    #: env moved it (``info["context_start"]``); empty when every turn saw the whole
    #: conversation.
    windows: list[int] = field(default_factory=list)
    #: Whether those windows showed the env's replies only, none of the agent's own
    #: messages (``info["context_replies_only"]``, :mod:`agentgym.core.context`).
    context_replies_only: bool = False

    def samples(self) -> list[Sample]:
        """Every sample of the episode, in order: the earlier ones, then the last (the
        token fields); ``[]`` for a text-level record."""
        samples = []
        for sample in self.earlier_samples:
            mask, ids = list(sample["loss_mask"]), list(sample["token_ids"])
            cut = mask.index(1) if 1 in mask else len(mask)
            logprobs = sample.get("logprobs")
            samples.append(Sample(ids[:cut], ids[cut:], mask[cut:],
                                  None if logprobs is None else list(logprobs[cut:])))
        if self.completion_ids:
            samples.append(Sample(self.prompt_ids, self.completion_ids, self.loss_mask,
                                  self.logprobs or None))
        return samples

    @property
    def idle_sandbox_s(self) -> float:
        """Seconds its env was held (``timings["sandbox"]``) doing none of the episode's
        stages: waiting for a slot, or for other episodes (the lock-step modes)."""
        busy = sum(self.timings.get(stage, 0.0) for stage in BUSY_STAGES)
        return max(0.0, self.timings.get("sandbox", 0.0) - busy)

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.episode)

    def to_json(self) -> str:
        """One JSONL line (the module docstring says how metrics and tools are written)."""
        data = asdict(self)
        data["tools"] = json.dumps(self.tools, default=str)
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, line: str) -> Trajectory:
        data = json.loads(line)
        data["metrics"] = _decoded(data.get("metrics"), {})  # a JSON string in older files
        data["tools"] = _decoded(data.get("tools"), [])  # absent from the oldest files
        return cls(**data)


def _decoded(value: Any, empty: Any) -> Any:
    """A field that may be held as JSON text: the value it stands for."""
    if isinstance(value, str):
        return json.loads(value) if value else empty
    return empty if value is None else value


def trajectory_features() -> Any:
    """The ``datasets.Features`` of a trajectory file, for
    ``load_dataset("json", data_files=path, features=trajectory_features())``: it reads any
    trajectory file, however its rows' metrics and messages differ (they are ``Json``
    columns, decoded to dicts per row)."""
    from datasets import Features, Json, List, Value

    ids = List(Value("int64"))
    return Features({
        "env": Value("string"), "task_id": Value("string"), "episode": Value("int64"),
        "policy": Value("string"), "prompt_ids": ids, "completion_ids": ids,
        "logprobs": List(Value("float64")), "loss_mask": ids, "versions": ids,
        "reward": Value("float64"),
        "finish_reason": Value("string"), "turns": Value("int64"),
        "tool_errors": Value("int64"), "timings": Json(), "messages": List(Json()),
        "metrics": Json(), "error": Value("string"), "tools": Value("string"),
        "screenshots": List(Json()), "earlier_samples": List(Json()), "windows": ids,
        "context_replies_only": Value("bool"),
    })


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
