"""The sandbox contract: where an agent's commands run.

A :class:`Sandbox` is one isolated machine for one episode: a persistent shell session
(``cd`` and exported variables survive between commands), file access, and ``close``.
Backends come from plugins through the ``agentgym_sandboxes`` hook; built in are ``local``
(bubblewrap, the default) and ``docker``. Open one with :func:`open_sandbox`::

    async with await open_sandbox("local", template="/path/to/repo") as box:
        result = await box.exec("python -m pytest -q", timeout=60)
        print(result.exit_code, result.output)

Every backend gives the same semantics:

* ``exec`` never raises for what the command does: a non-zero exit, a timeout (exit code
  124, ``timed_out``), too much output (kept up to ``limits.output_bytes``, the rest
  replaced by a marker, ``truncated``), or invalid UTF-8 (decoded with replacement) all come
  back in the :class:`ExecResult`. It raises :class:`SandboxError` only when the sandbox
  itself is gone (crashed, closed), which ends the episode with that reason.
* After a timeout the command's processes are killed and the rest of the command is
  abandoned (``sleep 100; touch x`` never creates ``x``); the session goes on in the same
  working directory (a command that hung the shell itself restarts it, and the result says
  so).
* The workspace (``workdir``) starts as a copy-on-write view of ``template`` (when given):
  edits never reach the template.
* ``close`` kills every process the sandbox started and removes what it created; it is
  idempotent, and sandboxes still open at interpreter exit are closed then.
"""

from __future__ import annotations

import atexit
import contextlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import AgentGymError

#: Exit code of a command stopped by its timeout (as coreutils' ``timeout`` reports it).
TIMEOUT_EXIT_CODE = 124


class SandboxError(AgentGymError):
    """The sandbox itself failed (could not start, crashed, or is closed)."""


