"""The ``local`` sandbox: bubblewrap, a copy-on-write workspace, cgroup limits.

One sandbox is one process tree, started as root and dropped to an unprivileged user:

    setpriv --pdeathsig KILL            dies with the Python process that made it
      unshare --mount (launcher: sh)    a private mount namespace, joined to the cgroups
        tmpfs (size = disk limit)       holds the workspace's writable layer and /tmp
        overlayfs                       template (read-only lower) + upper = /workspace
        setpriv --reuid UID             the unprivileged sandbox user
          bwrap                         new user, pid, net (lo only), ipc, uts namespaces;
                                        read-only /usr and /etc, its own /proc, /dev, /tmp
            bash                        the persistent session shell

Nothing of the host is reachable but what is bound: never ``/`` whole, so host unix
sockets (the Docker daemon's above all), /run, /root, /home and other sandboxes'
workspaces are absent. The mounts live only in the launcher's mount namespace, so they
vanish with its processes and can never leak into the host's mount table. Edits land in the
tmpfs upper layer, never in the template.

Commands are written to the shell's stdin as ``eval $'...'`` followed by a sentinel that
carries the exit code and the working directory, so ``cd`` and ``export`` persist. When a
command ends the shell itself (``exit``, the OOM killer), the launcher starts a new one
and the session returns to the last working directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from agentgym.core.sandbox import (
    TIMEOUT_EXIT_CODE,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    track,
    truncate_output,
)
from agentgym.sandboxes.cgroups import ControlGroup, cgroup_version, existing_groups

#: Host directory holding one folder per live sandbox (its mount point and bookkeeping).
SANDBOX_DIR = Path(os.environ.get("AGENTGYM_SANDBOX_DIR", "/tmp/agentgym-sandboxes"))
#: Host directory of templates copied so that the sandbox user owns them.
TEMPLATE_DIR = Path(os.environ.get("AGENTGYM_TEMPLATE_DIR", "/var/tmp/agentgym-templates"))
#: The unprivileged user commands run as (no such user needs to exist on the host).
SANDBOX_UID = int(os.environ.get("AGENTGYM_SANDBOX_UID", "65000"))
#: Host paths bound read-only: what commands need, nothing more.
SYSTEM_BINDS = ("/usr", "/etc")
SYSTEM_SYMLINKS = ("/bin", "/lib", "/lib64", "/sbin")
#: A command printing more than this is stopped (only ``output_bytes`` are kept anyway).
HARD_OUTPUT_CAP = 32 * 1024 * 1024
_READ_CHUNK = 1 << 16
_counter = itertools.count()


def _ansi_c_quote(text: str) -> str:
    """``$'...'`` quoting that bash reads back byte for byte, whatever the text holds."""
    out = []
    for byte in text.encode("utf-8", errors="surrogateescape"):
        char = chr(byte)
        if char.isalnum() or char in " _-./:=,+@%^*()[]{}<>!?#~&|;\"`$":
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "$'" + "".join(out) + "'"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _check_host() -> None:
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
    if cgroup_version() is None:
        raise SandboxError(
            "The local sandbox needs cgroups (v1 or v2) mounted at /sys/fs/cgroup to limit"
            " memory and processes; none were found. Mount them, or use --backend docker"
        )


def prepare_template(template: str | os.PathLike[str]) -> Path:
    """A read-only lower layer for ``template`` that the sandbox user owns.

    Overlayfs keeps a file's owner when it copies it up for writing, so the lower layer must
    belong to the sandbox user for the agent to edit its files. A template that does not is
    copied once into ``TEMPLATE_DIR`` (keyed by path and modification time) and chowned
    there; the original is never touched. Sandboxes cannot reach either copy.
    """
    source = Path(template).resolve()
    if not source.is_dir():
        raise SandboxError(f"template {str(source)!r} is not a directory; pass a directory")
    if re.search(r"[,:\\\s]", str(source)):
        raise SandboxError(
            f"template path {str(source)!r} contains a comma, colon, backslash or space,"
            " which overlayfs options cannot carry; move or link it to a plain path"
        )
    stat = source.stat()
    if stat.st_uid == SANDBOX_UID and str(source).startswith(str(TEMPLATE_DIR)):
        return source
    key = f"{abs(hash((str(source), stat.st_mtime_ns))):x}"
    target = TEMPLATE_DIR / f"{source.name}-{key}"
    if not target.exists():
        TEMPLATE_DIR.mkdir(parents=True, exist_ok=True)
        os.chmod(TEMPLATE_DIR, 0o711)
        staging = TEMPLATE_DIR / f".{target.name}.{os.getpid()}.{next(_counter)}"
        shutil.copytree(source, staging, symlinks=True)
        subprocess.run(["chown", "-R", "--no-dereference", f"{SANDBOX_UID}:{SANDBOX_UID}",
                        str(staging)], check=True)
        try:
            staging.rename(target)
        except OSError:  # another process made it first
            shutil.rmtree(staging, ignore_errors=True)
    return target


class _BoundedOutput:
    """A command's output as a kept head, a rolling tail, and a count of what fell between.

    Memory stays bounded however much a command prints; the tail is also where the
    sentinel is searched for (``search_window`` extra bytes keep it whole).
    """

    def __init__(self, limit: int, search_window: int):
        self.limit, self.keep_head = limit, limit // 2
        self.window = limit - self.keep_head + search_window
        self.head, self.tail = bytearray(), bytearray()
        self.dropped = self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.tail += chunk
        if len(self.tail) > 2 * self.window:
            spill = self.tail[: len(self.tail) - self.window]
            del self.tail[: len(self.tail) - self.window]
            room = self.keep_head - len(self.head)
            self.head += spill[:room]
            self.dropped += len(spill) - max(room, 0)

    def cut(self, start: int, end: int) -> bytes:
        """End the output at ``tail[start]``; return what followed ``tail[end]``."""
        rest = bytes(self.tail[end:])
        del self.tail[start:]
        return rest

    def text(self) -> tuple[str, bool]:
        if not self.dropped:
            return truncate_output(bytes(self.head + self.tail), self.limit)
        room = max(self.limit - len(self.head), 0)
        kept = bytes(self.tail[len(self.tail) - room:]) if room else b""
        dropped = self.dropped + len(self.tail) - len(kept)
        marker = f"\n[... {dropped} bytes of output truncated ...]\n"
        return (self.head.decode("utf-8", "replace") + marker
                + kept.decode("utf-8", "replace")), True


class LocalSandbox(Sandbox):
    """A bubblewrap sandbox on this machine. Make one with :meth:`create`."""

    def __init__(self, limits: SandboxLimits, template: Path | None):
        self.limits = limits
        self.template = template
        self.id = f"{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        self.home = SANDBOX_DIR / self.id
        self.cgroup = ControlGroup(self.id)
        self.restart_marker = f"__agentgym_restart_{secrets.token_hex(8)}__"
        self.process: asyncio.subprocess.Process | None = None
        self.cwd = self.workdir
        self.closed = False
        self._lock = asyncio.Lock()
        self._pending = b""
        self._stale_marker: str | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    @classmethod
    async def create(cls, template: str | os.PathLike[str] | None = None,
                     limits: SandboxLimits | None = None, image: str | None = None,
                     **unused: Any) -> LocalSandbox:
        """Start a sandbox whose workspace is a copy-on-write view of ``template``."""
        if image is not None:
            raise SandboxError(
                f"image={image!r} is a docker option; the local backend runs the host's own"
                " /usr read-only. Use --backend docker for images"
            )
        _check_host()
        lower = await asyncio.to_thread(prepare_template, template) if template else None
        box = cls(limits or SandboxLimits(), lower)
        try:
            await box._start()
        except BaseException:
            box.close_now()
            raise
        return box

    def _launcher_script(self) -> str:
        mnt, limits = self.home / "mnt", self.limits
        workspace = mnt / "ws" if self.template else mnt / "upper"
        bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                 "--hostname", "sandbox", "--cap-drop", "ALL", "--clearenv"]
        if limits.network:
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
            "--proc", "/proc", "--dev", "/dev",
            "--bind", str(mnt / "tmp"), "/tmp",
            "--bind", str(workspace), self.workdir, "--chdir", self.workdir,
            "--remount-ro", "/",  # bwrap's root is a tmpfs: no writes outside the binds
            "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
            "--setenv", "TERM", "dumb", "--setenv", "USER", "agent",
            "bash", "--noprofile", "--norc",
        ]
        uid = SANDBOX_UID
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--"]
        join = "; ".join(f"echo $$ > {p}" for p in self.cgroup.proc_files())
        overlay = ""
        if self.template:
            overlay = (f"mkdir {mnt}/ws {mnt}/work && chown {uid}:{uid} {mnt}/ws && "
                       f"mount -t overlay overlay -o lowerdir={self.template},"
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
            overlay or ":",
            f"printf 'root:x:0:0::/root:/bin/bash\\nagent:x:{uid}:{uid}::/tmp:/bin/bash\\n'"
            f" > {mnt}/passwd",
            f"printf 'root:x:0:\nagent:x:{uid}:\n' > {mnt}/group",
            "set +e",
            "while :; do",
            "  ((echo 0 > /proc/self/oom_score_adj) 2>/dev/null; exec "
            + " ".join(map(_sh_quote, drop + bwrap)) + ")",
            f"  code=$?; [ -e {self.home}/closing ] && exit 0",
            f"  printf '\\n{self.restart_marker} %d\\n' \"$code\"",
            "done",
        ])

    async def _start(self) -> None:
        (self.home / "mnt").mkdir(parents=True)
        (self.home / "owner").write_text(str(os.getpid()))
        self.cgroup.create(self.limits.memory_mb, self.limits.pids, self.limits.cpus)
        self.process = await asyncio.create_subprocess_exec(
            "setpriv", "--pdeathsig", "KILL", "--",
            "unshare", "--mount", "--propagation", "private", "--",
            "sh", "-c", self._launcher_script(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )
        track(self)
        ready = await self._run("true", timeout=30, limit=4096)
        if ready.exit_code != 0:
            raise SandboxError(f"the local sandbox did not start: {ready.output.strip()}")

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
        deadline = time.monotonic() + 2
        while self.cgroup.pids() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.cgroup.remove()
        shutil.rmtree(self.home, ignore_errors=True)

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

    async def exec(self, command: str, timeout: float | None = None) -> ExecResult:
        return await self._run(command, timeout or self.limits.timeout_s,
                               self.limits.output_bytes)

    async def _run(self, command: str, timeout: float, limit: int) -> ExecResult:
        async with self._lock:
            if self.closed:
                raise SandboxError("the sandbox is closed")
            assert self.process is not None and self.process.stdin is not None
            if self._stale_marker:
                await self._resync()
            marker = f"__agentgym_done_{secrets.token_hex(8)}__"
            script = (f"eval {_ansi_c_quote(command)} </dev/null 2>&1;"
                      f" printf '\\n{marker} %d %s\\n' \"$?\" \"$PWD\"\n")
            try:
                self.process.stdin.write(script.encode())
                await self.process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as e:
                raise self._dead(f"cannot send the command ({e})") from None
            try:
                return await self._collect(marker, timeout, limit)
            except asyncio.CancelledError:
                # The command may still run and its sentinel is yet to come: the next call
                # stops it and reads past it before sending anything new.
                self._stale_marker = marker
                raise

    async def _resync(self) -> None:
        marker, self._stale_marker = self._stale_marker, None
        assert marker is not None
        await self._interrupt()
        await self._collect(marker, timeout=5, limit=1024)

    async def _collect(self, marker: str, timeout: float, limit: int) -> ExecResult:
        """Read output until the sentinel; keep a bounded head and tail of it."""
        assert self.process is not None and self.process.stdout is not None
        done = re.compile(rb"\n" + marker.encode() + rb" (-?\d+) ([^\n]*)\n")
        restarted = re.compile(rb"\n" + self.restart_marker.encode() + rb" (-?\d+)\n")
        output = _BoundedOutput(limit, search_window=len(marker) + 4096)
        output.feed(self._pending)
        self._pending = b""
        deadline = time.monotonic() + timeout
        timed_out = overflow = False
        note = ""
        while True:
            found = done.search(output.tail) or restarted.search(output.tail)
            if found:
                groups = [bytes(g) for g in found.groups()]  # before the buffer changes
                self._pending = output.cut(found.start(), found.end())
                code = int(groups[0])
                if found.re is done:
                    self.cwd = groups[1].decode("utf-8", "surrogateescape") or self.cwd
                else:
                    note = await self._after_restart(code)
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timed_out or overflow:
                    raise self._dead("the shell did not come back after its command was killed")
                timed_out = True
                await self._interrupt()
                deadline = time.monotonic() + 5
                continue
            try:
                chunk = await asyncio.wait_for(self.process.stdout.read(_READ_CHUNK), remaining)
            except asyncio.TimeoutError:
                continue
            if not chunk:
                last = output.text()[0].strip()[-2000:]
                raise self._dead(f"its processes exited; last output: {last or '(none)'}")
            output.feed(chunk)
            if output.total > HARD_OUTPUT_CAP and not (timed_out or overflow):
                overflow = True
                note = f"\n[output exceeded {HARD_OUTPUT_CAP} bytes: the command was stopped]"
                await self._interrupt()
                deadline = time.monotonic() + 5
        text, truncated = output.text()
        if timed_out:
            note = f"\n[timed out after {timeout:g} s: the command was killed]" + note
        if note and (not text or text.endswith("\n")):
            note = note[1:]
        if timed_out:
            return ExecResult(TIMEOUT_EXIT_CODE, text + note, timed_out=True, truncated=truncated)
        return ExecResult(code, text + note, truncated=truncated or overflow)

    async def _after_restart(self, code: int) -> str:
        """The shell ended (``exit``, killed): resync the new one to the last directory."""
        if self.cgroup.memory_events():
            reason = "it ran out of memory"
        else:
            reason = f"it exited with status {code}"
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(f"cd {_sh_quote(self.cwd)} 2>/dev/null\n".encode())
        await self.process.stdin.drain()
        return (f"\n[the shell ended ({reason}); a new session started in {self.cwd};"
                " exported variables were reset]")

    async def _interrupt(self) -> None:
        """Kill the running command's processes; if the shell itself is stuck, kill it
        too (the launcher restarts it)."""
        shell = self._shell_pid()
        if shell is None:
            return
        children = self._descendants(shell)
        if children:
            await asyncio.to_thread(self.cgroup.kill, children)
        else:
            await asyncio.to_thread(self.cgroup.kill, {shell})

    def _shell_pid(self) -> int | None:
        """Host pid of the session shell: pid 2 of the sandbox's namespace (bwrap is 1)."""
        return next((pid for pid, inner in self._namespace_pids().items() if inner == 2), None)

    def _descendants(self, root: int) -> set[int]:
        parents: dict[int, int] = {}
        for pid in self.cgroup.pids():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
        found, frontier = set(), {root}
        while frontier:
            frontier = {p for p, parent in parents.items() if parent in frontier} - found
            found |= frontier
        return found

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
        if not everything and pid and _alive(pid):
            continue
        with contextlib.suppress(OSError):
            (SANDBOX_DIR / name / "closing").touch()
        ControlGroup(name).remove()
        shutil.rmtree(SANDBOX_DIR / name, ignore_errors=True)
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not Path(f"/proc/{pid}/status").read_text().count("State:\tZ")


__all__ = ["LocalSandbox", "gc", "prepare_template"]
