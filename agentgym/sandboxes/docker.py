"""The ``docker`` sandbox: one container per sandbox, driven through the docker SDK.

Implements :class:`agentgym.core.sandbox.Sandbox` (its module docstring is the contract).
How each promise is kept:

* **Isolation.** The container runs with network ``none`` (unless ``limits.network``),
  no capabilities, ``no-new-privileges``, a read-only root (unless the workspace is a
  directory of the image, or ``DockerBackend(read_only_root=False)``) and no host mounts
  but the read-only ``mounts`` asked for: the engine's socket is not
  inside. Commands run as uid 1000 (``agent`` in the default image), ``HOME=/home/agent``.
* **Limits.** ``memory_mb`` is the container's memory with no swap; ``pids`` the processes
  commands may have alive (plus the few the sandbox itself uses); ``cpus`` a CPU quota.
  ``/workspace``, ``/tmp`` and ``/home/agent`` are tmpfs mounts of ``disk_mb`` each (the
  workspace also fits the template); tmpfs pages count against the memory limit too. A
  ``workdir`` of the image is the workspace instead of ``/workspace``; it may be the home
  itself, which then is that directory and no tmpfs.
* **Workspace.** ``template`` is copied into the ``/workspace`` tmpfs when the sandbox
  starts: edits stay in the container and vanish with it.
* **Session.** One ``bash`` per sandbox, attached through the engine's API socket, speaks
  the protocol of :mod:`agentgym.sandboxes.shell`: every command runs with ``eval`` in the
  shell itself (so ``cd`` and ``export`` persist), its stdin from /dev/null and stderr
  merged into stdout, followed by a sentinel carrying the exit status and working
  directory. Output is read up to ``limits.output_bytes`` (head and tail kept); a command
  printing far more (:data:`OUTPUT_HARD_CAP`) is stopped.
* **Timeouts.** A second, idle ``bash`` (the control shell) signals the session shell to
  abandon the rest of its command (``sleep 100; rm -rf x`` never reaches ``rm``), then
  stops and kills the processes descending from the session shell (the command's), with
  builtins only, so that it works even when a fork bomb holds every pid. A shell that does
  not come back after that is killed with every other process of the sandbox user (as on
  the local backend, where the shell's end ends its namespace) and replaced by a new one in
  the last known working directory, and the output says so. Processes that daemonize
  outlive their command and its timeout, as on the local backend, but not
  ``fresh_session`` or the sandbox.
* **Fresh session.** ``fresh_session`` kills every process of the sandbox user (the
  container's init and keep-alive run as root and stay), from the control shell, then
  again from a new control shell no command could have reached, and starts a new session
  shell with the container's environment.
* **Lifetime.** ``close`` removes the container (killing everything in it). Containers
  carry the labels ``agentgym.sandbox=1`` and ``agentgym.owner_pid``, so :func:`gc` can
  remove those whose owner died without closing them.

Blocking docker calls run on threads (one per sandbox for its commands), never on the
event loop, so many sandboxes run commands at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import socket
import tarfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import (
    DEFAULT_WORKDIR,
    SPEC_FIELDS,
    TIMEOUT_EXIT_CODE,
    BoundedOutput,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxImage,
    SandboxLimits,
    SandboxSpec,
    track,
    untrack,
)
from agentgym.sandboxes import builds, seal, seccomp, shell
from agentgym.sandboxes.image import (
    DEFAULT_IMAGE,
    PROGRAMS,
    SANDBOX_HOME,
    SANDBOX_USER,
    docker_client,
    ensure_image,
)
from agentgym.sandboxes.mounts import check_mounts, check_scratch_dirs, check_workdir
from agentgym.sandboxes.processes import process_alive, process_start

#: Label that marks agentgym's containers, and the labels naming the process that owns one.
LABEL = "agentgym.sandbox"
OWNER_PID_LABEL = "agentgym.owner_pid"
OWNER_HOST_LABEL = "agentgym.owner_host"
OWNER_START_LABEL = "agentgym.owner_started"

#: A command whose output passes max(this, 16 x limits.output_bytes) bytes is stopped.
OUTPUT_HARD_CAP = 32 * 1024 * 1024

#: Seconds a shell gets to report back after its command's processes were killed.
KILL_GRACE_S = 2.0

#: Processes the sandbox itself keeps alive (init, keep-alive, the two shells), added to
#: ``limits.pids`` so that commands get what the limits say.
_OWN_PIDS = 4

#: Where programs the backend runs itself are looked up (never the container's PATH, whose
#: folders a task's image may let the agent write).
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
#: The shells' command: bash found on :data:`SYSTEM_PATH`, started with the container's own
#: environment (its PATH included, for the agent's commands).
SHELL_ARGV = ["/bin/sh", "-c",
              f'exec "$(PATH={SYSTEM_PATH}; command -v bash)" --noprofile --norc']


def sealed_shell_argv() -> list[str]:
    """The session shell sealed (``seal_session``): bash behind the image's python3
    running :data:`agentgym.sandboxes.seal.SEALER` with this machine's seal filter; bash
    alone in an image without python3."""
    return ["/bin/sh", "-c",
            f'b="$(PATH={SYSTEM_PATH}; command -v bash)";'
            f' p="$(PATH={SYSTEM_PATH}; command -v python3)";'
            ' [ -n "$p" ] && exec "$p" -I -S -c "$1" "$2" "$b" --noprofile --norc;'
            ' exec "$b" --noprofile --norc',
            "sh", seal.SEALER, seccomp.seal_program().hex()]


#: Containers tried for one sandbox when each stops before anything ran in it.
_START_ATTEMPTS = 3

# Bash read by both shells of a sandbox, after the shared prelude (which aborts a command
# on SIGURG: see agentgym.sandboxes.shell).
#
# __ag_kill: stop, then kill, every process this uid may signal except those kept, using
# builtins only (no fork), so it works when a fork bomb holds every pid; stopping first
# keeps processes from forking replacements while they are being killed. Its second
# argument, the session shell, is first sent SIGURG to abort its command.
# __ag_kill_tree: the same for the processes descending from the session shell (its
# command's), found by parent pid: what a timeout ends, as on the local backend; processes
# that detached (reparented to init) are not the command's any more and stay. The whole
# tree is stopped before any is killed, so that no child is orphaned out of it.
_KILL_FUNCTIONS = r"""
__ag_tree() {
  local p stat tree=" $1 " grew=1
  local -A parent=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    read -r stat 2>/dev/null < "/proc/$p/stat" || continue
    stat=${stat##*) }
    [[ $stat == Z* ]] && continue
    stat=${stat#* }
    parent[$p]=${stat%% *}
  done
  __ag_pids=
  while [[ $grew ]]; do
    grew=
    for p in "${!parent[@]}"; do
      if [[ $tree == *" ${parent[$p]} "* ]]; then
        tree+="$p "; __ag_pids+=" $p"; unset "parent[$p]"; grew=1
      fi
    done
  done
}
__ag_kill_tree() {
  local prev=none i
  kill -URG "$1" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    __ag_tree "$1"
    [[ -z $__ag_pids || $__ag_pids == "$prev" ]] && break
    kill -STOP $__ag_pids 2>/dev/null
    prev=$__ag_pids
  done
  for ((i = 0; i < 500; i++)); do
    __ag_tree "$1"
    [[ -z $__ag_pids ]] && break
    kill -KILL $__ag_pids 2>/dev/null
  done
}
__ag_others() {
  local p stat; __ag_pids=
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [[ " $__ag_keep " == *" $p "* ]] && continue
    read -r stat 2>/dev/null < "/proc/$p/stat" || continue
    [[ ${stat##*) } == Z* ]] && continue
    kill -0 "$p" 2>/dev/null && __ag_pids+=" $p"
  done
}
__ag_kill() {
  local prev=none i
  __ag_keep="1 $$ $1"
  [[ $2 ]] && kill -URG "$2" 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    __ag_others
    [[ -z $__ag_pids || $__ag_pids == "$prev" ]] && break
    kill -STOP $__ag_pids 2>/dev/null
    prev=$__ag_pids
  done
  for ((i = 0; i < 500; i++)); do
    __ag_others
    [[ -z $__ag_pids ]] && break
    kill -KILL $__ag_pids 2>/dev/null
  done
}
"""


#: Hands a workdir of the image to the sandbox user (run as root, the workdir as $1):
#: everything under it not owned by the user yet is, then nothing is left that is not.
HAND_OVER = ('mkdir -p -- "$1" || exit 1; find "$1" ! -user 1000 -exec chown -h 1000:1000'
             ' {} + 2>/dev/null; left=$(find "$1" ! -user 1000 2>/dev/null | head -5);'
             ' [ -z "$left" ] || { echo "not handed over: $left"; exit 1; }')


class DockerSandbox(Sandbox):
    """A :class:`Sandbox` in a Docker container. Build one with :meth:`create`."""

    workdir = "/workspace"

    def __init__(self, client: Any, container: Any, limits: SandboxLimits,
                 control: _Shell, session: _Shell):
        self.client, self.container, self.limits = client, container, limits
        self.id: str = container.id
        self._control, self._session = control, session
        self._cwd = self.workdir
        self._closed = False
        self._gone: str | None = None  # why the container is unusable, once known
        self._shell_lock = threading.Lock()  # one command at a time in the session
        self._control_lock = threading.Lock()
        self._cancel = threading.Event()  # the awaiting coroutine gave up on a command
        self._runner = _Runner(f"agentgym-docker-{self.id[:12]}")
        self._locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @classmethod
    async def create(cls, spec: SandboxSpec | None = None,
                     read_only_root: bool = True) -> DockerSandbox:
        """Start a container for ``spec``: from ``spec.image`` (default
        :data:`DEFAULT_IMAGE`, built on first use), with ``spec.template`` copied into the
        workspace, under ``spec.limits``. ``mounts`` are bound read-only (see
        :func:`agentgym.sandboxes.mounts.check_mounts`).

        A ``workdir`` other than ``/workspace`` makes a directory of the image the
        workspace instead of the ``/workspace`` tmpfs (SWE-bench images hold their
        repository, installed in place, at ``/testbed``; it is created if the image lacks
        it): it is handed to the sandbox user at start, and the root filesystem is
        writable, so edits land in the container's own layer (the image never changes;
        ``disk_mb`` then bounds only ``/tmp`` and the home).

        ``env`` adds variables to the container's environment (``HOME`` and the image's own
        are there already); nothing of the host's environment is passed on.

        Raises :class:`SandboxError` when the docker SDK is missing, no engine is reachable,
        the image does not exist, or the container fails to start.
        """
        spec = spec or SandboxSpec()
        DockerBackend().check(spec)
        workdir = spec.workdir
        system = ("/proc", "/dev", "/sys", "/tmp")
        reserved = (*system, SANDBOX_HOME)
        # The home itself may be the workspace (tasks written for an agent working in its
        # home, as AgentBench's are); a path inside or above it may not.
        check_workdir(workdir, system if workdir == SANDBOX_HOME else reserved, "docker")
        checked = check_mounts(spec.mounts, (*reserved, workdir))
        scratch = check_scratch_dirs(spec.scratch_dirs, (*reserved, workdir, *checked))
        template = None
        if spec.template is not None:
            template = Path(spec.template)
            if not template.is_dir():
                raise SandboxError(f"template {str(template)!r} is not a directory: pass the"
                                   " directory whose copy becomes the workspace, or None.")
        future = _pool.submit(cls._start, template, spec.image or DEFAULT_IMAGE, spec.limits,
                              read_only_root, checked,
                              None if workdir == DEFAULT_WORKDIR else workdir, dict(spec.env),
                              scratch)
        try:
            box = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # The container may still come up: close it then, since nobody will.
            future.add_done_callback(_close_unclaimed)
            raise
        return box

    @classmethod
    def _start(cls, *args: Any, **kwargs: Any) -> DockerSandbox:
        # An engine under load now and then starts a container whose keep-alive dies at once
        # (seen on CI: `sleep` exits 127 from a sound image, nothing of ours run yet). That
        # is the engine's failure, not the image's: start a fresh container; an image that
        # really cannot start fails every time, and its last error is raised.
        for attempt in range(_START_ATTEMPTS):
            try:
                return cls._start_once(*args, **kwargs)
            except _DiedAtStart as error:
                if attempt + 1 == _START_ATTEMPTS:
                    raise SandboxError(str(error)) from error.__cause__
                _log(f"{error}; starting a fresh container ({attempt + 2} of"
                     f" {_START_ATTEMPTS})")
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(cls, template: Path | None, image: str, limits: SandboxLimits,
                    read_only_root: bool, mounts: dict[str, Path] | None = None,
                    workdir: str | None = None, env: dict[str, str] | None = None,
                    scratch_dirs: tuple[str, ...] = ()) -> DockerSandbox:
        client = _client()
        in_image = workdir is not None
        workdir = workdir or cls.workdir
        ensure_image(image, client, log=_log)
        disk = limits.disk_mb * 1024 * 1024
        workspace_size = disk + (_tree_size(template) if template else 0)

        def tmpfs(size: int, mode: str) -> str:
            return f"size={size},mode={mode},uid=1000,gid=1000,exec"

        try:
            container = client.containers.create(
                image,
                command=["sleep", "infinity"],
                # Only init and this keep-alive run as (capability-less) root, so that
                # commands, which run as uid 1000, cannot kill them and end the sandbox.
                user="0:0",
                init=True,
                name=f"agentgym-{os.getpid()}-{uuid.uuid4().hex[:8]}",
                hostname="sandbox",
                labels=_owner_labels(),
                network_mode=None if limits.network else "none",
                mem_limit=f"{limits.memory_mb}m",
                memswap_limit=f"{limits.memory_mb}m",
                pids_limit=limits.pids + _OWN_PIDS,
                nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
                read_only=read_only_root and not in_image,
                tmpfs={
                    **({} if in_image else {workdir: tmpfs(workspace_size, "755")}),
                    "/tmp": tmpfs(disk, "1777"),
                    **({} if workdir == SANDBOX_HOME else {SANDBOX_HOME: tmpfs(disk, "755")}),
                    **{path: tmpfs(disk, "755") for path in scratch_dirs},
                },
                volumes={str(host): {"bind": inside, "mode": "ro"}
                         for inside, host in (mounts or {}).items()},
                environment={**(env or {}), "HOME": SANDBOX_HOME},
                working_dir=workdir,
                cap_drop=["ALL"],
                # Root (init and the keep-alive, never a command) may only hand the image's
                # workspace to the sandbox user.
                cap_add=["CHOWN"] if in_image else None,
                security_opt=["no-new-privileges"],
                auto_remove=False,
                detach=True,
            )
        except Exception as error:
            raise SandboxError(f"could not create a container from image {image!r}: {error}"
                               ) from error
        try:
            container.start()
            if in_image:
                # Only what is not the user's yet: a folder the image already gave the
                # user may be closed even to root here (no CAP_DAC_READ_SEARCH).
                for attempt in range(3):
                    code, out, err = _run_in(client.api, container.id,
                                             ["sh", "-c", HAND_OVER, "sh", workdir], None,
                                             "/", user="0:0")
                    # The runtime failed to start the process at all (runc's "read
                    # init-p: connection reset" under load): nothing ran, so run it again.
                    if not (code == 126 and b"OCI runtime exec failed" in out + err):
                        break
                    time.sleep(0.2 * (attempt + 1))
                if code != 0:
                    raise SandboxError(f"workdir {workdir!r} of image {image!r} could not be"
                                       f" handed to the sandbox user (exit {code}):"
                                       f" {(out + err).decode(errors='replace')[-500:]}"
                                       f"{_state_of(client, container.id)}")
            control = _Shell(client.api, container.id)
            control.start(workdir)
            if template is not None:
                _copy_tree_in(client.api, container.id, template, workdir)
            session = _Shell(client.api, container.id)
            session.start(workdir)
        except BaseException as error:
            # Read before it is removed: a container that stopped says why (killed, exited).
            # A shell that lost its container may see it go before the engine has marked
            # it stopped: a moment's wait tells a dead container from one that runs on.
            state = "" if isinstance(error, SandboxError) else \
                _state_of(client, container.id, settle_s=2.0)
            with contextlib.suppress(Exception):
                container.remove(force=True)
            if isinstance(error, SandboxError):
                raise
            failure = (SandboxError if not isinstance(error, Exception) or not state
                       or "killed for memory: True" in state else _DiedAtStart)
            raise failure(f"the container from image {image!r} failed to start: {error}"
                          f"{state} (an image needs bash, coreutils and tar)") from error
        # Tracked here, in the thread: a container started for a create that was cancelled
        # meanwhile is still closed at exit.
        box = cls(client, container, limits, control, session)
        box.workdir = box._cwd = workdir
        return track(box)

    # -- commands -------------------------------------------------------------------------

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.limits.timeout_s if timeout is None else timeout
        if not timeout > 0:
            raise InvalidArgumentError(f"timeout must be > 0 seconds, got {timeout!r}")
        self._check_usable()
        loop = asyncio.get_running_loop()
        # Serialize per event loop in asyncio, so waiting callers hold no thread.
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            try:
                return await asyncio.wrap_future(
                    self._runner.submit(self._exec_sync, command, float(timeout)))
            except asyncio.CancelledError:
                self._cancel.set()  # the runner kills the command and resynchronizes
                raise

    def _exec_sync(self, command: str, timeout: float) -> ExecResult:
        with self._shell_lock:
            self._cancel.clear()
            self._check_usable()
            refused = shell.refusal(command)
            if refused is not None:
                return refused
            script = shell.command_script(command)
            limit = self.limits.output_bytes
            out = BoundedOutput(limit, max(OUTPUT_HARD_CAP, 16 * limit))
            session = self._session
            try:
                reply = session.run(script, out, time.monotonic() + timeout, self._cancel)
            except OSError:
                reply = _Reply("eof")
            stopped = reply.kind  # timeout | cancel | overflow, or done | eof
            notes: list[str] = []
            if stopped == "timeout":
                notes.append(shell.timeout_note(timeout))
            elif stopped == "overflow":
                notes.append(shell.overflow_note(out.hard_cap))
            if stopped in ("timeout", "cancel", "overflow"):
                self._kill_command(session.pid)
                try:
                    reply = session.read_reply(script.nonce, out,
                                               time.monotonic() + KILL_GRACE_S, None,
                                               watch_overflow=False)
                    if reply.kind == "done":
                        settled = session.run(shell.settle_script(), None,
                                              time.monotonic() + KILL_GRACE_S)
                        if settled.kind != "done":
                            reply = settled
                except OSError:
                    reply = _Reply("eof")
                if reply.kind == "timeout":
                    # The shell itself does not come back (it trapped SIGURG and loops, or
                    # sleeps between fork retries): replace it.
                    self._kill()
                    self._replace_session()
                    notes.append(f"[the shell did not respond; a new shell was started in"
                                 f" {self._cwd} (exported variables were reset)]")
                    reply = _Reply("done", 137)
            if reply.kind == "eof":
                self._raise_if_gone()
                status = session.exit_code()
                self._replace_session()
                notes.append(f"[the shell exited with status {status}; a new shell was started"
                             f" in {self._cwd} (exported variables were reset)]")
                reply = _Reply("done", status)
            if reply.pwd:
                self._cwd = reply.pwd
            output, truncated = out.text()
            output = shell.with_notes(output, notes)
            timed_out = stopped in ("timeout", "cancel")
            code = TIMEOUT_EXIT_CODE if timed_out else 137 if stopped == "overflow" else reply.code
            return ExecResult(code, output, timed_out=timed_out, truncated=truncated)

    def _kill_command(self, session_pid: int) -> None:
        """Make the session shell abandon its command and kill the processes it started
        (its descendants), as the local backend does: services the agent detached earlier
        go on running."""
        self._control_run(f"__ag_kill_tree '{session_pid}'")

    def _kill(self) -> None:
        """Kill every process of the sandbox user but the control shell."""
        self._control_run("__ag_kill '' ''")

    def _control_run(self, line: str) -> None:
        """Run ``line`` (one of the kill functions) in the control shell; a new control
        shell if a command killed the old one."""
        script = shell.control_script(line)
        with self._control_lock:
            try:
                reply = self._control.run(script, None, time.monotonic() + 30)
            except OSError:
                reply = _Reply("eof")
            if reply.kind != "done":
                # A command killed the control shell (kill -9 -1): start another.
                self._raise_if_gone()
                self._control.close()
                self._control = _Shell(self.client.api, self.id)
                try:
                    self._control.start(self.workdir)
                    self._control.run(script, None, time.monotonic() + 30)
                except OSError as error:
                    self._raise_if_gone()
                    raise SandboxError(f"could not stop the command in sandbox {self.id[:12]}:"
                                       f" {error}") from error

    async def fresh_session(self) -> None:
        """Kill every process of the sandbox user (builtins only, from the control shell:
        it works while a fork bomb holds every pid), then again from a new control shell
        that no command could have reached (which ends the old one too), and start a new
        session shell in the workdir. Both new shells are ``docker exec``'s, so their
        environment is the container's (the spec's). The container's init stays."""
        self._check_usable()
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            await asyncio.wrap_future(self._runner.submit(self._fresh_session_sync))

    async def seal_session(self) -> tuple[str, ...]:
        """A fresh session whose shell runs behind :func:`sealed_shell_argv` (see
        :mod:`agentgym.sandboxes.seal`): what holds depends on the image (python3) and on
        what the engine's seccomp profile lets a container do (Landlock, stacked
        filters); it is checked from inside, never assumed."""
        await self.fresh_session()
        before = await self.exec(seal.CHECK, timeout=30)
        self._check_usable()
        loop = asyncio.get_running_loop()
        lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            await asyncio.wrap_future(self._runner.submit(self._fresh_session_sync, True))
        after = await self.exec(seal.CHECK, timeout=30)
        return seal.held(before.output, after.output)

    def _fresh_session_sync(self, sealed: bool = False) -> None:
        with self._shell_lock:
            self._check_usable()
            self._kill()
            old = self._control
            self._control = _Shell(self.client.api, self.id)
            try:
                self._control.start(self.workdir)
            except Exception as error:
                self._raise_if_gone(settle_s=2.0)
                raise SandboxError(f"could not start a new shell in sandbox {self.id[:12]}:"
                                   f" {error}") from error
            finally:
                old.close()
            self._kill()  # the old control shell and anything it spared
            self._cwd = self.workdir
            self._replace_session(sealed)

    def _replace_session(self, sealed: bool = False) -> None:
        self._session.close()
        self._session = _Shell(self.client.api, self.id)
        try:
            self._session.start(self._cwd, sealed)
        except Exception as error:  # OSError, or the engine refusing an exec (APIError)
            # A container being killed may still be reported running for a moment.
            self._raise_if_gone(settle_s=2.0)
            raise SandboxError(f"could not start a new shell in sandbox {self.id[:12]}:"
                               f" {error}") from error
        self._cwd = self._session.cwd

    def _check_usable(self) -> None:
        if self._closed:
            raise SandboxError(f"docker sandbox {self.id[:12]} is closed: open a new one.")
        if self._gone:
            raise SandboxError(self._gone)

    def _raise_if_gone(self, settle_s: float = 0.0) -> None:
        """Raise :class:`SandboxError` with the reason if the container is not running
        (still running after ``settle_s`` seconds of polling, when given)."""
        import docker.errors

        if self._closed:
            raise SandboxError(f"docker sandbox {self.id[:12]} was closed while a command ran.")
        deadline = time.monotonic() + settle_s
        while True:
            try:
                self.container.reload()
                state = self.container.attrs.get("State", {})
            except docker.errors.NotFound:
                state = None
            except Exception as error:
                self._gone = (f"the docker engine stopped answering about sandbox"
                              f" {self.id[:12]}: {error}")
                raise SandboxError(self._gone) from error
            if state is None or not state.get("Running") or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if state is None:
            self._gone = f"docker sandbox {self.id[:12]} was removed by someone else."
        elif not state.get("Running"):
            oom = (f", after running out of memory (limits.memory_mb={self.limits.memory_mb})"
                   if state.get("OOMKilled") else "")
            self._gone = (f"docker sandbox {self.id[:12]} stopped ({state.get('Status')}):"
                          f" its init exited with status {state.get('ExitCode')}{oom}.")
        if self._gone:
            raise SandboxError(self._gone)

    # -- files ----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        target = self._resolve(path)
        # Regular files only: /dev/zero would never end.
        code, out, err = await _short_call(self._run, [
            "sh", "-c", 'if [ ! -e "$1" ]; then exit 90; elif [ -d "$1" ]; then exit 91;'
            ' elif [ ! -f "$1" ]; then exit 94; fi; exec cat -- "$1"', "sh", target])
        self._raise_for_file(code, err, target, path)
        return out

    async def write_file(self, path: str, data: bytes | str) -> None:
        target = self._resolve(path)
        payload = data.encode() if isinstance(data, str) else bytes(data)
        code, _, err = await _short_call(self._run, [
            "sh", "-c", 'if [ -d "$1" ]; then exit 91; fi; mkdir -p -- "$(dirname -- "$1")"'
            ' && exec cat > "$1"', "sh", target], payload)
        self._raise_for_file(code, err, target, path)

    async def list_dir(self, path: str = ".") -> list[str]:
        target = self._resolve(path)
        # Globs, not ls or find: names may hold any byte but NUL, and any image has sh.
        code, out, err = await _short_call(self._run, [
            "sh", "-c", 'if [ ! -e "$1" ]; then exit 90; elif [ ! -d "$1" ]; then exit 93; fi;'
            ' cd -- "$1" || exit 92; for f in * .[!.]* ..?*; do'
            ' if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\\0" "$f"; fi; done',
            "sh", target])
        self._raise_for_file(code, err, target, path)
        return sorted(name.decode("utf-8", errors="surrogateescape")
                      for name in out.split(b"\0") if name)

    def _resolve(self, path: str | os.PathLike) -> str:
        path = os.fspath(path)
        return str(PurePosixPath(self.workdir, path))  # an absolute path stays as it is

    def _run(self, argv: list[str], stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
        self._check_usable()
        try:
            return _run_in(self.client.api, self.id, argv, stdin, self.workdir)
        except OSError as error:
            self._raise_if_gone()
            raise SandboxError(f"docker sandbox {self.id[:12]}: {error}") from error

    def _raise_for_file(self, code: int, err: bytes, target: str, path: str) -> None:
        where = f"{target!r} in the sandbox" + (
            f" ({path!r} is relative to {self.workdir})" if target != path else "")
        message = err.decode(errors="replace").strip()
        if code == 0:
            return
        if code == 90:
            raise FileNotFoundError(f"no such file or directory: {where}")
        if code == 91:
            raise IsADirectoryError(f"is a directory: {where}")
        if code == 93:
            raise NotADirectoryError(f"not a directory: {where}")
        if code == 94:
            raise OSError(f"not a regular file (a device, pipe or socket): {where}")
        if "Permission denied" in message or code == 92:
            raise PermissionError(f"permission denied: {where}: {message}")
        if "Read-only file system" in message:
            raise PermissionError(f"read-only file system: {where} (only {self.workdir}, /tmp"
                                  f" and {SANDBOX_HOME} are writable)")
        raise OSError(f"failed on {where} (exit {code}): {message}")

    # -- lifetime -------------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        await _short_call(self.close_now)

    def close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        import docker.errors

        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass
        except Exception as error:
            # "removal already in progress" means someone else is finishing the job.
            if "already in progress" not in str(error):
                raise SandboxError(
                    f"could not remove the container of docker sandbox {self.id[:12]}: {error}."
                    f" Remove it with `docker rm -f {self.id[:12]}` or `agentgym sandbox gc`."
                ) from error
        finally:
            for attached in (self._control, self._session):
                attached.close()
            self._runner.shutdown()
            untrack(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<DockerSandbox {self.id[:12]} {state}>"


class DockerBackend(SandboxBackend):
    """The ``docker`` backend: :class:`DockerSandbox`, a container per sandbox.

    Supports every spec field. Images are never pulled: :meth:`build_image` builds the
    images tasks need, locally.

    Args:
        read_only_root: keep the container's root filesystem read-only (the workspace,
            /tmp and the home are tmpfs); off for a ``workdir`` of the image regardless.
    """

    name = "docker"
    description = "A Docker container per sandbox: network none, memory/pids/cpu limits."
    supports = SPEC_FIELDS
    default_image = SandboxImage(DEFAULT_IMAGE, PROGRAMS, SANDBOX_USER, SANDBOX_HOME)

    def __init__(self, read_only_root: bool = True):
        self.read_only_root = read_only_root

    async def start(self, spec: SandboxSpec) -> DockerSandbox:
        return await DockerSandbox.create(spec, read_only_root=self.read_only_root)

    def build_image(self, *, base: str | None = None,
                    files: Mapping[str, str | os.PathLike[str]] | None = None,
                    context: str | os.PathLike[str] | None = None,
                    dockerfile: str | None = None,
                    repository: str = builds.REPOSITORY, network: bool = False,
                    log: Callable[[str], None] | None = None) -> str:
        """Build an image locally, or find it built, and return its name for
        ``SandboxSpec(image=...)``: ``base`` (default :data:`DEFAULT_IMAGE`) with ``files``
        (path in the image -> host file or folder) copied in, or the Dockerfile folder
        ``context`` as it is (or with ``dockerfile``, a Dockerfile's text, in place of its
        own). Cached by a content hash of its inputs (base image ids
        included); nothing is pulled: a base image missing from the engine raises
        :class:`SandboxError` naming it and how to provide it. Blocking (run it on a
        thread from async code). See :mod:`agentgym.sandboxes.builds`.
        """
        return builds.build_image(base=base, files=files, context=context,
                                  dockerfile=dockerfile, repository=repository,
                                  network=network, log=log, client=_client())


def gc(everything: bool = False) -> int:
    """Remove leftover sandbox containers: those whose owner process (on this host) is no
    longer alive, or all of agentgym's containers with ``everything``. Returns how many
    were removed."""
    import docker.errors

    client = _client()
    removed = 0
    host = socket.gethostname()
    # The low-level listing carries the labels: no inspect per container, which would race
    # with containers that other processes remove meanwhile.
    for container in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        labels = container.get("Labels") or {}
        if not everything:
            if labels.get(OWNER_HOST_LABEL, host) != host:
                continue  # another machine's process: its liveness is unknown here
            pid = int(labels.get(OWNER_PID_LABEL, "0") or 0)
            if process_alive(pid, labels.get(OWNER_START_LABEL)):
                continue
        try:
            client.api.remove_container(container["Id"], force=True)
            removed += 1
        except docker.errors.NotFound:
            continue  # removed meanwhile by its owner
    return removed


# -- the shell protocol -------------------------------------------------------------------


@dataclass
class _Reply:
    kind: str  # done | timeout | cancel | overflow | eof
    code: int = 0
    pwd: str = ""


class _Stream:
    """A process inside the container, attached through a hijacked API socket (stdin
    writable; stdout and stderr multiplexed in 8-byte-header frames)."""

    def __init__(self, api: Any, container_id: str):
        self.api, self.container_id = api, container_id
        self.exec_id = ""
        self.sock: Any = None
        self.raw: Any = None
        self._frames = bytearray()

    def open(self, argv: list[str], workdir: str, user: str = SANDBOX_USER,
             environment: dict[str, str] | None = None) -> None:
        self.exec_id = self.api.exec_create(self.container_id, argv, stdin=True,
                                            user=user, workdir=workdir,
                                            environment=environment)["Id"]
        self.sock = self.api.exec_start(self.exec_id, socket=True)
        self.raw = getattr(self.sock, "_sock", self.sock)

    def send(self, data: bytes) -> None:
        self.raw.settimeout(60)
        self.raw.sendall(data)

    def recv_frames(self, timeout: float) -> list[tuple[int, bytes]] | None:
        """Frames received within ``timeout`` seconds ([] if none yet); None at EOF."""
        self.raw.settimeout(max(timeout, 0.001))
        try:
            chunk = self.raw.recv(1 << 16)
        except TimeoutError:
            return []
        if not chunk:
            return None
        self._frames += chunk
        frames = []
        while len(self._frames) >= 8:
            size = int.from_bytes(self._frames[4:8], "big")
            if len(self._frames) < 8 + size:
                break
            frames.append((self._frames[0], bytes(self._frames[8:8 + size])))
            del self._frames[:8 + size]
        return frames

    def exit_code(self) -> int:
        """The process's exit status (it has ended or is ending)."""
        for attempt in range(60):
            info = self.api.exec_inspect(self.exec_id)
            if not info.get("Running"):
                return int(info.get("ExitCode") or 0)
            time.sleep(min(0.001 * 2**attempt, 0.05))
        return -1

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()
        with contextlib.suppress(Exception):
            self.sock.close()


class _Shell(_Stream):
    """A bash session speaking :mod:`agentgym.sandboxes.shell`'s protocol: each script is
    followed by a sentinel, on a file descriptor its command cannot write to, that carries
    the script's nonce, the exit status and ``$PWD``."""

    def __init__(self, api: Any, container_id: str):
        super().__init__(api, container_id)
        self.pid = 0
        self.cwd = ""
        self._reader = shell.SentinelReader()

    def start(self, cwd: str, sealed: bool = False) -> None:
        self.open(sealed_shell_argv() if sealed else SHELL_ARGV, "/")
        reply = self.run(shell.start_script(cwd, extra=_KILL_FUNCTIONS), None,
                         time.monotonic() + 60)
        if reply.kind != "done":
            raise OSError(f"the shell did not start ({reply.kind})")
        self.pid, self.cwd = reply.code, reply.pwd

    def run(self, script: shell.Script, out: BoundedOutput | None, deadline: float,
            cancel: threading.Event | None = None) -> _Reply:
        """Send ``script`` and read up to its reply."""
        self.send(script.data)
        return self.read_reply(script.nonce, out, deadline, cancel)

    def read_reply(self, nonce: str, out: BoundedOutput | None, deadline: float,
                   cancel: threading.Event | None, watch_overflow: bool = True) -> _Reply:
        """Read output into ``out`` up to the reply to script ``nonce``, the deadline, a
        cancel, ``out`` overflowing (with ``watch_overflow``) or EOF."""
        data = b""
        while True:
            reply = self._reader.feed(data, out, nonce)
            if reply is not None:
                return _Reply("done", reply.code, reply.pwd)
            if watch_overflow and out is not None and out.overflowed:
                return _Reply("overflow")  # keep reading after the kill to find the reply
            now = time.monotonic()
            if now >= deadline:
                return _Reply("timeout")
            if cancel is not None and cancel.is_set():
                return _Reply("cancel")
            frames = self.recv_frames(min(deadline - now, 0.2 if cancel else deadline - now))
            if frames is None:
                self._reader.drain(out)
                return _Reply("eof")
            data = b"".join(chunk for _, chunk in frames)


def _run_in(api: Any, container_id: str, argv: list[str], stdin: bytes | None,
            workdir: str, stdin_writer: Callable[[Any], None] | None = None,
            user: str = SANDBOX_USER) -> tuple[int, bytes, bytes]:
    """Run ``argv`` in the container (as the sandbox user unless ``user`` says otherwise),
    its programs found on :data:`SYSTEM_PATH`; returns (status, stdout, stderr)."""
    stream = _Stream(api, container_id)
    stream.open(argv, workdir, user, environment={"PATH": SYSTEM_PATH})
    try:
        if stdin_writer is not None:
            stdin_writer(stream.raw)
        elif stdin:
            stream.send(stdin)
        stream.raw.shutdown(socket.SHUT_WR)
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            frames = stream.recv_frames(deadline - time.monotonic())
            if frames is None:
                break
            for kind, data in frames:
                (err if kind == 2 else out).extend(data)
        return stream.exit_code(), bytes(out), bytes(err)
    finally:
        stream.close()


def _copy_tree_in(api: Any, container_id: str, source: Path, target: str) -> None:
    """Copy host directory ``source`` into ``target`` (a tar stream into ``tar -x``)."""

    class Writer:
        def __init__(self, raw: Any):
            self.raw = raw

        def write(self, data: bytes) -> int:
            self.raw.sendall(data)
            return len(data)

    def write_tar(raw: Any) -> None:
        raw.settimeout(300)
        with tarfile.open(fileobj=Writer(raw), mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for entry in sorted(source.iterdir()):
                tar.add(entry, arcname=entry.name)

    code, out, err = _run_in(api, container_id, ["tar", "-x", "-f", "-", "-C", target], None,
                             "/", stdin_writer=write_tar)
    if code != 0:
        raise SandboxError(f"copying template {str(source)!r} into the sandbox failed"
                           f" (exit {code}): {(out + err).decode(errors='replace')[-2000:]}")


def _tree_size(root: Path) -> int:
    """Bytes ``root`` takes on a tmpfs (whole pages per file, a page per entry)."""
    total = 0
    for directory, names, files in os.walk(root):
        total += 4096 * (1 + len(names))
        for name in files:
            with contextlib.suppress(OSError):
                size = os.lstat(os.path.join(directory, name)).st_size
                total += -(-size // 4096) * 4096 + 4096
    return total


# -- the engine ----------------------------------------------------------------------------

_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()
# Short blocking calls (create, files, close) of every sandbox; threads start on demand.
_pool = ThreadPoolExecutor(32, thread_name_prefix="agentgym-docker")


def _client() -> Any:
    """A docker client for the current environment, shared by this process's sandboxes."""
    key = (os.getpid(), *(os.environ.get(name) for name in (
        "DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")))
    with _clients_lock:
        if key not in _clients:
            _clients[key] = docker_client()
        return _clients[key]


async def _short_call(function: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking docker call on the shared pool (sized for many sandboxes at once)."""
    return await asyncio.wrap_future(_pool.submit(function, *args))


def _close_unclaimed(future: Future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close_now()


class _Runner:
    """One daemon thread running a sandbox's commands in order. Not a ThreadPoolExecutor:
    interpreter exit joins those, and would wait for a running command; a daemon thread
    lets exit go on to close the sandbox (which ends the command)."""

    def __init__(self, name: str):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def submit(self, function: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, function, args))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:
                future.set_exception(error)


def _state_of(client: Any, container_id: str, settle_s: float = 0.0) -> str:
    """What the engine says of a container that failed us (stopped, killed for memory...),
    for the error, or nothing if it cannot say or it still runs after ``settle_s``."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            state = client.api.inspect_container(container_id)["State"]
        except Exception:
            return ""
        if not state.get("Running"):
            break
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.1)
    try:  # init's own words, if it said any (tini: "exec sleep failed: ...")
        said = client.api.logs(container_id, tail=3).decode(errors="replace").strip()
    except Exception:
        said = ""
    return (f"; the container is {state.get('Status')} (exit code {state.get('ExitCode')},"
            f" killed for memory: {state.get('OOMKilled')}"
            f"{', ' + state['Error'] if state.get('Error') else ''})"
            f"{'; it printed: ' + said[-300:] if said else ''}")


class _DiedAtStart(SandboxError):
    """A container stopped before anything was run in it (see DockerSandbox._start)."""


def _owner_labels() -> dict[str, str]:
    return {LABEL: "1", OWNER_PID_LABEL: str(os.getpid()),
            OWNER_HOST_LABEL: socket.gethostname(),
            OWNER_START_LABEL: process_start(os.getpid()) or ""}


def _log(message: str) -> None:
    import logging

    logging.getLogger("agentgym.sandboxes.docker").warning(message)
