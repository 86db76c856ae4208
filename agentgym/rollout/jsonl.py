"""JSONL files that survive interruption: each line appended in one write, read back whole.

Trajectory files (:class:`~agentgym.rollout.trajectory.TrajectoryWriter`) and a training
run's ``metrics.jsonl`` are appended to while a long job runs and read while (or after) it
is killed. :class:`JsonlAppender` makes that safe:

* each line goes to the file in a single ``write`` on an ``O_APPEND`` descriptor, so a
  reader never sees half of one, and nothing waits in a buffer when the process dies;
* opening a file whose last line was cut by a crash (no final newline) drops that piece,
  so the next line starts on a line of its own;
* :meth:`JsonlAppender.rewrite` replaces the whole content atomically (a temporary file
  renamed over it), for a resumed run that drops records logged after its checkpoint.

:func:`complete_lines` reads every line that ends with a newline, ignoring a last piece
without one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["JsonlAppender", "complete_lines"]


class JsonlAppender:
    """Appends lines (one JSON document each) to ``path``, created with its folder if
    missing; a partial last line already there is dropped first."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_partial_line()
        self._fd = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _drop_partial_line(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end != len(data):  # a line cut short by a crash
            with self.path.open("r+b") as f:
                f.truncate(end)

    def append(self, line: str) -> None:
        """Append ``line`` (a JSON document, without its newline) in a single write."""
        if "\n" in line:
            raise ValueError(f"a JSONL line cannot hold a newline: {line[:80]!r}")
        os.write(self._fd, (line + "\n").encode("utf-8"))

    def rewrite(self, lines: Iterable[str]) -> None:
        """Replace the file's content with ``lines`` at once (a reader sees the old file or
        the new one), then keep appending to the new one."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        self.close()
        os.replace(tmp, self.path)
        self._fd = self._open()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def complete_lines(path: str | os.PathLike) -> list[str]:
    """The non-blank lines of ``path`` that end with a newline (a last line cut short is
    left out). Raises FileNotFoundError when there is no file."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    return [line for line in lines[:-1] if line.strip()]
