"""The sandbox contract: where an agent's commands run.

A :class:`Sandbox` is one isolated machine for one episode: a persistent shell session
(``cd`` and exported variables survive between commands), file access, and ``close``.
What a sandbox should hold is a :class:`SandboxSpec` (template, image, workdir, mounts, env,
limits); where it runs is a :class:`SandboxBackend`, contributed by a plugin through the
``agentgym_sandboxes`` hook. Built in are ``local`` (bubblewrap, the default) and
``docker``. Open one with :func:`agentgym.core.open_sandbox` (defined with the other
registry lookups in :mod:`agentgym.core.registry`)::

    from agentgym.core import open_sandbox

    async with await open_sandbox("local", template="/path/to/repo") as box:
        result = await box.exec("python -m pytest -q", timeout=60)
        print(result.exit_code, result.output)

A backend that does not support a field the spec sets refuses the spec
(:class:`UnsupportedFieldError`, naming the field, the backend and the fix) instead of
ignoring it; :func:`agentgym.core.sandbox_backend` tells plugins what a backend supports
without importing it.

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
* ``fresh_session`` stops every process the sandbox's commands started (services, detached
  loops, fork bombs and the session shell itself, whatever a command made of it: functions,
  aliases, traps) and starts a new session shell with the spec's environment in
  ``workdir``; files stay as they are. A grader calls it before it runs anything in a
  sandbox an agent used, so that nothing the agent left running or defined in its shell
  takes part in grading.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import difflib
import os
import posixpath
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentgym.core.errors import AgentGymError, InvalidArgumentError

#: Exit code of a command stopped by its timeout (as coreutils' ``timeout`` reports it).
TIMEOUT_EXIT_CODE = 124
#: The workspace's path inside a sandbox unless its spec names another.
DEFAULT_WORKDIR = "/workspace"


class SandboxError(AgentGymError):
    """The sandbox itself failed (could not start, crashed, or is closed)."""


class SandboxSpecError(SandboxError, ValueError):
    """A :class:`SandboxSpec` that cannot be opened: a field with a bad value, or one the
    chosen backend does not support. The message names the field, the value and the fix."""


class UnsupportedFieldError(SandboxSpecError):
    """A spec sets a field (to a value other than its default) that the backend does not
    support. ``backend``, ``field`` and ``value`` say which."""

    def __init__(self, backend: str, field_name: str, value: Any, fix: str):
        self.backend, self.field, self.value = backend, field_name, value
        super().__init__(f"the {backend} backend does not support {field_name}={value!r}:"
                         f" {fix}")


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
                raise SandboxSpecError(f"SandboxLimits.{name} must be > 0, got {value!r}")
        if self.cpus is not None and not self.cpus > 0:
            raise SandboxSpecError(f"SandboxLimits.cpus must be > 0 or None, got {self.cpus!r}")


@dataclass(frozen=True)
class SandboxSpec:
    """What one sandbox holds: the typed request every backend opens.

    Each field's default is what every backend gives; a backend that does not support a
    field refuses a spec setting it to anything else (:meth:`SandboxBackend.check`), never
    ignores it. The values are checked here, when the spec is made, with errors
    (:class:`SandboxSpecError`) that name the field, the value and the fix; what depends
    on the backend or the host (a mount hiding the backend's own directories, a host path
    that does not exist) is checked by the backend when it opens the spec.

    Args:
        template: a host directory whose copy becomes the workspace's starting content,
            copy-on-write: edits never reach the directory. Stored as a string.
            ``None``: the workspace starts empty (or, on ``docker`` with a ``workdir`` of
            the image, as the image holds it).
        image: a container image the sandbox runs from, present on the engine (agentgym
            never pulls; the docker backend's ``build_image`` builds one locally).
            ``None``: the backend's own system (``docker``: its default image).
        workdir: the workspace's absolute path inside the sandbox: where the shell starts
            and what relative file paths are relative to. Default ``/workspace``. On
            ``docker`` it may name a directory of the image (SWE-bench's ``/testbed``):
            that directory, as the image holds it, becomes the workspace.
        mounts: path inside the sandbox -> host file or directory, bound there read-only
            (a shared virtual environment, a dataset). Paths inside are absolute; they are
            normalized here (``/opt//env/`` -> ``/opt/env``).
        env: variables added to the sandbox's environment: besides the backend's own
            (``PATH``, ``HOME``, ``LANG`` ...) the only ones its commands see, never the
            host's. Names are shell identifiers; values strings without NUL bytes.
        limits: resource limits and network access (:class:`SandboxLimits`; network off by
            default).
        scratch_dirs: absolute paths inside the sandbox made as empty directories the
            sandbox's user may write, besides the workspace and ``/tmp`` (task formats
            that grade with fixed paths need them: Harbor's ``/tests`` and ``/logs``).
            They live on the sandbox's own disk, as ``/tmp`` does, and vanish with it.
            Normalized like mount points.

    ``None`` for ``workdir``, ``mounts``, ``env``, ``limits`` or ``scratch_dirs`` means the
    default.
    """

    template: str | None = None
    image: str | None = None
    workdir: str = DEFAULT_WORKDIR
    mounts: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    scratch_dirs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalized values are set once, here
        if self.template is not None:
            if not isinstance(self.template, (str, os.PathLike)) or not os.fspath(
                    self.template):
                raise SandboxSpecError(
                    f"SandboxSpec.template must be a host directory (a str or Path), got"
                    f" {self.template!r}; pass the directory the workspace starts from, or"
                    " None for an empty workspace")
            set_(self, "template", os.fspath(self.template))
        if self.image is not None and (not isinstance(self.image, str)
                                       or not re.fullmatch(r"[^\s]+", self.image)):
            raise SandboxSpecError(
                f"SandboxSpec.image must be an image name such as 'agentgym/sandbox:default'"
                f" (no spaces), got {self.image!r}; or None for the backend's own system")
        set_(self, "workdir", self._workdir(self.workdir))
        set_(self, "mounts", self._mounts(self.mounts))
        set_(self, "env", self._env(self.env))
        limits = SandboxLimits() if self.limits is None else self.limits
        if not isinstance(limits, SandboxLimits):
            raise SandboxSpecError(
                f"SandboxSpec.limits must be a SandboxLimits, got {limits!r}; e.g."
                " SandboxLimits(timeout_s=120, memory_mb=4096)")
        set_(self, "limits", limits)
        set_(self, "scratch_dirs", self._scratch_dirs(self.scratch_dirs))

    @staticmethod
    def _workdir(workdir: Any) -> str:
        if workdir is None:
            return DEFAULT_WORKDIR
        if not isinstance(workdir, str) or not workdir.startswith("/"):
            raise SandboxSpecError(
                f"SandboxSpec.workdir must be an absolute path inside the sandbox, got"
                f" {workdir!r}; e.g. {DEFAULT_WORKDIR!r} (the default) or '/testbed'")
        normalized = inside_path(workdir)
        if normalized == "/":
            raise SandboxSpecError(
                f"SandboxSpec.workdir {workdir!r} would make the whole filesystem the"
                f" workspace; name a directory, e.g. {DEFAULT_WORKDIR!r} (the default)")
        return normalized

    @staticmethod
    def _mounts(mounts: Any) -> dict[str, str]:
        if mounts is None:
            return {}
        if not isinstance(mounts, Mapping):
            raise SandboxSpecError(
                f"SandboxSpec.mounts must map paths inside the sandbox to host paths, got"
                f" {mounts!r}; e.g. {{'/opt/env': '/host/env'}}")
        checked: dict[str, str] = {}
        for inside, host in mounts.items():
            if not isinstance(inside, str) or not inside.startswith("/"):
                raise SandboxSpecError(
                    f"mount point {inside!r} must be an absolute path inside the sandbox,"
                    " e.g. {'/opt/env': '/host/env'}")
            point = inside_path(inside)
            if point == "/":
                raise SandboxSpecError(
                    f"mount point {inside!r} would overlap the whole filesystem; pick a"
                    " directory of its own (e.g. /opt/NAME)")
            if point in checked:
                raise SandboxSpecError(f"mount point {inside!r} is given twice (as"
                                       f" {point!r}); give each path once")
            if not isinstance(host, (str, os.PathLike)) or not os.fspath(host):
                raise SandboxSpecError(
                    f"the host path mounted at {inside!r} must be a str or Path, got"
                    f" {host!r}")
            checked[point] = os.fspath(host)
        return checked

    @staticmethod
    def _scratch_dirs(paths: Any) -> tuple[str, ...]:
        if paths is None:
            return ()
        if isinstance(paths, str) or not all(isinstance(p, str) for p in paths):
            raise SandboxSpecError(
                f"SandboxSpec.scratch_dirs must be a sequence of absolute paths, got"
                f" {paths!r}; e.g. ('/tests', '/logs')")
        normalized: list[str] = []
        for path in paths:
            point = inside_path(path) if path.startswith("/") else ""
            if not point or point == "/":
                raise SandboxSpecError(
                    f"scratch directory {path!r} must be an absolute path inside the sandbox"
                    " other than '/', e.g. '/tests'")
            if point in normalized:
                raise SandboxSpecError(f"scratch directory {path!r} is given twice; give"
                                       " each path once")
            normalized.append(point)
        return tuple(normalized)

    @staticmethod
    def _env(env: Any) -> dict[str, str]:
        if env is None:
            return {}
        if not isinstance(env, Mapping):
            raise SandboxSpecError(f"SandboxSpec.env must map names to values, got {env!r};"
                                   " e.g. {'PYTHONHASHSEED': '0'}")
        for name, value in env.items():
            if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise SandboxSpecError(
                    f"environment variable name {name!r} is not a shell identifier"
                    " (letters, digits and '_', not starting with a digit)")
            if not isinstance(value, str) or "\0" in value:
                raise SandboxSpecError(f"environment variable {name}={value!r} must be a"
                                       " string without NUL bytes")
        return dict(env)

    @classmethod
    def from_fields(cls, **fields: Any) -> SandboxSpec:
        """A spec from keyword arguments, refusing a name that is not a field with the
        closest field and the list of them (rather than Python's bare ``TypeError``)."""
        for name in fields:
            if name not in SPEC_FIELDS:
                close = difflib.get_close_matches(name, SPEC_FIELDS, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise SandboxSpecError(
                    f"{name!r} is not a sandbox spec field; {hint}the fields are"
                    f" {', '.join(sorted(SPEC_FIELDS))}")
        return cls(**fields)


#: The names of :class:`SandboxSpec`'s fields.
SPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(SandboxSpec))


#: Mounts every sandbox opened in this context gets besides its spec's (:func:`extra_mounts`).
_EXTRA_MOUNTS: ContextVar[Mapping[str, str] | None] = ContextVar("agentgym_extra_mounts",
                                                                 default=None)


@contextlib.contextmanager
def extra_mounts(mounts: Mapping[str, str] | None) -> Iterator[None]:
    """Within the block (and in the tasks it starts), every sandbox opened through
    :func:`~agentgym.core.registry.open_sandbox` also gets ``mounts`` (read-only, as
    :attr:`SandboxSpec.mounts`), besides those of an enclosing block. An episode reset
    with the ``sandbox_mounts`` option opens its sandbox so, whatever spec its env builds:
    that is how a harness's program and the bridge to the model server reach the task's
    sandbox (:mod:`agentgym.core.harness`); an env's MCP servers reach it the same way.
    A mount point named both here and by an enclosing block is refused."""
    enclosing = _EXTRA_MOUNTS.get() or {}
    clash = sorted({inside_path(p) for p in enclosing} & {inside_path(p) for p in mounts or {}})
    if clash:
        raise SandboxSpecError(f"{', '.join(clash)} is mounted twice into the episode's"
                               " sandbox (by the sandbox_mounts option and the env); move one")
    token = _EXTRA_MOUNTS.set({**enclosing, **(mounts or {})})
    try:
        yield
    finally:
        _EXTRA_MOUNTS.reset(token)


def with_extra_mounts(spec: SandboxSpec) -> SandboxSpec:
    """``spec`` with the mounts of the enclosing :func:`extra_mounts` added; a mount point
    both name is refused (neither may hide the other)."""
    extra = _EXTRA_MOUNTS.get()
    if not extra:
        return spec
    points = {inside_path(p) for p in extra}
    clash = sorted(points & set(spec.mounts))
    if clash:
        raise SandboxSpecError(
            f"the sandbox's spec already mounts {', '.join(clash)}, which the episode's"
            " sandbox_mounts option mounts too; move one of them")
    return dataclasses.replace(spec, mounts={**spec.mounts, **extra})


def inside_path(path: str) -> str:
    """``path`` (absolute, inside a sandbox) normalized: ``/opt//env/`` -> ``/opt/env``."""
    return "/" + posixpath.normpath(path).lstrip("/")  # normpath keeps a leading '//'


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
            raise InvalidArgumentError(f"BoundedOutput limit must be > 0 bytes, got {limit!r}")
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
    """One isolated environment for one episode: a persistent shell session, file access
    and ``close``; what every backend guarantees (``exec`` never raises for what the
    command does, timeouts kill the command's processes, ``fresh_session`` before grading)
    is the contract of :mod:`agentgym.core.sandbox`. Open one with
    :func:`~agentgym.core.registry.open_sandbox`; it is an async context manager."""

    #: The workspace directory inside the sandbox (the shell starts there): the spec's.
    workdir: str = DEFAULT_WORKDIR
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

    async def fresh_session(self) -> None:
        """Stop every process that commands started and give a new session shell.

        Every process of the sandbox's commands ends (not chosen by name or pattern: the
        whole sandbox's processes but the backend's own machinery, such as its init),
        including those that detached (``setsid``, ``nohup``), forked without end or
        replaced the shell, and the session shell itself; then a new shell starts in
        ``workdir`` with the environment the spec gave (what commands exported, defined or
        trapped in the old one is gone). Files are untouched. Raises :class:`SandboxError`
        when the sandbox is gone.

        Backends must implement it: graders rely on it (the terminal plugin's grader calls
        it first; docs/reward-integrity.md). The default raises ``NotImplementedError``
        naming the backend.
        """
        raise NotImplementedError(
            f"the {type(self).__name__} sandbox cannot stop its commands' processes and give a"
            " fresh session shell (Sandbox.fresh_session); graders need it: implement it in"
            " the backend")

    async def seal_session(self) -> tuple[str, ...]:
        """A fresh session (:meth:`fresh_session`) whose processes cannot reach into one
        another, for a grader whose tests run the agent's code: that code runs as the
        same user as the tests around it, and could otherwise trace them (``ptrace``),
        write their memory (``process_vm_writev``, ``/proc/PID/mem``) or take their
        descriptors, and change what they compute. What the seal holds lasts until the
        next :meth:`fresh_session`.

        Returns what holds, by name: ``"tracing"`` (the calls that trace another process,
        read or write its memory or take its descriptors are refused), ``"memory"`` (the
        session shell is non-dumpable: what a grader sends through it, test files
        included, cannot be read out of its memory, nor written in) and ``"proc-write"``
        (no file under ``/proc`` opens for writing, ``/proc/PID/mem`` of the tests' own
        processes included). The default seals nothing: it gives a fresh session and
        returns ``()``, so a grader can say that its tests ran unsealed.
        """
        await self.fresh_session()
        return ()

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


@dataclass(frozen=True)
class SandboxImage:
    """What a backend's sandboxes run in when their spec names no image: what a plugin may
    tell an agent about its machine, or build on, without importing the backend.

    Attributes:
        name: the image (``SandboxSpec(image=name)``; a Dockerfile's ``FROM name`` builds
            on it).
        programs: programs on its PATH besides bash and coreutils (what a prompt may name).
        user: the unprivileged user commands run as, ``uid:gid`` (a Dockerfile's
            ``chown`` / ``COPY --chown`` gives files to it).
        home: that user's home.
    """

    name: str
    programs: tuple[str, ...] = ()
    user: str = "1000:1000"
    home: str = "/home/agent"


class SandboxBackend(ABC):
    """A kind of sandbox (``local``, ``docker``, a plugin's own): what plugins contribute
    through the ``agentgym_sandboxes`` hook, one object per backend.

    A backend says which :class:`SandboxSpec` fields it supports (:attr:`supports`);
    :meth:`open` refuses a spec that sets any other field to a value other than its
    default (:meth:`check`), then starts the sandbox (:meth:`start`). Plugins ask a
    backend about its capabilities through
    :func:`~agentgym.core.registry.sandbox_backend`, never by its name.

    Subclasses set :attr:`name`, :attr:`description` and :attr:`supports`, may explain in
    :attr:`hints` what to do instead of an unsupported field, and implement :meth:`start`.
    Construction must be cheap (listing backends builds them): import heavy libraries in
    :meth:`start`.
    """

    #: The id users type: ``--backend NAME``, ``open_sandbox(NAME)``, ``agentgym list
    #: sandboxes``.
    name: ClassVar[str]
    #: One line for ``agentgym list sandboxes``.
    description: ClassVar[str] = ""
    #: The spec fields this backend honours (a subset of :data:`SPEC_FIELDS`).
    supports: ClassVar[frozenset[str]] = frozenset()
    #: Per unsupported field, why and what to do instead (the end of the error message).
    hints: ClassVar[Mapping[str, str]] = {}
    #: The image a spec without one runs in, for a backend that runs images (and builds
    #: them: :meth:`build_image`); None for one that does not (``local`` runs commands on
    #: the host's own system directories).
    default_image: ClassVar[SandboxImage | None] = None

    @property
    def id(self) -> str:
        """The registry id: :attr:`name`."""
        return self.name

    def check(self, spec: SandboxSpec) -> None:
        """Raise :class:`UnsupportedFieldError` for the first field of ``spec`` set to a
        value other than its default that this backend does not support."""
        defaults = SandboxSpec()
        for name in sorted(SPEC_FIELDS - self.supports):
            value = getattr(spec, name)
            if value != getattr(defaults, name):
                raise UnsupportedFieldError(self.name, name, value, self.hints.get(name) or (
                    f"leave {name} unset, or use a backend that supports it (`agentgym list"
                    " sandboxes` shows what each supports)"))

    async def open(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox for ``spec``, after :meth:`check`. Raises
        :class:`SandboxError` when it cannot start (saying why and how to fix it)."""
        self.check(spec)
        return await self.start(spec)

    @abstractmethod
    async def start(self, spec: SandboxSpec) -> Sandbox:
        """Start a sandbox for ``spec``, already checked against :attr:`supports`."""

    def build_image(self, *, base: str | None = None,
                    files: Mapping[str, str | os.PathLike[str]] | None = None,
                    context: str | os.PathLike[str] | None = None,
                    dockerfile: str | None = None, **options: Any) -> str:
        """Build an image locally (or find it built) and return its name for
        ``SandboxSpec(image=...)``: ``base`` (default :attr:`default_image`) with ``files``
        (path in the image -> host path) copied in, or the Dockerfile folder ``context``
        (with ``dockerfile``, a Dockerfile's text, in place of its own); ``options`` are
        the backend's own. Blocking. A backend that runs images overrides it; this one
        raises :class:`SandboxError`."""
        raise SandboxError(f"the {self.name} backend runs no images, so it builds none; use"
                           " a backend with a default_image (docker)")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
