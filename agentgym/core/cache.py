"""agentgym's on-disk cache and the lock that guards what is built into it.

Everything agentgym builds once and reuses (the sandbox rootfs, SWE sdists, repositories
and dependency environments) lives under one root, ``~/.cache/agentgym`` unless
``$AGENTGYM_CACHE`` says otherwise. Builders that several processes may run at once (test
workers, rollout workers, two `agentgym` commands) hold :func:`file_lock` on a sibling
``.lock`` file, so the first builds and the others wait and then reuse its result.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    """The cache root, created: ``$AGENTGYM_CACHE`` or ``~/.cache/agentgym``."""
    path = Path(os.environ.get("AGENTGYM_CACHE")
                or Path.home() / ".cache" / "agentgym").expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its parents) across processes.

    The lock is released when the block exits, and by the kernel if the process dies.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
