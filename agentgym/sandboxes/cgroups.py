"""Per-sandbox control groups: the limits bubblewrap does not set, and a reliable kill.

bubblewrap isolates but does not limit. A :class:`ControlGroup` caps memory (without swap),
process count and CPU for every process of one sandbox, and kills them all at once:
frozen first, so a fork bomb cannot outrun the sweep. Both cgroup v1 (one hierarchy per
controller, as on this project's machines) and v2 (unified) are supported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "agentgym"


def cgroup_version() -> int | None:
    """2 for a unified hierarchy, 1 for per-controller hierarchies, None without cgroups."""
    if (ROOT / "cgroup.controllers").exists():
        return 2
    if (ROOT / "pids").is_dir() and (ROOT / "memory").is_dir():
        return 1
    return None


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class ControlGroup:
    """The cgroup(s) named ``agentgym/<name>``, one per controller on v1."""

    def __init__(self, name: str):
        self.name = name
        self.version = cgroup_version()
        if self.version == 1:
            self.dirs = {c: ROOT / c / PARENT / name for c in ("pids", "memory", "freezer", "cpu")}
            self.dirs = {c: d for c, d in self.dirs.items() if d.parents[1].is_dir()}
        elif self.version == 2:
            self.dirs = {"unified": ROOT / PARENT / name}
        else:
            self.dirs = {}

    def create(self, memory_mb: int, pids: int, cpus: float | None) -> None:
        """Make the groups and set the limits."""
        if self.version == 2:
            parent = ROOT / PARENT
            parent.mkdir(exist_ok=True)
            enabled = (ROOT / "cgroup.subtree_control").read_text().split()
            wanted = [c for c in ("memory", "pids", "cpu") if c not in enabled]
            if wanted:
                _write(ROOT / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
            _write(parent / "cgroup.subtree_control", "+memory +pids +cpu")
        for directory in self.dirs.values():
            directory.mkdir(parents=True, exist_ok=True)
        memory = str(memory_mb * 1024 * 1024)
        if self.version == 1:
            _write(self.dirs["pids"] / "pids.max", str(pids))
            memory_dir = self.dirs["memory"]
            _write(memory_dir / "memory.limit_in_bytes", memory)
            swap = memory_dir / "memory.memsw.limit_in_bytes"
            if swap.exists():  # memory plus swap equal to memory: no swapping out of the limit
                _write(swap, memory)
            if cpus and "cpu" in self.dirs:
                _write(self.dirs["cpu"] / "cpu.cfs_period_us", "100000")
                _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(int(cpus * 100000)))
        elif self.version == 2:
            unified = self.dirs["unified"]
            _write(unified / "pids.max", str(pids))
            _write(unified / "memory.max", memory)
            if (unified / "memory.swap.max").exists():
                _write(unified / "memory.swap.max", "0")
            if cpus:
                _write(unified / "cpu.max", f"{int(cpus * 100000)} 100000")

    def proc_files(self) -> list[Path]:
        """The ``cgroup.procs`` files a new process must join."""
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def pids(self) -> list[int]:
        """Host pids of every process in the group."""
        main = self.dirs.get("pids") or self.dirs.get("unified")
        try:
            return [int(p) for p in (main / "cgroup.procs").read_text().split()] if main else []
        except FileNotFoundError:
            return []

    def memory_events(self) -> int:
        """How many times the memory limit was hit (OOM kills on v2, failcnt on v1)."""
        try:
            if self.version == 1:
                return int((self.dirs["memory"] / "memory.failcnt").read_text())
            for line in (self.dirs["unified"] / "memory.events").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except (FileNotFoundError, KeyError, ValueError):
            pass
        return 0

    def _freeze(self, frozen: bool) -> None:
        if self.version == 1 and "freezer" in self.dirs:
            _write(self.dirs["freezer"] / "freezer.state", "FROZEN" if frozen else "THAWED")
        elif self.version == 2:
            _write(self.dirs["unified"] / "cgroup.freeze", "1" if frozen else "0")

    def kill(self, only: set[int] | None = None, deadline_s: float = 5.0) -> None:
        """SIGKILL every process (or those in ``only``), frozen first so none escapes."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            targets = [p for p in self.pids() if only is None or p in only]
            if not targets:
                return
            with contextlib.suppress(OSError):
                self._freeze(True)
            for pid in targets:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self._freeze(False)
            time.sleep(0.005)
            if only is not None:
                only = only & set(self.pids())

    def descendants(self, root: int) -> set[int]:
        """Live processes of the group that descend from ``root`` (zombies are dead)."""
        parents: dict[int, int] = {}
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[pid] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
        found, frontier = set(), {root}
        while frontier:
            frontier = {p for p, parent in parents.items() if parent in frontier} - found
            found |= frontier
        return found

    def kill_descendants(self, root: int, deadline_s: float = 5.0) -> None:
        """SIGKILL every descendant of ``root`` (not ``root``), the group frozen while they
        are found and signalled, again until none is left: children forked meanwhile too."""
        end = time.monotonic() + deadline_s
        while self.descendants(root) and time.monotonic() < end:
            with contextlib.suppress(OSError):
                self._freeze(True)
            try:
                for pid in self.descendants(root):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            finally:
                with contextlib.suppress(OSError):
                    self._freeze(False)
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill what is left and delete the groups. Idempotent."""
        self.kill()
        for directory in self.dirs.values():
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy: a killed process is still exiting
                    self.kill()
                    time.sleep(0.01)


def existing_groups() -> set[str]:
    """Names of agentgym cgroups present now (for garbage collection)."""
    names: set[str] = set()
    for parent in (ROOT / PARENT, ROOT / "pids" / PARENT, ROOT / "memory" / PARENT):
        if parent.is_dir():
            names |= {d.name for d in parent.iterdir() if d.is_dir()}
    return names
