"""An index of trajectory files: one small row per episode, the episode itself read on
demand.

:class:`EpisodeIndex` reads each JSONL file once, keeping per line its byte offset and
what the list view shows (env, task, policy, reward, finish reason, turns, tokens, stage
times), so a file of 100,000 episodes is indexed once and never held whole. An episode is
named by its file and its position there (:meth:`EpisodeIndex.locate`), which a link keeps
while other files are added or grow. :meth:`refresh` reads
only what was appended since (a file still being written shows new episodes as they come;
a last line without its newline waits for it). Text search scans the episodes' raw bytes
through a memory map, without parsing them.

ATIF documents read as agentgym's own records (:func:`agentgym.interchange.atif.from_atif`):
a ``.json`` file holding one is one episode, read once, and a JSONL file may hold one per
line, so ``agentgym export``'s output (and Harbor's ``trajectory.json`` files) open as
the episodes they came from.
"""

from __future__ import annotations

import json
import mmap
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.interchange.atif import document_name, from_atif, is_atif, is_atif_file

#: The columns the list can be sorted by.
SORT_KEYS = ("index", "file", "env", "task_id", "policy", "reward", "finish_reason", "turns",
             "tokens", "time_s")


@dataclass
class Row:
    """What the list view shows of one episode, and where the episode lies: ``index`` over
    all files, ``file`` (a number, the order of :attr:`EpisodeIndex.files`) and
    ``position``, its number among that file's episodes (bad lines not counted)."""

    index: int
    file: int
    position: int
    offset: int
    length: int
    env: str
    task_id: str
    episode: int
    policy: str
    reward: float
    finish_reason: str
    turns: int
    tokens: int
    tool_errors: int
    error: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def time_s(self) -> float:
        return sum(v for k, v in self.timings.items() if isinstance(v, int | float)
                   and k != "sandbox")  # the time its env was held spans the stages

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["offset"], data["length"]
        data["time_s"] = self.time_s
        return data


def trajectory_files(target: str | Path) -> list[Path]:
    """The trajectory files of ``target``: the file itself, or a run folder's ``*.jsonl``
    files other than its metrics and its ATIF ``*.json`` documents (sorted by path)."""
    target = Path(target)
    if target.is_file():
        return [target]
    if target.is_dir():
        return sorted(p for p in target.rglob("*.json*")
                      if (p.suffix == ".jsonl" and p.name != "metrics.jsonl")
                      or is_atif_file(p))
    raise FileNotFoundError(target)


def file_labels(files: Sequence[Path]) -> list[str]:
    """Short names that tell ``files`` apart: each path's last parts, as few as make it
    unique (``00-sft/demonstrations.jsonl`` beside ``02-rft/demonstrations.jsonl``)."""
    parts = [Path(f).parts for f in files]
    labels = []
    for mine in parts:
        for depth in range(1, len(mine) + 1):
            tail = mine[-depth:]
            if sum(other[-depth:] == tail for other in parts) == 1 or depth == len(mine):
                break
        labels.append("/".join(tail))
    return labels


@dataclass
class Page:
    """What :meth:`EpisodeIndex.query` returns: how many episodes match, their mean reward
    and pass rate (share with reward 1.0), and one page of their rows."""

    total: int
    mean_reward: float
    pass_rate: float
    rows: list[Row]


