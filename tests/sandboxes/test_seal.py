"""Sandbox.seal_session: a grader's session whose processes cannot reach into one another
(both backends seal it, Docker where the image has python3; every backend gives a fresh
session)."""

from __future__ import annotations

import ctypes

import pytest

#: Run in the sandbox with a sibling's pid and the session shell's: what it could do to
#: them, by name ("none" when nothing).
REACH = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
sibling, shell = int(sys.argv[1]), int(sys.argv[2])
found = []
if libc.ptrace(16, sibling, 0, 0) == 0:  # PTRACE_ATTACH
    os.waitpid(sibling, 0)
    libc.ptrace(17, sibling, 0, 0)  # PTRACE_DETACH
    found.append("ptrace")
try:
    open("/proc/%d/mem" % sibling, "r+b").close()
    found.append("mem-write")
except OSError:
    pass
try:
    open("/proc/%d/mem" % shell, "rb").close()
    found.append("shell-memory")
except OSError:
    pass
print(" ".join(found) or "none")
"""
PLAY = ("sleep 60 & sibling=$!; python3 /tmp/reach.py $sibling $$;"
        " kill $sibling; wait $sibling 2>/dev/null")


def landlock() -> bool:
    """Whether this kernel has Landlock (the ABI version query answers)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(444, None, 0, 1) > 0


def test_the_seal_keeps_the_tests_processes_out_of_one_another(make_sandbox, run):
    box = make_sandbox()  # the default image, which has python3
    run(box.write_file("/tmp/reach.py", REACH))
    assert run(box.exec(PLAY)).output.split() == ["ptrace", "mem-write", "shell-memory"]
    # The session's output may be reopened, by the agent and by tests alike.
    assert run(box.exec("echo out > /dev/stdout; echo err > /dev/stderr")).output == \
        "out\nerr\n"
    run(box.exec("(setsid sleep 7801 >/dev/null 2>&1 < /dev/null &)"))

    sealed = run(box.seal_session())
    assert sealed == ("tracing", "memory") + (("proc-write",) if landlock() else ())
    assert "sleep 7801" not in run(box.exec("ps -e -o args=")).output  # a fresh session
    expected = "none" if landlock() else "mem-write"
    assert run(box.exec(PLAY)).output.strip() == expected
    # Ordinary work still works: files, pipes, the session's output, a program's /proc.
    done = run(box.exec("echo a > f && cat f; echo b | tr b c; echo d > /dev/stderr;"
                        " mkdir -p /tmp/t && echo e > /tmp/t/x && cat /tmp/t/x;"
                        " python3 -c 'print(open(\"/proc/self/status\").read()[:5])'"))
    assert done.exit_code == 0 and done.output.split() == ["a", "c", "d", "e", "Name:"]

    run(box.fresh_session())  # the seal lasts until the next fresh session
    assert run(box.exec(PLAY)).output.split() == ["ptrace", "mem-write", "shell-memory"]


def test_every_backend_seals_what_it_can_and_gives_a_fresh_session(make_sandbox, run):
    box = make_sandbox()
    run(box.exec("export LEFT=agent; (setsid sleep 7802 >/dev/null 2>&1 < /dev/null &)"))
    sealed = run(box.seal_session())
    assert isinstance(sealed, tuple) and set(sealed) <= {"tracing", "memory", "proc-write"}
    assert run(box.exec("echo \"[$LEFT]\"")).output == "[]\n"
    assert "sleep 7802" not in run(box.exec("ps -e -o args=")).output


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seal_filter_refuses_the_tracing_calls_too(machine):
    import struct

    from agentgym.sandboxes import seccomp

    program = seccomp.seal_program(machine)
    rows = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    compared = {k for code, _, _, k in rows if code == 0x15}
    numbers = seccomp.ARCHES[machine][1]
    assert {numbers[name] for name in seccomp.TRACING} <= compared
    base = seccomp.filter_program(machine)
    assert numbers["ptrace"] not in {struct.unpack("=HBBI", base[i:i + 8])[3]
                                     for i in range(0, len(base), 8)}
