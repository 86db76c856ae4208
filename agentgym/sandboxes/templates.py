"""The local backend's template cache: one copy of a template per version, shared by every
process, cleaned when no longer used.

Why copies. The local workspace is an overlay whose read-only lower layer is the
template. Overlayfs keeps a file's owner when it copies the file up for writing, so the
lower layer must belong to the sandbox user for the agent to edit its files: a template is
copied once into :data:`TEMPLATE_DIR` (``$AGENTGYM_TEMPLATE_DIR``) and chowned there; the
original is never touched, and no sandbox can reach either.

The key. A copy is named ``<template name>-<key>``, where the key is a SHA-256 digest of
the template's resolved path and, for every entry of its tree (symlinks not followed), its
relative path, type and permissions, size and modification time in nanoseconds
(:func:`template_key`). It is the same in every process (Python's ``hash()`` is salted per
process, so copies keyed by it were never shared and piled up), and any change anywhere in
the tree (an edit, a new or deleted file, a chmod) gives a new key, so a stale copy is
never used. It costs one ``stat`` per entry and reads no file content: a content hash
would read every byte of the template at every open, the copy itself once. What it misses
is an edit that keeps a file's size and whose modification time is set back by hand.

Use. :func:`acquire` holds a shared ``flock`` on ``<copy>.lock`` for as long as the
sandbox lives (:meth:`TemplateCopy.release` ends it; the kernel does if the process
dies). The lock file holds the template's path, and its modification time is the copy's
last use.

Cleanup (:func:`clean`, by ``agentgym sandbox gc``, and by :func:`acquire` after it made a
copy or :data:`CLEAN_INTERVAL_S` after its process last cleaned), one process at a time
(``.clean.lock``): a copy that nobody holds is removed, under an
exclusive lock, when its template now has another key (it changed since) or when it was
last used more than :data:`TEMPLATE_TTL_S` ago. A copy from before these keys (no lock
file) is removed once it is older than the same delay and no mount namespace on the host
has it as an overlay layer. Half-made copies of dead processes go too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.core.sandbox import SandboxError
from agentgym.sandboxes.processes import process_alive

#: Host directory of the copies (mode 0711: sandbox users may traverse, not list it).
TEMPLATE_DIR = Path(os.environ.get("AGENTGYM_TEMPLATE_DIR", "/var/tmp/agentgym-templates"))
#: A copy nobody has opened for this long is removed (seconds; default a day).
TEMPLATE_TTL_S = float(os.environ.get("AGENTGYM_TEMPLATE_TTL_S", 24 * 3600))
#: Seconds between the cleanups :func:`acquire` runs when it made no new copy.
CLEAN_INTERVAL_S = 300.0
_last_clean = [float("-inf")]  # when this process last cleaned (time.monotonic())
#: The unprivileged user commands run as; copies belong to it.
SANDBOX_UID = int(os.environ.get("AGENTGYM_SANDBOX_UID", "65000"))

_LOCK = ".lock"
_CLEAN_LOCK = ".clean.lock"
_STAGING = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.\d+$")  # .<copy>.<pid>.<n>
_TRASH = ".trash-"
_LEGACY = re.compile(r"^.+-[0-9a-f]{1,16}$")  # <name>-<hex of hash()>, before these keys
_counter = itertools.count()


@dataclass
class TemplateCopy:
    """A cached copy in use: :attr:`path` stays until :meth:`release`."""

    path: Path
    _lock_fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Stop using the copy (it may be cleaned from now on). Idempotent."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing releases the flock


def template_key(source: Path) -> str:
    """The digest naming ``source``'s copy (see the module docstring): resolved path, and
    each entry's relative path, type, permissions, size and mtime."""
    digest = hashlib.sha256(os.fsencode(source) + b"\0")
    for directory, dirs, files in os.walk(source):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(directory, name)
            try:
                info = os.lstat(path)
            except OSError:  # vanished meanwhile: the copy will say so if it matters
                continue
            relative = os.fsencode(os.path.relpath(path, source))
            digest.update(relative + b"\0%o %d %d\n" % (info.st_mode, info.st_size,
                                                       info.st_mtime_ns))
    return digest.hexdigest()[:24]


