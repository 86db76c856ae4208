"""Sealing a session shell for a grader (``Sandbox.seal_session``): its processes cannot
reach into one another.

A grader's tests often run the agent's code, as the same user as the tests; the kernel
lets a process trace another of its user (``ptrace``), read or write its memory
(``process_vm_readv``/``writev``, ``/proc/PID/mem``) and take its descriptors, whenever
that process is "dumpable", which every program started from a readable file is. Sealed,
the session shell is started so:

* its program is a copy in a memfd that its user may execute but not read: exec leaves
  such a process non-dumpable, so nothing the grader sends through the shell (the tests'
  files, its commands) can be read out of its memory, nor written in;
* a Landlock ruleset (Linux 5.13+) under which no file of ``/proc`` opens for writing;
* a seccomp filter (:func:`agentgym.sandboxes.seccomp.seal_program`), stacked on the
  sandbox's, refusing the tracing calls.

The last two pass to every process the shell starts, and none can be lifted. :data:`CODE`
is the Python that does it (the local sandbox's init runs it before it starts a sealed
shell; :data:`SEALER` runs it in front of a shell, for Docker); :data:`CHECK`, run in the
new session, and :func:`held` say what holds, from the inside.
"""

from __future__ import annotations

#: Python (the standard library only, 3.6+): ``unreadable(path)`` -> a path that executes
#: a copy of ``path`` its user cannot read; ``seal(filter_bytes)`` -> the ruleset and the
#: filter on this process (exits 126 where it cannot).
CODE = """\
import ctypes, os, struct
_libc = ctypes.CDLL(None, use_errno=True)
class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
def unreadable(path):
    fd = os.memfd_create("shell", os.MFD_CLOEXEC)
    with open(path, "rb") as program:
        data = program.read()
    while data:
        data = data[os.write(fd, data):]
    os.fchmod(fd, 0o111)
    return "/proc/self/fd/%d" % fd
def seal(filter_bytes):
    if _libc.prctl(38, 1, 0, 0, 0) != 0:  # no_new_privs, which both need
        os._exit(126)
    write = 2  # LANDLOCK_ACCESS_FS_WRITE_FILE, the one right the ruleset handles
    handled = ctypes.c_uint64(write)
    ruleset = _libc.syscall(444, ctypes.byref(handled), 8, 0)
    if ruleset >= 0:  # without Landlock only the filter holds
        for name in os.listdir("/"):
            if name == "proc":
                continue
            try:
                fd = os.open("/" + name, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            rule = ctypes.create_string_buffer(struct.pack("=Qi", write, fd), 12)
            _libc.syscall(445, ruleset, 1, rule, 0)
            os.close(fd)
        if _libc.syscall(446, ruleset, 0) != 0:
            os._exit(126)
        os.close(ruleset)
    program = ctypes.create_string_buffer(filter_bytes, len(filter_bytes))
    fprog = _Fprog(len(filter_bytes) // 8, ctypes.addressof(program))
    if _libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        os._exit(126)
"""

#: ``python3 -I -S -c SEALER FILTER_HEX SHELL ARG...``: the shell, sealed.
SEALER = CODE + """\
import sys
_program = unreadable(sys.argv[2])
seal(bytes.fromhex(sys.argv[1]))
os.execv(_program, sys.argv[2:])
"""

#: Run in a session (in the shell itself, as commands are): the seccomp filters on its
#: processes; whether the shell's own environment is unreadable to a child (it is
#: non-dumpable); whether a process may not write even its own /proc/self/comm (the
#: ruleset).
CHECK = ("grep '^Seccomp_filters:' /proc/self/status;"
         " cat /proc/$$/environ >/dev/null 2>&1 || echo memory-refused;"
         " (printf x > /proc/self/comm) 2>/dev/null || echo proc-write-refused")


def _filters(output: str) -> int | None:
    words = output.split()
    if len(words) >= 2 and words[0] == "Seccomp_filters:" and words[1].isdigit():
        return int(words[1])
    return None


def held(before: str, after: str) -> tuple[str, ...]:
    """What :data:`CHECK` says holds in a sealed session (``after``) that did not in the
    fresh one before it (``before``): ``tracing``, ``memory``, ``proc-write``."""
    filters_before, filters_after = _filters(before), _filters(after)
    found = []
    if filters_before is not None and filters_after is not None \
            and filters_after > filters_before:
        found.append("tracing")
    for name in ("memory", "proc-write"):
        if f"{name}-refused" in after and f"{name}-refused" not in before:
            found.append(name)
    return tuple(found)


__all__ = ["CHECK", "CODE", "SEALER", "held"]
