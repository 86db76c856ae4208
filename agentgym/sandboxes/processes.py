"""Whether a host process still lives: what tells a leftover (a sandbox, a container, a
half-made template copy) of a dead process from one still in use."""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), None if unknown."""
    fields = _stat(pid)
    return fields[19] if fields else None


def process_alive(pid: int, started: str | None = None) -> bool:
    """Whether process ``pid`` runs (a zombie does not); with ``started`` (its
    :func:`process_start`), only if the pid was not reused by a later process since."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    fields = _stat(pid)
    if fields is None:  # unknown (it may have ended just now): keep what it may use
        return True
    return fields[0] != "Z" and not (started and fields[19] != started)