class EpisodeIndex:
    """The episodes of ``files`` (module docstring). Thread-safe."""

    def __init__(self, files: Sequence[str | Path]):
        self.files = [Path(f) for f in files]
        self.rows: list[Row] = []
        #: Per file, the indexes of its rows in order (a row's position is its place here).
        self.by_file: list[list[int]] = [[] for _ in self.files]
        self.labels = file_labels(self.files)
        self.bad_lines = 0
        self._read_to = [0] * len(self.files)
        self._lock = threading.Lock()
        self._searches: dict[tuple[str, int], list[int]] = {}
        self.refresh()

    def refresh(self) -> int:
        """Index what was appended to the files since the last call; how many new rows."""
        with self._lock:
            before = len(self.rows)
            for number, path in enumerate(self.files):
                self._read_new(number, path)
            if len(self.rows) != before:
                self._searches.clear()
            return len(self.rows) - before

    def _read_new(self, number: int, path: Path) -> None:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        start = self._read_to[number]
        if size <= start or (path.suffix == ".json" and start):
            return  # a .json file is one document, written whole: read once
        with path.open("rb") as handle:
            handle.seek(start)
            data = handle.read(size - start)
        if path.suffix == ".json":
            data = data.replace(b"\n", b" ") + b"\n"  # the document as one line
        end = data.rfind(b"\n") + 1  # a last line still being written waits for its newline
        at = start
        for line in data[:end].split(b"\n")[:-1]:
            length = len(line) + 1
            if line.strip():
                row = self._row(line, number, at, length)
                if row is None:
                    self.bad_lines += 1
                else:
                    self.rows.append(row)
                    self.by_file[number].append(row.index)
            at += length
        self._read_to[number] = min(start + end, size)

    def _row(self, line: bytes, number: int, offset: int, length: int) -> Row | None:
        """The row of one line, or None for a line that is not an episode: not JSON,
        nested past what the parser takes, or a field of the wrong type (counted in
        :attr:`bad_lines`; the other lines still show)."""
        try:
            return self._parse_row(line, number, offset, length)
        except (ValueError, TypeError, RecursionError, OverflowError):
            return None

    def _parse_row(self, line: bytes, number: int, offset: int, length: int) -> Row | None:
        data = self._record(json.loads(line), number)
        if not isinstance(data, dict) or "task_id" not in data:
            return None
        timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
        timings = {k: v for k, v in timings.items() if isinstance(v, int | float)}
        return Row(index=len(self.rows), file=number, position=len(self.by_file[number]),
                   offset=offset, length=length,
                   env=str(data.get("env", "")), task_id=str(data.get("task_id", "")),
                   episode=int(data.get("episode") or 0), policy=str(data.get("policy", "")),
                   reward=float(data.get("reward") or 0.0),
                   finish_reason=str(data.get("finish_reason") or ""),
                   turns=int(data.get("turns") or 0),
                   tokens=len(data.get("prompt_ids") or ()) + len(data.get("completion_ids")
                                                                  or ()),
                   tool_errors=int(data.get("tool_errors") or 0),
                   error=str(data.get("error") or "")[:200], timings=timings)

    def _record(self, data: Any, number: int) -> Any:
        """An agentgym record as parsed; an ATIF document as the record it stands for."""
        if not is_atif(data):
            return data
        # A broken document raises ValueError: it counts as a bad line.
        return asdict(from_atif(data, document_name(self.files[number])))

    # ---- reading ----------------------------------------------------------------------

    def episode(self, index: int) -> dict[str, Any]:
        """Episode ``index`` as written (``metrics`` and ``tools`` decoded; an ATIF
        document as the agentgym record it stands for)."""
        row = self.rows[index]
        with self.files[row.file].open("rb") as handle:
            handle.seek(row.offset)
            data = self._record(json.loads(handle.read(row.length)), row.file)
        for key, empty in (("metrics", {}), ("tools", [])):
            if isinstance(data.get(key), str):
                data[key] = json.loads(data[key]) if data[key] else empty
        data["index"] = index
        return data

    def locate(self, file: int, position: int) -> int:
        """The index of the episode at ``position`` in file number ``file``."""
        if not 0 <= file < len(self.files):
            raise IndexError(f"no file {file}: there are {len(self.files)}")
        rows = self.by_file[file]
        if not 0 <= position < len(rows):
            raise IndexError(f"no episode {position} in {self.labels[file]}: it holds"
                             f" {len(rows)}")
        return rows[position]

    def query(self, *, sort: str = "index", descending: bool = False, env: str = "",
              finish_reason: str = "", policy: str = "", file: int | None = None,
              text: str = "", min_reward: float | None = None,
              max_reward: float | None = None, offset: int = 0, limit: int = 100) -> Page:
        """The episodes that match every filter given, sorted, one page of them."""
        if sort not in SORT_KEYS:
            raise InvalidArgumentError(f"sort={sort!r}: use one of {', '.join(SORT_KEYS)}")
        rows = self.rows
        if file is not None:
            rows = [self.rows[i] for i in self.by_file[file]] \
                if 0 <= file < len(self.files) else []
        for key, value in (("env", env), ("finish_reason", finish_reason),
                           ("policy", policy)):
            if value:
                rows = [r for r in rows if getattr(r, key) == value]
        if min_reward is not None:
            rows = [r for r in rows if r.reward >= min_reward]
        if max_reward is not None:
            rows = [r for r in rows if r.reward <= max_reward]
        if text:
            found = set(self._search(text))
            rows = [r for r in rows if r.index in found]
        if sort != "index" or descending:
            rows = sorted(rows, key=lambda r: (getattr(r, sort), r.index), reverse=descending)
        count = len(rows)
        return Page(total=count,
                    mean_reward=sum(r.reward for r in rows) / count if count else 0.0,
                    pass_rate=sum(r.reward >= 1.0 for r in rows) / count if count else 0.0,
                    rows=rows[offset:offset + limit])

    def facets(self) -> dict[str, Any]:
        """The envs, finish reasons, policies and files present, for the filters
        (``files``: the short names of :func:`file_labels`, in file-number order)."""
        rows = self.rows
        return {"episodes": len(rows), "envs": sorted({r.env for r in rows}),
                "finish_reasons": sorted({r.finish_reason for r in rows}),
                "policies": sorted({r.policy for r in rows}),
                "files": self.labels, "bad_lines": self.bad_lines}

    def _search(self, text: str) -> list[int]:
        """Indexes of the episodes whose JSON holds ``text`` (case-insensitive)."""
        key = (text.lower(), len(self.rows))
        if key in self._searches:
            return self._searches[key]
        needle = text.lower().encode()
        escaped = json.dumps(text.lower())[1:-1].encode()  # as it reads inside JSON strings
        found = []
        for number, indexes in enumerate(self.by_file):
            if not indexes:
                continue
            with self.files[number].open("rb") as handle, \
                    mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                for row in (self.rows[i] for i in indexes):
                    line = data[row.offset:row.offset + row.length].lower()
                    if needle in line or escaped in line:
                        found.append(row.index)
        self._searches[key] = found
        return found
