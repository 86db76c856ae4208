"""Sandbox.fresh_session on every backend: the agent's processes and shell state gone, the
spec's environment and the files kept; and a timeout that ends only its own command."""

from __future__ import annotations

import time

from agentgym.core.sandbox import SandboxLimits


def processes(run, box) -> str:
    return run(box.exec("ps -e -o user=,args=")).output


def test_a_fresh_session_stops_every_process_and_forgets_the_shell(make_sandbox, run):
    box = make_sandbox(env={"FROM_SPEC": "kept"}, limits=SandboxLimits(timeout_s=20))
    run(box.exec("mkdir -p /tmp/d && cd /tmp/d && echo data > file && export FOO=agent"))
    run(box.exec("env() { echo HIJACKED; }; shopt -s expand_aliases; alias ls='echo ALIASED';"
                 " hash -p /bin/false true; trap 'echo TRAPPED' DEBUG; umask 077"))
    run(box.exec("(setsid sleep 7771 >/dev/null 2>&1 < /dev/null &); nohup sleep 7772"
                 " >/dev/null 2>&1 & (exec -a agent-loop bash -c 'while :; do sleep 1; done'"
                 " >/dev/null 2>&1 < /dev/null &) ; echo started"))
    time.sleep(0.3)
    assert "sleep 7771" in processes(run, box) and "sleep 7772" in processes(run, box)
    run(box.fresh_session())
    result = run(box.exec("pwd; echo \"$FOO|$FROM_SPEC\"; type -t env; ls /tmp/d; true;"
                          " echo $?; trap -p DEBUG; umask; cat /tmp/d/file"))
    lines = result.output.splitlines()
    assert lines[0] == box.workdir
    assert lines[1] == "|kept"
    assert lines[2] == "file"  # env is the program again
    assert lines[3:5] == ["file", "0"]  # ls is not aliased, true not hashed to false
    assert "TRAPPED" not in result.output and "HIJACKED" not in result.output
    assert lines[-2] == "0022" and lines[-1] == "data"
    left = processes(run, box)
    assert "7771" not in left and "7772" not in left and "agent-loop" not in left, left
    assert run(box.exec("echo again")).output == "again\n"


def test_a_fresh_session_ends_a_fork_bomb(make_sandbox, run):
    box = make_sandbox(limits=SandboxLimits(pids=64, timeout_s=10))
    run(box.exec(":(){ :|:& };:", timeout=3))
    time.sleep(1)
    start = time.monotonic()
    run(box.fresh_session())
    assert time.monotonic() - start < 30
    count = run(box.exec("ls -d /proc/[0-9]* | wc -l")).output.split()[-1]
    assert int(count) < 10
    forked = run(box.exec("for i in $(seq 40); do sleep 1 & done; wait; echo forked"))
    assert forked.output.strip().endswith("forked"), forked.output[-300:]


def test_a_timeout_ends_only_its_command(make_sandbox, run):
    """A service the agent started earlier survives another command's timeout and output
    flood, on every backend (docker used to kill every process of the sandbox user)."""
    box = make_sandbox(limits=SandboxLimits(timeout_s=20, output_bytes=4096))
    run(box.exec("(setsid sleep 7781 >/dev/null 2>&1 < /dev/null &); echo started"))
    time.sleep(0.3)
    timed = run(box.exec("sleep 5000 & sleep 1000", timeout=1))
    assert timed.timed_out
    flood = run(box.exec("yes flood", timeout=60))
    assert flood.truncated and flood.exit_code == 137
    left = processes(run, box)
    assert "sleep 7781" in left, left
    assert "sleep 5000" not in left and "sleep 1000" not in left and "yes" not in left, left


def test_the_sandbox_cannot_ask_for_a_fresh_session(make_sandbox, run):
    """The local init renews the session only on the host's SIGUSR1: the sandbox's own, to
    its pid 1, ends nothing."""
    box = make_sandbox(limits=SandboxLimits(timeout_s=10))
    run(box.exec("export KEPT=yes; (setsid sleep 7791 >/dev/null 2>&1 < /dev/null &)"))
    sent = run(box.exec("kill -USR1 1; sleep 0.3; echo sent"))
    assert sent.output.strip().endswith("sent"), sent.output
    assert run(box.exec("echo $KEPT")).output == "yes\n"
    assert "sleep 7791" in processes(run, box)
