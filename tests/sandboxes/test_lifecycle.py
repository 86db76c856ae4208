"""Sandboxes never leak: not on error, interrupt, interpreter exit, crash, nor over a soak."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxError, SandboxLimits
from agentgym.sandboxes import local


def leftovers(backend: str, owner: int) -> dict[str, int]:
    """What sandboxes of ``backend`` made by process ``owner`` left behind on the host.

    Only that process's own: sandboxes carry their owner's pid (local: in their id, hence
    their folder, cgroup and command lines; docker: a label), so other programs running
    sandboxes on this machine meanwhile never change the count.
    """
    mark = f"{local.SANDBOX_DIR}/{owner}-"
    mounts = sum(mark in line for line in Path("/proc/self/mountinfo").read_text()
                 .splitlines())
    if backend == "local":
        processes = 0
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                processes += mark in cmdline.read_bytes().decode(errors="replace")
            except OSError:
                continue  # exited meanwhile
        dirs = list(local.SANDBOX_DIR.glob(f"{owner}-*"))
        groups = [g for g in local.existing_groups() if g.startswith(f"{owner}-")]
        return {"processes": processes, "workspaces": len(dirs), "cgroups": len(groups),
                "mounts": mounts}
    import docker

    from agentgym.sandboxes.docker import LABEL, OWNER_PID_LABEL

    containers = docker.from_env().containers.list(
        all=True, filters={"label": [f"{LABEL}=1", f"{OWNER_PID_LABEL}={owner}"]})
    return {"containers": len(containers), "mounts": mounts}


def nothing(backend: str) -> dict[str, int]:
    return dict.fromkeys(leftovers(backend, -1), 0)


def settled(backend: str, owner: int) -> dict[str, int]:
    """The leftover counts once sandboxes closed by earlier tests have finished exiting."""
    previous, deadline = leftovers(backend, owner), time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if (now := leftovers(backend, owner)) == previous:
            return now
        previous = now
    return previous


def wait_for(backend: str, owner: int, expected: dict[str, int],
             seconds: float = 20) -> dict[str, int]:
    deadline = time.monotonic() + seconds
    while (now := leftovers(backend, owner)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return now


def python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.parametrize("ending", ["exit without close", "dropped unclosed", "KeyboardInterrupt",
                                    "exception"])
def test_sandboxes_close_however_the_program_ends(backend, ending):
    body = {
        "exit without close": "box = await open_sandbox(B)\n    await box.exec('sleep 0 &')",
        # Nothing references it any more, and the garbage collector has run.
        "dropped unclosed": "await (await open_sandbox(B)).exec('true')\n"
                            "    import gc; gc.collect()",
        "KeyboardInterrupt": "async with await open_sandbox(B) as box:\n"
                             "        await box.exec('true')\n        raise KeyboardInterrupt",
        "exception": "async with await open_sandbox(B) as box:\n"
                     "        raise ValueError('tool bug')",
    }[ending]
    child = python(f"""
        import asyncio
        from agentgym.core.registry import open_sandbox
        B = {backend!r}
        async def main():
            {body}
        asyncio.run(main())
    """)
    child.communicate(timeout=120)
    assert wait_for(backend, child.pid, nothing(backend)) == nothing(backend)


def test_a_killed_program_is_cleaned_by_gc(backend, agentgym_cli):
    child = python(f"""
        import asyncio, time
        from agentgym.core.registry import open_sandbox
        async def main():
            box = await open_sandbox({backend!r})
            await box.exec('nohup sleep 600 >/dev/null 2>&1 &')
            print('ready', flush=True)
            time.sleep(600)
        asyncio.run(main())
    """)
    assert child.stdout.readline().strip() == "ready"
    assert leftovers(backend, child.pid) != nothing(backend)
    child.send_signal(signal.SIGKILL)
    child.wait()
    out = subprocess.run([agentgym_cli, "sandbox", "gc"], capture_output=True, text=True,
                         check=True)
    assert f"{backend}: removed" in out.stdout
    assert wait_for(backend, child.pid, nothing(backend)) == nothing(backend)


def test_a_cancelled_command_leaves_the_session_usable(make_sandbox, run):
    box = make_sandbox()

    async def cancel_mid_command():
        task = asyncio.ensure_future(box.exec("sleep 30; echo late"))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await box.exec("echo next", timeout=20)

    result = run(cancel_mid_command())
    assert result.output == "next\n"


def test_exec_after_close_raises(make_sandbox, run):
    box = make_sandbox()
    run(box.close())
    run(box.close())
    with pytest.raises(SandboxError, match="closed"):
        run(box.exec("true"))


#: Episodes of the soak: 200 a run, 500 with whole sets (AGENTGYM_TEST_FULL=1).
SOAK_EPISODES = {False: 200, True: 500}


@pytest.mark.slow
def test_soak_leaves_nothing_behind(backend, sample):
    """200 episodes (500 with AGENTGYM_TEST_FULL=1), 8 at a time, with faults injected at
    random; then count leftovers."""
    before = settled(backend, os.getpid())
    rng = random.Random(1234)
    faults = ["none", "timeout", "exit", "exception", "cancel", "daemon", "kill-all",
              "escape"]
    episodes = SOAK_EPISODES[sample.full]
    plan = [rng.choice(faults) for _ in range(episodes)]
    limits = SandboxLimits(timeout_s=10, pids=64, memory_mb=256, disk_mb=64)
    outcomes: dict[str, int] = {}

    async def episode(fault: str) -> None:
        async with await open_sandbox(backend, limits=limits) as box:
            await box.exec("echo start > f && cd /tmp")
            if fault == "timeout":
                assert (await box.exec("sleep 5", timeout=0.2)).timed_out
            elif fault == "exit":
                await box.exec("exit 4")
            elif fault == "exception":
                raise ValueError("injected")
            elif fault == "cancel":
                task = asyncio.ensure_future(box.exec("sleep 5"))
                await asyncio.sleep(0.05)
                task.cancel()
                raise asyncio.CancelledError
            elif fault == "daemon":
                await box.exec("nohup sleep 300 >/dev/null 2>&1 &")
            elif fault == "kill-all":
                await box.exec("kill -9 -1")
            elif fault == "escape":  # each must fail, and leave the session as it was
                attempt = await box.exec(
                    "kill -INT 1; kill -9 1; unshare -r true || cat /proc/1/environ"
                    " || echo refused")
                assert attempt.output.rstrip().endswith("refused"), attempt.output
            assert (await box.exec("cat /workspace/f")).output == "start\n"

    async def main() -> None:
        gate = asyncio.Semaphore(8)

        async def guarded(fault: str) -> None:
            async with gate:
                try:
                    await episode(fault)
                    outcome = "ok"
                except (ValueError, asyncio.CancelledError) as e:
                    outcome = type(e).__name__
                outcomes[outcome] = outcomes.get(outcome, 0) + 1

        await asyncio.gather(*(guarded(f) for f in plan))

    asyncio.run(main())
    expected_failures = sum(f in ("exception", "cancel") for f in plan)
    assert outcomes.get("ok", 0) == episodes - expected_failures, outcomes
    assert wait_for(backend, os.getpid(), before) == before
