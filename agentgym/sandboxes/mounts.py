"""Where a spec may put things inside a sandbox: the checks both built-in backends share.

A :class:`~agentgym.core.sandbox.SandboxSpec` checks what holds for every backend when it
is made (mount points and ``workdir`` absolute and normalized, not ``/``, given once;
``env`` names and values). What depends on the backend is checked here, when a backend
opens the spec: each backend has directories of its own (``/proc``, ``/dev``, ``/tmp``,
its system binds, its home), which neither the workspace nor a mount may be, contain or
lie inside; and a mounted host path must exist on this host.

Both functions raise :class:`~agentgym.core.sandbox.SandboxSpecError` naming the entry,
what it clashes with, and a path to use instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from agentgym.core.sandbox import SandboxSpecError


def overlap(path: str, reserved: Iterable[str]) -> str | None:
    """The first of ``reserved`` that ``path`` is, contains or lies inside (all absolute,
    normalized, not ``/``)."""
    for own in reserved:
        if path == own or path.startswith(own + "/") or own.startswith(path + "/"):
            return own
    return None


def check_workdir(workdir: str, reserved: Iterable[str], backend: str) -> None:
    """Refuse a ``workdir`` that would hide or overlap one of the backend's ``reserved``
    directories."""
    reserved = tuple(reserved)
    clash = overlap(workdir, reserved)
    if clash:
        raise SandboxSpecError(
            f"workdir {workdir!r} would hide or overlap the {backend} sandbox's own {clash};"
            f" pick a path outside {', '.join(sorted(reserved))} (e.g. /workspace)")


def check_mounts(mounts: Mapping[str, str | os.PathLike[str]],
                 reserved: Iterable[str]) -> dict[str, Path]:
    """Validate read-only ``mounts`` (normalized path inside the sandbox -> host path, as
    a spec holds them) for a backend whose own directories are ``reserved``; returns them
    with host paths resolved, parents first (so a nested mount is bound after its parent).

    A path inside may neither be, contain nor lie inside a reserved path; a host path must
    exist (a file or a directory).
    """
    reserved = tuple(reserved)
    checked: dict[str, Path] = {}
    for point, host in mounts.items():
        clash = overlap(point, reserved)
        if clash:
            raise SandboxSpecError(
                f"mount point {point!r} would hide or overlap the sandbox's own {clash};"
                f" pick a path outside {', '.join(sorted(reserved))} (e.g. /opt/NAME)")
        source = Path(host).expanduser().resolve()
        if not source.exists():
            raise SandboxSpecError(f"cannot mount {str(host)!r} at {point!r}: no such file"
                                   " or directory on the host; pass an existing path")
        checked[point] = source
    return dict(sorted(checked.items()))


def check_scratch_dirs(paths: Iterable[str], reserved: Iterable[str]) -> tuple[str, ...]:
    """Refuse scratch directories that would be, contain or lie inside a ``reserved`` path
    (the backend's own directories, the workspace, the mount points) or one another."""
    reserved, checked = tuple(reserved), tuple(paths)
    for index, point in enumerate(checked):
        clash = overlap(point, reserved) or overlap(point, checked[index + 1:])
        if clash:
            raise SandboxSpecError(
                f"scratch directory {point!r} would hide or overlap {clash}; pick a path of"
                " its own outside the workspace, the mounts and the sandbox's directories"
                " (e.g. /tests)")
    return checked