def acquire(template: str | os.PathLike[str]) -> TemplateCopy:
    """A copy of ``template`` owned by the sandbox user, made on first use and shared by
    every process; held (safe from :func:`clean`) until :meth:`TemplateCopy.release`."""
    source = Path(template).resolve()
    if not source.is_dir():
        raise SandboxError(f"template {str(source)!r} is not a directory; pass a directory")
    if re.search(r"[,:\\\s]", str(source)):
        raise SandboxError(
            f"template path {str(source)!r} contains a comma, colon, backslash or space,"
            " which overlayfs options cannot carry; move or link it to a plain path")
    root = TEMPLATE_DIR
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    name = f"{source.name}-{template_key(source)}"
    target = root / name
    lock = _locked(root / (name + _LOCK), fcntl.LOCK_SH)
    assert lock is not None  # a blocking lock is always taken
    try:
        made = not target.is_dir()
        if made:
            _copy(source, target)
        recorded = os.fsencode(source)
        if os.pread(lock, len(recorded) + 1, 0) != recorded:  # the template's path
            os.pwrite(lock, recorded, 0)
            os.ftruncate(lock, len(recorded))
        os.utime(root / (name + _LOCK))  # last use
    except BaseException:
        os.close(lock)
        raise
    # A full scan costs a stat per copy (thousands pile up over many tasks): after a new
    # copy (an older one of this template may be stale now), else now and then.
    if made or time.monotonic() - _last_clean[0] > CLEAN_INTERVAL_S:
        _last_clean[0] = time.monotonic()
        clean(keep=name, source=source)
    return TemplateCopy(target, lock)


def clean(keep: str | None = None, source: Path | None = None,
          max_idle_s: float | None = None) -> int:
    """Remove copies nobody uses that are stale (their template ``source`` has another
    key now: every copy of it but ``keep``) or idle for more than ``max_idle_s`` (default
    :data:`TEMPLATE_TTL_S`); see the module docstring. Returns how many were removed; 0
    at once when another process is cleaning."""
    root = TEMPLATE_DIR
    if not root.is_dir():
        return 0
    max_idle_s = TEMPLATE_TTL_S if max_idle_s is None else max_idle_s
    guard = _locked(root / _CLEAN_LOCK, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if guard is None:
        return 0
    removed = 0
    try:
        now = time.time()
        entries = {entry.name: entry for entry in os.scandir(root)}
        legacy = []
        for entry_name, entry in entries.items():
            if entry_name in (_CLEAN_LOCK, keep):
                continue
            if entry_name.startswith(_TRASH):
                shutil.rmtree(entry.path, ignore_errors=True)
            elif staging := _STAGING.match(entry_name):
                if not process_alive(int(staging["pid"])):
                    shutil.rmtree(entry.path, ignore_errors=True)
            elif entry_name.endswith(_LOCK):
                copy = entry_name[:-len(_LOCK)]
                if copy != keep and _stale(entry.path, source, now - max_idle_s):
                    removed += _remove(root, copy)
            elif entry_name + _LOCK not in entries and _LEGACY.match(entry_name):
                legacy.append(entry)
        old = [entry for entry in legacy if _owned_and_older(entry, now - max_idle_s)]
        if old:
            mounted = _overlay_layers()
            for entry in old:
                if entry.path not in mounted:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed += 1
    finally:
        os.close(guard)
    return removed


def _copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` owned by the sandbox user, whole or not at all."""
    staging = target.parent / f".{target.name}.{os.getpid()}.{next(_counter)}"
    try:
        shutil.copytree(source, staging, symlinks=True)
        subprocess.run(["chown", "-R", "--no-dereference", f"{SANDBOX_UID}:{SANDBOX_UID}",
                        str(staging)], check=True)
        with contextlib.suppress(OSError):  # another process made it first: use that one
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _locked(path: Path, how: int) -> int | None:
    """A descriptor of ``path`` (created) locked ``how``; None if ``LOCK_NB`` failed. A
    lock file a cleaner removed between our open and our lock is opened afresh."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, how)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def _stale(lock_path: str, source: Path | None, idle_before: float) -> bool:
    """Whether the copy of ``lock_path`` is of ``source`` (under an older key) or idle."""
    try:
        with open(lock_path, "rb") as handle:
            recorded = handle.read()
        used = os.stat(lock_path).st_mtime
    except OSError:
        return False
    of_source = source is not None and bool(recorded) and recorded == os.fsencode(source)
    return of_source or used < idle_before


def _remove(root: Path, copy: str) -> int:
    """Remove the copy ``copy`` unless someone holds it; returns 1 if removed."""
    lock_path = root / (copy + _LOCK)
    lock = _locked(lock_path, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if lock is None:
        return 0  # in use
    trash = root / f"{_TRASH}{copy}.{os.getpid()}.{next(_counter)}"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.rename(root / copy, trash)
        # Unlinked while held: whoever opened it meanwhile sees another inode and retries.
        lock_path.unlink()
    finally:
        os.close(lock)
    shutil.rmtree(trash, ignore_errors=True)
    return 1


def _owned_and_older(entry: os.DirEntry, before: float) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == SANDBOX_UID
            and info.st_ctime < before)


def _overlay_layers() -> set[str]:
    """Every overlay lower directory mounted in any mount namespace of this host (each
    local sandbox has one of its own)."""
    layers: set[str] = set()
    seen: set[int] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            namespace = os.stat(f"/proc/{pid}/ns/mnt").st_ino
            if namespace in seen:
                continue
            seen.add(namespace)
            text = Path(f"/proc/{pid}/mountinfo").read_text()
        except OSError:
            continue
        for options in re.findall(r"lowerdir=([^,\s]+)", text):
            layers.update(options.split(":"))
    return layers
