"""agentgym's on-disk cache and the lock that guards what is built into it.

Everything agentgym builds once and reuses (the sandbox rootfs, SWE sdists, repositories
and dependency environments) lives under one root, ``~/.cache/agentgym`` unless
``$AGENTGYM_CACHE`` says otherwise. Builders that several processes may run at once (test
workers, rollout workers, two `agentgym` commands) hold :func:`file_lock` on a sibling
``.lock`` file, so the first builds and the others wait and then reuse its result;
:func:`hash_tree` digests the files a build starts from, to name what it built.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


def hash_tree(digest: Any, key: str, root: Path) -> None:
    """Add ``root`` (a file or folder) to ``digest``: relative paths, permissions,
    contents, symlink targets."""
    if not root.exists():
        raise FileNotFoundError(f"cannot hash {str(root)!r}: no such file or directory")
    paths = [str(root)]
    for directory, dirs, names in os.walk(root):  # symlinks to folders are not followed
        dirs.sort()
        paths += [os.path.join(directory, name) for name in sorted(dirs + names)]
    for path in paths:
        info = os.lstat(path)
        relative = os.fsencode(os.path.join(key, os.path.relpath(path, root)))
        digest.update(relative + b"\0%o\0" % info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            digest.update(os.fsencode(os.readlink(path)))
        elif stat.S_ISREG(info.st_mode):
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        digest.update(b"\n")
