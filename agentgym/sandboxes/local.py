"""The ``local`` sandbox: bubblewrap, a copy-on-write workspace, cgroup limits.

One sandbox is one process tree, started as root and dropped to an unprivileged user:

    setpriv --pdeathsig KILL            dies with the Python process that made it
      unshare --mount (launcher: sh)    a private mount namespace, joined to the cgroups
        tmpfs (size = disk limit)       holds the workspace's writable layer and /tmp
        overlayfs                       template's cached copy (read-only lower)
                                        + upper = the workdir (/workspace)
        setpriv --reuid UID             the unprivileged sandbox user
          bwrap                         new user, pid, net (lo only), ipc, uts namespaces;
                                        read-only /usr and /etc, its own /proc, /dev, /tmp;
                                        no further user namespaces; the seccomp filter
            python3 (init, PID 1)       non-dumpable: reaps orphans, holds the session pipes
              bash                      the persistent session shell (PID 2)

Nothing of the host is reachable but what is bound: ``/usr``, ``/etc`` and the ``mounts``
asked for (read-only), never ``/`` whole, so host unix
sockets (the Docker daemon's above all), /run, /root, /home and other sandboxes'
workspaces are absent. The mounts live only in the launcher's mount namespace, so they
vanish with its processes and can never leak into the host's mount table. Edits land in the
tmpfs upper layer, never in the template.

Nothing of the host's environment either: the launcher starts with a fixed environment
(:data:`LAUNCH_ENV`), and bwrap clears it again for the sandbox, which sees only
:data:`SANDBOX_ENV` and the ``env`` the caller gives. The sandbox's PID 1 is a small init of
our own that makes itself non-dumpable, so that no process of the agent (same uid, no
capabilities) can ptrace it, read its memory, environment or descriptors (the session's
pipes), while the agent's own processes stay traceable (``strace``, ``gdb`` work). A
seccomp filter (:mod:`agentgym.sandboxes.seccomp`) refuses new namespaces, mounts,
keyrings, modules and other kernel surface.

With ``limits.network`` the sandbox gets a network namespace of its own with outbound
access through slirp4netns (user-mode NAT, run as root outside the sandbox, in its cgroup),
started with ``--disable-host-loopback``: the host's loopback services stay unreachable, as
they are without the network (loopback only).

The session speaks the protocol of :mod:`agentgym.sandboxes.shell` over the launcher's
stdin and stdout: each command runs with ``eval`` in the shell itself (so ``cd`` and
``export`` persist), followed by a sentinel on a descriptor the command cannot redirect that
carries the exit status and the working directory. On a timeout the host sends the shell
SIGURG (it abandons the rest of the command) and kills the shell's descendants through the
cgroup; a shell that does not come back is killed too. When the shell ends (``exit``, the
OOM killer, that kill), the launcher reports it and starts a new one, and the session
returns to the last working directory. ``fresh_session`` kills the namespace's init on
purpose: every process of the sandbox ends with it (detached ones and fork bombs
included), and the new shell starts in the workdir with the spec's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import shutil
import signal
import time
from pathlib import Path

from agentgym.core.sandbox import (
    SPEC_FIELDS,
    TIMEOUT_EXIT_CODE,
    BoundedOutput,
    ExecResult,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxSpec,
    track,
    untrack,
)
from agentgym.sandboxes import seal, seccomp, shell, templates
from agentgym.sandboxes.cgroups import ControlGroup, cgroup_version, existing_groups
from agentgym.sandboxes.mounts import check_mounts, check_scratch_dirs, check_workdir
from agentgym.sandboxes.processes import process_alive

#: Host directory holding one folder per live sandbox (its mount point and bookkeeping).
SANDBOX_DIR = Path(os.environ.get("AGENTGYM_SANDBOX_DIR", "/tmp/agentgym-sandboxes"))
#: The unprivileged user commands run as (no such user needs to exist on the host).
SANDBOX_UID = templates.SANDBOX_UID
#: The whole environment of the launcher and bwrap (their /proc/PID/environ): never the
#: host's, which may hold tokens and keys.
LAUNCH_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
#: The environment of the sandbox's processes, before the ``env`` a caller adds.
SANDBOX_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
               "TERM": "dumb", "USER": "agent"}
#: The interpreter of the sandbox's init (bound from the host's /usr like every program).
INIT_PYTHON = "/usr/bin/python3"
#: The session shell's program, by its absolute path: "bash" would be looked up on the
#: sandbox's PATH, whose folders a task may let the agent write (a fresh session for a
#: grader must not start the agent's "bash").
SHELL_PROGRAM = shutil.which("bash", path="/usr/bin:/bin") or "/bin/bash"
#: The sandbox's PID 1: non-dumpable first (PR_SET_DUMPABLE is 4), then the session shell
#: as its one child, orphans reaped, its exit status passed on. SIGINT is the one signal
#: Python would handle, so it is ignored (the kernel drops the others for a namespace init).
#: The shell starts with every signal at its default and none blocked: ignored and
#: blocked signals survive exec, and Python ignores SIGPIPE and SIGXFSZ, the host process
#: may ignore or block others (nohup ignores SIGHUP).
#: The init (pid 1 of a sandbox's pid namespace) runs the shell and reaps orphans. When
#: the shell ends it exits, ending the namespace (the launcher then starts a new one). On
#: SIGUSR1 from outside the namespace (a kill(), ``SI_USER``, whose sender has no pid
#: here: the host, never a process of the sandbox, which cannot forge ``si_pid`` with
#: ``SI_USER``) it kills every other process of the namespace (``kill(-1)`` from its init
#: reaches all of them), reaps them until none is left, and starts a new shell: a fresh
#: session without a new namespace's set-up. SIGUSR2 does the same and seals the new shell
#: (see :meth:`LocalSandbox.seal_session`): a Landlock ruleset under which no file of
#: /proc opens for writing, then the seccomp filter given as the first argument (in hex),
#: which refuses the calls that trace other processes (both pass to every process the
#: shell starts, and neither can be lifted), and the shell run from a copy its user cannot
#: read, which leaves it non-dumpable: what the grader sends through it stays in it.
INIT_CODE = seal.CODE + """\
import signal, sys
if _libc.prctl(4, 0, 0, 0, 0) != 0:
    sys.exit("agentgym init: cannot make itself non-dumpable")