@dataclass
class ExecResult:
    """What a command did.

    Attributes:
        exit_code: the command's exit status; 124 when the timeout stopped it.
        output: stdout and stderr interleaved, decoded as UTF-8 with replacement.
        timed_out: the timeout stopped it.
        truncated: output beyond ``limits.output_bytes`` was dropped (a marker says where).
    """

    exit_code: int
    output: str
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class SandboxLimits:
    """Resource limits of one sandbox; every backend enforces each of them.

    Args:
        timeout_s: default wall-time limit of one command, in seconds.
        output_bytes: output kept per command; the rest is dropped with a marker.
        memory_mb: memory of all the sandbox's processes together.
        disk_mb: megabytes the workspace and /tmp may each grow by. Both built-in backends
            keep them on tmpfs, in memory: what is written there also counts against
            ``memory_mb``.
        pids: processes and threads alive at once.
        cpus: CPU cores, as a quota over all the sandbox's processes (a fraction is
            allowed; default one core, so that a runaway loop cannot starve the trainer or
            other episodes); ``None`` for no limit.
        network: outbound network access. Off by default: the sandbox has its own network
            namespace with loopback only. On: still a namespace of its own, with outbound
            traffic through user-mode NAT (``local``: slirp4netns) or the engine's default
            network (``docker``); the host's own loopback services stay unreachable.
    """

    timeout_s: float = 60.0
    output_bytes: int = 64 * 1024
    memory_mb: int = 2048
    disk_mb: int = 2048
    pids: int = 256
    cpus: float | None = 1.0
    network: bool = False

    def __post_init__(self) -> None:
        for name in ("timeout_s", "output_bytes", "memory_mb", "disk_mb", "pids"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {value!r}")
        if self.cpus is not None and not self.cpus > 0:
            raise ValueError(f"SandboxLimits.cpus must be > 0 or None, got {self.cpus!r}")


def truncate_output(data: bytes, limit: int) -> tuple[str, bool]:
    """Decode ``data`` keeping at most ``limit`` bytes: the head and the tail, with a marker
    in between saying how much was dropped (the end of a log is often what matters)."""
    output = BoundedOutput(limit)
    output.add(data)
    return output.text()


class BoundedOutput:
    """A command's output, in memory bounded however much it prints: what
    :func:`truncate_output` of the whole output would keep, and the count of all of it.

    Args:
        limit: bytes kept. Output up to ``limit`` bytes is kept whole; beyond that, the first
            ``limit // 2`` and the last ``limit - limit // 2``, with a marker between them
            saying how many bytes were dropped.
        hard_cap: total bytes past which :attr:`overflowed` turns true (a backend then stops
            the command); None for no cap.
    """

    def __init__(self, limit: int, hard_cap: int | None = None):
        if not limit > 0:
            raise ValueError(f"BoundedOutput limit must be > 0 bytes, got {limit!r}")
        self.limit, self.hard_cap = limit, hard_cap
        #: Bytes added so far, kept or not.
        self.total = 0
        self._keep_tail = limit - limit // 2
        self._head = bytearray()  # the first `limit` bytes
        self._tail = bytearray()  # at least the last `_keep_tail` bytes after the head

    @property
    def overflowed(self) -> bool:
        """More than ``hard_cap`` bytes were added."""
        return self.hard_cap is not None and self.total > self.hard_cap

    def add(self, data: bytes | bytearray) -> None:
        """Append ``data`` to the output."""
        if not data:
            return
        self.total += len(data)
        with memoryview(data) as view:  # slices without copies
            room = self.limit - len(self._head)
            if room > 0:
                self._head += view[:room]
                view = view[room:]
            if len(view) >= self._keep_tail:
                self._tail[:] = view[-self._keep_tail:]
            elif view:
                self._tail += view
                if len(self._tail) > 2 * self._keep_tail:  # trimmed now and then, not per add
                    del self._tail[:-self._keep_tail]

    def text(self) -> tuple[str, bool]:
        """The output decoded as UTF-8 (invalid bytes replaced), and whether bytes were
        dropped."""
        if self.total <= self.limit:
            return self._head.decode("utf-8", errors="replace"), False
        head = bytes(self._head[: self.limit // 2])
        tail = bytes((self._head + self._tail)[-self._keep_tail:])
        dropped = self.total - len(head) - len(tail)
        marker = f"\n[... {dropped} bytes of output truncated ...]\n"
        return (head.decode("utf-8", errors="replace") + marker
                + tail.decode("utf-8", errors="replace")), True


class Sandbox(ABC):
    """One isolated environment for one episode. See the module docstring."""

    #: The workspace directory inside the sandbox (the shell starts there).
    workdir: str = "/workspace"
    limits: SandboxLimits

    @abstractmethod
    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        """Run ``command`` in the session shell (``bash``), up to ``timeout`` seconds
        (default ``limits.timeout_s``)."""

    @abstractmethod
    async def read_file(self, path: str) -> bytes:
        """The bytes of ``path`` (relative paths are relative to ``workdir``)."""

    @abstractmethod
    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write ``data`` to ``path``, creating parent directories."""

    @abstractmethod
    async def list_dir(self, path: str = ".") -> list[str]:
        """Names in directory ``path``, sorted."""

    @abstractmethod
    async def close(self) -> None:
        """Kill every process, remove what the sandbox created. Idempotent."""

    @abstractmethod
    def close_now(self) -> None:
        """Best-effort synchronous close, for interpreter exit. Idempotent. Backends that
        :func:`track` their sandboxes :func:`untrack` them here."""

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


@dataclass
class _OpenSandboxes:
    """Sandboxes not yet closed, closed at interpreter exit as a last resort. Held strongly:
    a sandbox nobody references any more still has processes (or a container) to end."""

    live: set[Sandbox] = field(default_factory=set)

    def close_all(self) -> None:
        for box in list(self.live):
            with contextlib.suppress(Exception):  # at exit, keep closing the others
                box.close_now()
        self.live.clear()


open_sandboxes = _OpenSandboxes()
atexit.register(open_sandboxes.close_all)


def track(box: Sandbox) -> Sandbox:
    """Register ``box`` to be closed at interpreter exit if nobody closes it first.
    Backends call this once their sandbox is started, and :func:`untrack` when it closes."""
    open_sandboxes.live.add(box)
    return box


def untrack(box: Sandbox) -> None:
    """Forget ``box`` (it is closed): it is no longer closed at exit, nor kept alive."""
    open_sandboxes.live.discard(box)


async def open_sandbox(backend: str = "local", **kwargs: Any) -> Sandbox:
    """Start a sandbox of ``backend`` (an id from ``agentgym list sandboxes``).

    ``kwargs`` go to the backend: ``template`` (a directory for the workspace), ``image``
    (docker), ``limits`` (:class:`SandboxLimits`), ``mounts`` (path inside -> host
    directory, bound read-only), ``env`` (variables added to the sandbox's environment:
    the only ones it sees besides the backend's own ``PATH``, ``HOME`` and the like, never
    the host's), ``workdir`` (docker: a directory of the image to use as the workspace,
    such as SWE-bench's ``/testbed``).
    """
    from agentgym.core.registry import get

    return await get("sandboxes", backend).build(**kwargs)