SEAL_FILTER, SHELL = bytes.fromhex(sys.argv[1]), sys.argv[2:]
signal.signal(signal.SIGINT, signal.SIG_IGN)
WAKE = {signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2}
signal.pthread_sigmask(signal.SIG_BLOCK, WAKE)
def start(sealed):
    pid = os.fork()
    if pid == 0:
        for number in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        program = SHELL[0]
        if sealed:
            program = unreadable(program)
            seal(SEAL_FILTER)
        os.execv(program, SHELL)
    return pid
shell = start(False)
while True:
    info = signal.sigwaitinfo(WAKE)
    if info.si_signo in (signal.SIGUSR1, signal.SIGUSR2):
        if info.si_code != 0 or info.si_pid != 0:
            continue
        while True:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break
        shell = start(info.si_signo == signal.SIGUSR2)
        continue
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid == shell:
            sys.exit(os.waitstatus_to_exitcode(status) & 255)
"""
#: The DNS server slirp4netns provides inside a sandbox with the network on.
SLIRP_DNS = "10.0.2.3"
#: Host paths bound read-only: what commands need, nothing more.
SYSTEM_BINDS = ("/usr", "/etc")
SYSTEM_SYMLINKS = ("/bin", "/lib", "/lib64", "/sbin")
#: A command printing more than this is stopped (only ``output_bytes`` are kept anyway).
HARD_OUTPUT_CAP = 32 * 1024 * 1024
#: Seconds a shell gets to report back after SIGURG and the kill of its command's processes,
#: before it is killed itself.
KILL_GRACE_S = 2.0
#: Seconds a new shell gets to start (after the launcher restarted it, or at create).
START_TIMEOUT_S = 30.0
_READ_CHUNK = 1 << 16
_counter = itertools.count()


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _check_host(network: bool = False) -> None:
    if shutil.which("bwrap") is None:
        raise SandboxError(
            "The local sandbox needs bubblewrap (the `bwrap` program), which is not installed."
            " Install it with `apt-get install bubblewrap` (Debian/Ubuntu) or"
            " `dnf install bubblewrap` (Fedora), or use --backend docker"
        )
    if os.geteuid() != 0:
        raise SandboxError(
            "The local sandbox must start as root: it mounts the copy-on-write workspace,"
            " sets cgroup limits and drops to an unprivileged user for the commands. Run as"
            " root (e.g. inside a container), or use --backend docker"
        )
    if not os.access(INIT_PYTHON, os.X_OK):
        raise SandboxError(
            f"The local sandbox runs its init with {INIT_PYTHON}, which is missing. Install"
            " Python 3 (`apt-get install python3`), or use --backend docker"
        )
    if not seccomp.supported():
        raise SandboxError(
            f"The local sandbox has no seccomp filter for this machine's architecture"
            f" ({os.uname().machine}; supported: {', '.join(seccomp.ARCHES)}). Use --backend"
            " docker"
        )
    if network and shutil.which("slirp4netns") is None:
        raise SandboxError(
            "A local sandbox with the network on needs slirp4netns (its own network"
            " namespace, with NAT, never the host's loopback), which is not installed."
            " Install it with `apt-get install slirp4netns`, or keep limits.network off"
        )
    if cgroup_version() is None:
        raise SandboxError(
            "The local sandbox needs cgroups (v1 or v2) mounted at /sys/fs/cgroup to limit"
            " memory and processes; none were found. Mount them, or use --backend docker"
        )


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox on this machine. Make one with :meth:`create`."""

    def __init__(self, limits: SandboxLimits, template: templates.TemplateCopy | None,
                 mounts: dict[str, Path] | None = None, env: dict[str, str] | None = None,
                 workdir: str = Sandbox.workdir, scratch_dirs: tuple[str, ...] = ()):
        self.limits = limits
        self.scratch_dirs = scratch_dirs
        self.template = template
        self.mounts = mounts or {}
        self.env = {**SANDBOX_ENV, **(env or {})}
        self.workdir = workdir
        self.id = f"{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        self.home = SANDBOX_DIR / self.id
        self.cgroup = ControlGroup(self.id)
        # The nonce under which the launcher reports that the shell ended: it never enters
        # the sandbox, so no command can fake that report.
        self.restart_marker = shell.new_nonce()
        self.process: asyncio.subprocess.Process | None = None
        self.slirp: asyncio.subprocess.Process | None = None
        self.cwd = self.workdir
        self.closed = False
        self._lock = asyncio.Lock()
        self._reader = shell.SentinelReader(ended_nonce=self.restart_marker)
        # The nonce of a reply still to come (a cancelled call's script): the next call
        # stops that script and reads past its reply before sending anything new.
        self._stale_marker: str | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    @classmethod
    async def create(cls, spec: SandboxSpec | None = None) -> LocalSandbox:
        """Start a sandbox for ``spec`` (see :class:`LocalBackend` for what it supports).

        The workspace, at ``spec.workdir``, is a copy-on-write view of ``spec.template``'s
        cached copy (:mod:`agentgym.sandboxes.templates`). ``mounts`` are bound read-only;
        ``env`` is added to :data:`SANDBOX_ENV`; nothing of the host's environment is ever
        passed on.
        """
        spec = spec or SandboxSpec()
        LocalBackend().check(spec)
        reserved = ("/proc", "/dev", "/tmp", *SYSTEM_BINDS, *SYSTEM_SYMLINKS)
        check_workdir(spec.workdir, reserved, "local")
        checked = check_mounts(spec.mounts, (*reserved, spec.workdir))
        scratch = check_scratch_dirs(spec.scratch_dirs, (*reserved, spec.workdir, *checked))
        _check_host(spec.limits.network)
        copy = (await asyncio.to_thread(templates.acquire, spec.template)
                if spec.template else None)
        box = cls(spec.limits, copy, checked, dict(spec.env), spec.workdir, scratch)
        try:
            await box._start()
        except BaseException:
            box.close_now()
            raise
        return box

    def _launcher_script(self) -> str:
        mnt, limits = self.home / "mnt", self.limits
        workspace = mnt / "ws" if self.template else mnt / "upper"
        # --unshare-user is implied by --unshare-all but must be explicit for
        # --disable-userns; --as-pid-1 leaves PID 1 to our init (bwrap's own reaper would
        # be a dumpable process of the sandbox user, holding the session's pipes).
        bwrap = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1",
                 "--die-with-parent", "--new-session", "--hostname", "sandbox",
                 "--cap-drop", "ALL", "--clearenv", "--seccomp", "9"]
        if limits.network:  # the launcher's own network namespace, which slirp4netns serves
            bwrap.append("--share-net")
        for path in SYSTEM_BINDS:
            bwrap += ["--ro-bind", path, path]
        for link in SYSTEM_SYMLINKS:
            if os.path.islink(link):
                bwrap += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                bwrap += ["--ro-bind", link, link]
        bwrap += [
            "--ro-bind", str(mnt / "passwd"), "/etc/passwd",
            "--ro-bind", str(mnt / "group"), "/etc/group",
            # /dev read-only (its tmpfs would be the sandbox user's: /dev/fd or /dev/null
            # swapped for files of the agent's, which a grader's `<(...)` or `< /dev/null`
            # then reads), with a writable /dev/shm of its own (POSIX semaphores)
            "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--tmpfs", "/dev/shm",
            "--bind", str(mnt / "tmp"), "/tmp",
            "--bind", str(workspace), self.workdir, "--chdir", self.workdir,
        ]
        if limits.network and os.path.isfile("/etc/resolv.conf"):
            bwrap += ["--ro-bind", str(self.home / "resolv.conf"), "/etc/resolv.conf"]
        for index, inside in enumerate(self.mounts):
            bwrap += ["--ro-bind", str(mnt / "mounts" / str(index)), inside]
        for index, inside in enumerate(self.scratch_dirs):
            bwrap += ["--bind", str(mnt / "scratch" / str(index)), inside]
        bwrap.append("--remount-ro")  # bwrap's root is a tmpfs: no writes outside the binds
        bwrap.append("/")
        for name, value in self.env.items():
            bwrap += ["--setenv", name, value]
        bwrap += [INIT_PYTHON, "-I", "-S", "-c", INIT_CODE, seccomp.seal_program().hex(),
                  SHELL_PROGRAM, "--noprofile", "--norc"]
        uid = SANDBOX_UID
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--"]
        join = "; ".join(f"echo $$ > {p}" for p in self.cgroup.proc_files())
        # Mounts are bound first where the launcher (root) stands, so that bwrap, already the
        # sandbox user, can reach host folders it may not traverse (/root/...).
        binds = [f"mkdir {mnt}/mounts"] if self.mounts else []
        for index, host in enumerate(self.mounts.values()):
            point = _sh_quote(str(mnt / "mounts" / str(index)))
            make = f"mkdir {point}" if host.is_dir() else f"touch {point}"
            binds.append(f"{make} && mount --bind {_sh_quote(str(host))} {point}"
                         f" && mount -o remount,bind,ro {point}")
        overlay = ""
        if self.template:
            overlay = (f"mkdir {mnt}/ws {mnt}/work && chown {uid}:{uid} {mnt}/ws && "
                       f"mount -t overlay overlay -o lowerdir={self.template.path},"
                       f"upperdir={mnt}/upper,workdir={mnt}/work {mnt}/ws")
        # The launcher keeps the mount namespace alive and restarts the shell if a command
        # ends it; the sandbox's own processes may raise their OOM score, never lower it.
        return "\n".join([
            "set -e",
            join,
            "(echo -1000 > /proc/self/oom_score_adj) 2>/dev/null || :",
            f"mount -t tmpfs -o size={limits.disk_mb}m,mode=0755 agentgym {mnt}",
            f"mkdir {mnt}/upper {mnt}/tmp && chown {uid}:{uid} {mnt}/upper {mnt}/tmp",
            f"chmod 1777 {mnt}/tmp",
            *(f"mkdir -p {mnt}/scratch/{index} && chown {uid}:{uid} {mnt}/scratch/{index}"
              for index in range(len(self.scratch_dirs))),
            overlay or ":",
            *binds,
            f"printf 'root:x:0:0::/root:/bin/bash\\nagent:x:{uid}:{uid}::/tmp:/bin/bash\\n'"
            f" > {mnt}/passwd",
            f"printf 'root:x:0:\nagent:x:{uid}:\n' > {mnt}/group",
            # The session's output pipe, made by the host, is root's (mode 600): the sandbox
            # user could not reopen it (`echo x > /dev/stderr`, `tee /dev/stdout`). Writing
            # is allowed, as it writes there anyway; reading (another's output) stays not.
            "chmod go+w /proc/self/fd/1 2>/dev/null || :",
            "set +e",
            "while :; do",
            "  ((echo 0 > /proc/self/oom_score_adj) 2>/dev/null; exec "
            + " ".join(map(_sh_quote, drop + bwrap))
            + f" 9< {_sh_quote(str(self.home / 'seccomp.bpf'))})",
            f"  code=$?; [ -e {self.home}/closing ] && exit 0",
            "  " + shell.ended_report(self.restart_marker),
            "done",
        ])

    async def _start(self) -> None:
        (self.home / "mnt").mkdir(parents=True)
        (self.home / "owner").write_text(str(os.getpid()))
        (self.home / "seccomp.bpf").write_bytes(seccomp.filter_program())
        if self.limits.network:
            (self.home / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")
        self.cgroup.create(self.limits.memory_mb, self.limits.pids, self.limits.cpus)
        namespaces = ["--mount", "--net"] if self.limits.network else ["--mount"]
        self.process = await asyncio.create_subprocess_exec(
            "setpriv", "--pdeathsig", "KILL", "--",
            "unshare", *namespaces, "--propagation", "private", "--",
            "sh", "-c", self._launcher_script(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True, env=LAUNCH_ENV,
        )
        track(self)
        if self.limits.network:
            await self._start_slirp()
        async with self._lock:
            await self._start_shell()

    async def _start_slirp(self) -> None:
        """Give the launcher's network namespace outbound access (slirp4netns, in the
        sandbox's cgroup so that it dies with it), and wait until it is configured."""
        assert self.process is not None
        ready_read, ready_write = os.pipe()
        join = "; ".join(f"echo $$ > {p}" for p in self.cgroup.proc_files())
        try:
            self.slirp = await asyncio.create_subprocess_exec(
                "sh", "-c", f"{join}; exec setpriv --pdeathsig KILL -- slirp4netns"
                f" --configure --mtu=65520 --disable-host-loopback --enable-sandbox"
                f" --ready-fd={ready_write} {self.process.pid} tap0",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, pass_fds=(ready_write,), env=LAUNCH_ENV,
                start_new_session=True,
            )
        finally:
            os.close(ready_write)
        try:
            ready = await asyncio.wait_for(asyncio.to_thread(os.read, ready_read, 1),
                                           START_TIMEOUT_S)
        except asyncio.TimeoutError:
            ready = b""
        finally:
            os.close(ready_read)
        if ready != b"1":
            self.slirp.kill()
            errors = (await self.slirp.stderr.read()).decode(errors="replace")[-1000:]
            raise SandboxError(f"the local sandbox {self.id} could not start its network"
                               f" (slirp4netns): {errors.strip() or 'no output'}")

    async def close(self) -> None:
        """Kill every process of the sandbox and remove its files. Idempotent."""
        if not self.closed:
            await asyncio.to_thread(self.close_now)
            if self.process is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.process.wait(), 5)

    def close_now(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            (self.home / "closing").touch()
        # Kill the namespace's init first: the kernel then kills everything inside, and each
        # parent up the chain (bwrap, the launcher) reaps its child and exits. Killing all at
        # once would orphan zombies onto the host's init.
        self.cgroup.kill(self._namespace_inits(), deadline_s=0.5)
        if self.slirp is not None and self.slirp.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.slirp.kill()
        deadline = time.monotonic() + 2
        while self.cgroup.pids() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.cgroup.remove()
        shutil.rmtree(self.home, ignore_errors=True)
        if self.template is not None:
            self.template.release()  # after the overlay's processes are gone
        untrack(self)

    def _namespace_inits(self) -> set[int]:
        return {pid for pid, inner in self._namespace_pids().items() if inner == 1}

    def _namespace_pids(self) -> dict[int, int]:
        """Host pid -> pid inside the sandbox's pid namespace, for processes inside it."""
        found = {}
        for pid in self.cgroup.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            nspid = next((line.split()[1:] for line in status.splitlines()
                          if line.startswith("NSpid:")), [])
            if len(nspid) > 1:
                found[pid] = int(nspid[-1])
        return found

    # ---- the session ----------------------------------------------------------------------

    async def fresh_session(self) -> None:
        """End every process of the sandbox and set up a new shell in the workdir, with
        the spec's environment. The init does it (:data:`INIT_CODE`: every other process
        of the namespace killed, a new shell started), or, if it cannot, the pid namespace
        is killed (its init first: the kernel then ends every process inside, frozen so
        that none escapes) and the launcher starts a new one. The launcher and
        slirp4netns, outside the namespace, stay."""
        async with self._lock:
            if self.closed:
                raise SandboxError("the sandbox is closed")
            self._stale_marker = None
            self.cwd = self.workdir
            if await asyncio.to_thread(self._renew_shell):
                try:  # the init started a new shell in the same namespace
                    await self._start_shell()
                    return
                except SandboxError:
                    pass  # not answering: end the namespace, as below
            deadline = time.monotonic() + START_TIMEOUT_S
            got: shell.Reply | str = "timeout"
            while not (isinstance(got, shell.Reply) and got.ended):
                if time.monotonic() >= deadline:
                    raise self._dead("its processes could not be stopped for a fresh session")
                await asyncio.to_thread(self.cgroup.kill, self._namespace_inits(), 2.0)
                # Replies to a cancelled call's script are dropped: only the launcher's
                # report that the shell ended counts.
                got = await self._read("", None, min(deadline, time.monotonic() + 1.0))
            await self._start_shell()

    async def seal_session(self) -> tuple[str, ...]:
        """A fresh session, then the init's sealed shell (SIGUSR2, see :data:`INIT_CODE`):
        a stacked seccomp filter refuses the tracing calls, the shell is non-dumpable (what
        the grader sends through it cannot be read out of its memory), and a Landlock
        ruleset keeps every file of /proc from opening for writing (where the kernel has
        Landlock, Linux 5.13+). What holds is checked from inside the new shell, never
        assumed. Raises :class:`SandboxError` when the shell did not come back sealed."""
        await self.fresh_session()
        before = await self.exec(seal.CHECK, timeout=30)
        async with self._lock:
            if not await asyncio.to_thread(self._renew_shell, 2.0, signal.SIGUSR2):
                raise SandboxError(f"the local sandbox {self.id}: its session could not be"
                                   " sealed (the init did not renew it)")
            await self._start_shell()
        after = await self.exec(seal.CHECK, timeout=30)
        held = seal.held(before.output, after.output)
        if held[:2] != ("tracing", "memory"):
            raise SandboxError(f"the local sandbox {self.id}: its session was not sealed"
                               f" (the check read {after.output.strip()[:200]!r})")
        return held

    def _renew_shell(self, deadline_s: float = 2.0, renew: int = signal.SIGUSR1) -> bool:
        """Ask the init for a fresh shell (``renew``: SIGUSR1, or SIGUSR2 for a sealed one,
        see :data:`INIT_CODE`) and wait until every other process of the namespace is
        gone, so that what is sent next reaches the new shell. False when there is no
        single init to ask, or when they are not gone in time."""
        pids = self._namespace_pids()
        inits = [pid for pid, inner in pids.items() if inner == 1]
        if len(inits) != 1:
            return False
        try:
            os.kill(inits[0], renew)
        except ProcessLookupError:
            return False
        old = {pid for pid, inner in pids.items() if inner != 1}
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if not old & set(self.cgroup.pids()):
                return True
            time.sleep(0.001)
        return False

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        return await self._run(command, timeout or self.limits.timeout_s,
                               self.limits.output_bytes)

    async def _run(self, command: str, timeout: float, limit: int) -> ExecResult:
        async with self._lock:
            if self.closed:
                raise SandboxError("the sandbox is closed")
            refused = shell.refusal(command)
            if refused is not None:
                return refused
            if self._stale_marker:
                await self._resync()
            script = shell.command_script(command)
            await self._send(script)
            output = BoundedOutput(limit, HARD_OUTPUT_CAP)
            got = await self._read(script.nonce, output, time.monotonic() + timeout,
                                   watch_overflow=True)
            notes: list[str] = []
            stopped = None if isinstance(got, shell.Reply) else got
            if stopped == "timeout":
                notes.append(shell.timeout_note(timeout))
            elif stopped == "overflow":
                notes.append(shell.overflow_note(HARD_OUTPUT_CAP))
            if not isinstance(got, shell.Reply):
                got = await self._stop(script.nonce, output)
            if got.ended:
                notes.append(await self._restarted(got.code))
            else:
                self.cwd = got.pwd or self.cwd
            text, truncated = output.text()
            text = shell.with_notes(text, notes)
            if stopped == "timeout":
                return ExecResult(TIMEOUT_EXIT_CODE, text, timed_out=True, truncated=truncated)
            if stopped == "overflow":  # killed, as by SIGKILL
                return ExecResult(137, text, truncated=True)
            return ExecResult(got.code, text, truncated=truncated)

    async def _send(self, script: shell.Script) -> None:
        assert self.process is not None and self.process.stdin is not None
        # Owed until its reply is read: a cancelled call leaves it for the next to settle.
        self._stale_marker = script.nonce
        try:
            self.process.stdin.write(script.data)
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as e:
            raise self._dead(f"cannot send the command ({e})") from None

    async def _read(self, nonce: str, output: BoundedOutput | None, deadline: float,
                    watch_overflow: bool = False) -> shell.Reply | str:
        """Read up to the reply to the script ``nonce`` (or the launcher's report that the
        shell ended), moving output into ``output``. Returns the reply, or "timeout" at
        ``deadline``, or "overflow" once ``output`` overflowed (with ``watch_overflow``)."""
        assert self.process is not None and self.process.stdout is not None
        reply = self._reader.feed(b"", output, nonce)
        while reply is None:
            if watch_overflow and output is not None and output.overflowed:
                return "overflow"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout"
            try:
                chunk = await asyncio.wait_for(self.process.stdout.read(_READ_CHUNK), remaining)
            except asyncio.TimeoutError:
                return "timeout"
            if not chunk:
                sink = output or BoundedOutput(4096)
                self._reader.drain(sink)
                last = sink.text()[0].strip()[-2000:]
                raise self._dead(f"its processes exited; last output: {last or '(none)'}")
            reply = self._reader.feed(chunk, output, nonce)
        if reply.ended or nonce == self._stale_marker:
            self._stale_marker = None
        return reply

    async def _stop(self, nonce: str, output: BoundedOutput | None) -> shell.Reply:
        """Stop the script ``nonce`` (timed out, cancelled, printing too much) and read its
        reply: abort it; if the shell does not come back, kill the shell (the launcher
        starts another and reports it)."""
        await asyncio.to_thread(self._abort)
        got = await self._read(nonce, output, time.monotonic() + KILL_GRACE_S)
        if got == "timeout":  # it ignores SIGURG, or is no shell any more (`exec sleep 99`)
            await asyncio.to_thread(self._kill_shell)
            got = await self._read(nonce, output, time.monotonic() + 5)
            if got == "timeout":
                raise self._dead("the shell did not come back after its command was killed")
        assert isinstance(got, shell.Reply)
        if not got.ended:
            settle = shell.settle_script()
            await self._send(settle)
            settled = await self._read(settle.nonce, None, time.monotonic() + 5)
            if settled == "timeout":
                raise self._dead("the shell stopped answering after its command was stopped")
            assert isinstance(settled, shell.Reply)
            if settled.ended:
                return settled
        return got

    async def _resync(self) -> None:
        """Stop the script a cancelled call left running and read past its reply."""
        assert self._stale_marker is not None
        got = await self._stop(self._stale_marker, None)
        if got.ended:
            await self._restarted(got.code)

    async def _start_shell(self) -> None:
        """Set up the shell the launcher (re)started, in the last working directory."""
        script = shell.start_script(self.cwd, fallback=self.workdir)
        await self._send(script)
        output = BoundedOutput(4096)
        got = await self._read(script.nonce, output, time.monotonic() + START_TIMEOUT_S)
        if not isinstance(got, shell.Reply) or got.ended:
            why = ("it did not answer" if not isinstance(got, shell.Reply)
                   else f"the shell exited with status {got.code}")
            text = output.text()[0].strip()[-2000:]
            raise SandboxError(f"the local sandbox {self.id} did not start: {why};"
                               f" output: {text or '(none)'}")
        self.cwd = got.pwd or self.cwd

    async def _restarted(self, code: int) -> str:
        """The shell ended (``exit``, killed): set up the new one in the last directory."""
        if self.cgroup.memory_events():
            reason = "it ran out of memory"
        else:
            reason = f"it exited with status {code}"
        await self._start_shell()
        return (f"[the shell ended ({reason}); a new session started in {self.cwd};"
                " exported variables were reset]")

    def _abort(self) -> None:
        """Make the shell abandon the rest of its command (SIGURG, sent first so that the
        trap is pending when the foreground process dies), then kill the processes the
        shell started."""
        pid = self._shell_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGURG)
        self.cgroup.kill_descendants(pid)

    def _kill_shell(self) -> None:
        """Kill the session shell: its namespace's init then ends every process in it."""
        pid = self._shell_pid()
        if pid is not None:
            self.cgroup.kill({pid})

    def _shell_pid(self) -> int | None:
        """Host pid of the session shell: pid 2 of the sandbox's namespace (init is 1)."""
        return next((pid for pid, inner in self._namespace_pids().items() if inner == 2), None)

    def _dead(self, why: str) -> SandboxError:
        oom = " after hitting its memory limit" if self.cgroup.memory_events() else ""
        return SandboxError(f"the local sandbox {self.id} died{oom}: {why}")

    # ---- files, through the session so the sandbox user's view and rights apply ------------

    def _absolute(self, path: str) -> str:
        return path if path.startswith("/") else f"{self.workdir}/{path}"

    async def read_file(self, path: str) -> bytes:
        import base64

        target = _sh_quote(self._absolute(path))
        result = await self._run(f"base64 -w0 -- {target}", self.limits.timeout_s,
                                 HARD_OUTPUT_CAP)
        if result.exit_code != 0:
            raise FileNotFoundError(f"cannot read {path!r} in the sandbox: "
                                    f"{result.output.strip()}")
        return base64.b64decode(result.output.strip())

    async def write_file(self, path: str, data: bytes | str) -> None:
        import base64

        raw = data.encode() if isinstance(data, str) else data
        target = _sh_quote(self._absolute(path))
        encoded = base64.b64encode(raw).decode()
        result = await self._run(
            f'mkdir -p -- "$(dirname -- {target})" && printf %s {encoded} | base64 -d > {target}',
            self.limits.timeout_s, 4096)
        if result.exit_code != 0:
            raise OSError(f"cannot write {path!r} in the sandbox: {result.output.strip()}")

    async def list_dir(self, path: str = ".") -> list[str]:
        target = _sh_quote(self._absolute(path))
        result = await self._run(f"find {target} -mindepth 1 -maxdepth 1 -printf '%f\\0'",
                                 self.limits.timeout_s, HARD_OUTPUT_CAP)
        if result.exit_code != 0:
            raise FileNotFoundError(f"cannot list {path!r} in the sandbox: "
                                    f"{result.output.strip()}")
        return sorted(name for name in result.output.split("\0") if name)


def gc(everything: bool = False) -> int:
    """Remove sandboxes left by processes that died without closing them (all of them
    with ``everything``): their processes, cgroups and folders. Returns how many."""
    removed = 0
    names = existing_groups()
    if SANDBOX_DIR.is_dir():
        names |= {d.name for d in SANDBOX_DIR.iterdir() if d.is_dir()}
    for name in sorted(names):
        owner = SANDBOX_DIR / name / "owner"
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            pid = int(name.split("-", 1)[0]) if name.split("-", 1)[0].isdigit() else 0
        if not everything and process_alive(pid):
            continue
        with contextlib.suppress(OSError):
            (SANDBOX_DIR / name / "closing").touch()
        ControlGroup(name).remove()
        shutil.rmtree(SANDBOX_DIR / name, ignore_errors=True)
        removed += 1
    return removed


class LocalBackend(SandboxBackend):
    """The ``local`` backend: :class:`LocalSandbox` (bubblewrap on this machine).

    Supports ``template``, ``workdir`` (any directory outside its own: /proc, /dev, /tmp,
    /usr, /etc and the system links), ``mounts``, ``scratch_dirs``, ``env`` and ``limits``.
    Not ``image``:
    commands run the host's own /usr, read-only.
    """

    name = "local"
    description = "bubblewrap: copy-on-write workspace, no network, cgroup limits (default)."
    supports = SPEC_FIELDS - {"image"}
    hints = {"image": "it runs the host's own /usr read-only; images need the docker"
                      " backend (--backend docker, backend='docker')"}

    async def start(self, spec: SandboxSpec) -> LocalSandbox:
        return await LocalSandbox.create(spec)


__all__ = ["LocalBackend", "LocalSandbox", "gc"]
