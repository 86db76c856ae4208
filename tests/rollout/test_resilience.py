"""Failures stay inside their episode; interrupted runs resume."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from agentgym.core import AgentEnv, Reward, RewardResult, Submitted, Task, TaskList, tool
from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxLimits
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.trajectory import TrajectoryWriter, read_trajectories
from agentgym.testing import ScriptedPolicy


class Passed(Reward):
    def score(self, episode):
        return RewardResult(float(episode.submitted))


class ShellEnv(AgentEnv):
    """Each episode gets a local sandbox; the 'crash' task's command kills it."""

    reward = Passed()

    def __init__(self, **kwargs):
        tasks = TaskList([Task(f"t{i}", "Run the command, then submit.",
                               metadata={"command": "kill -9 -1; sleep 1" if i == 2 else "true"})
                          for i in range(5)])
        super().__init__(tasks, max_turns=3, **kwargs)
        self.box = None

    async def setup_episode(self, task):
        self.box = await open_sandbox("local", limits=SandboxLimits(timeout_s=10))

    async def teardown_episode(self):
        if self.box:
            await self.box.close()

    @tool
    async def run(self) -> str:
        """Run the task's command."""
        if self.episode.task.id == "t2":
            self.box.close_now()  # the sandbox dies under the episode
        return (await self.box.exec(self.episode.task.metadata["command"])).output

    @tool
    def done(self) -> str:
        """Submit."""
        raise Submitted(True)


def needs_local_sandbox():
    from shutil import which

    if which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("the local sandbox needs bubblewrap and root")


def test_a_crashed_sandbox_ends_one_episode_not_the_batch():
    needs_local_sandbox()
    turns = ['<tool_call>{"name": "run", "arguments": {}}</tool_call>',
             '<tool_call>{"name": "done", "arguments": {}}</tool_call>']
    results = asyncio.run(rollout("x", ScriptedPolicy(turns), 5, make_env=ShellEnv))
    by_task = {t.task_id: t for t in results}
    assert by_task["t2"].finish_reason == "sandbox_error"
    assert "SandboxError" in by_task["t2"].error and by_task["t2"].reward == 0.0
    assert all(by_task[f"t{i}"].reward == 1.0 for i in (0, 1, 3, 4))


SLOW_ROLLOUT = """
import asyncio, sys, time
from agentgym.core import OraclePolicy
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.trajectory import TrajectoryWriter

class SlowOracle(OraclePolicy):
    async def act(self, messages, task):
        await asyncio.sleep(0.05)
        return super().act(messages, task)

writer = TrajectoryWriter(sys.argv[1], resume=True)
asyncio.run(rollout("calculator", SlowOracle(), 40, skip=set(writer.done),
                    on_done=writer.write))
"""


def test_resume_after_sigkill_mid_run(tmp_path):
    out = tmp_path / "run.jsonl"
    child = subprocess.Popen([sys.executable, "-c", SLOW_ROLLOUT, str(out)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count("\n") >= 8:
            break
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    with out.open("a") as f:  # a line cut short, as a crash mid-write would leave
        f.write('{"env": "calculator", "task_id": "calcu')
    written = out.read_text().count("\n")
    assert 8 <= written < 40
    subprocess.run([sys.executable, "-c", SLOW_ROLLOUT, str(out)], check=True, timeout=120)
    records = read_trajectories(out)
    assert sorted(t.episode for t in records) == list(range(40))
    assert all(t.reward == 1.0 for t in records)
    assert out.read_text().endswith("\n")


def test_writer_refuses_to_overwrite_and_datasets_reads_the_file(tmp_path):
    out = tmp_path / "t.jsonl"
    from agentgym.core import NoopPolicy, OraclePolicy

    with TrajectoryWriter(out) as writer:
        asyncio.run(rollout("calculator", OraclePolicy(), 2, on_done=writer.write))
        asyncio.run(rollout("calculator", NoopPolicy(), 1, on_done=writer.write))
    with pytest.raises(FileExistsError, match="--resume"):
        TrajectoryWriter(out)
    import datasets

    data = datasets.load_dataset("json", data_files=str(out), split="train")
    assert len(data) == 3
    assert sorted(data["reward"]) == [0.0, 1.0, 1.0]
    assert {k: v for k, v in data[0]["metrics"].items() if k not in ("expected", "got")} in (
        {"submitted": True, "parsed": True}, {"submitted": False})


def test_hostile_turns_are_ordinary_turns_with_their_penalty():
    """A model that writes 10,000-deep JSON or non-text gets error messages and a counted
    penalty; its episodes are not crashed (which would mask them from training)."""
    from agentgym.testing.fuzz import HOSTILE_ACTIONS

    hostile = [HOSTILE_ACTIONS[name]() for name in (
        "hermes, 10,000-deep JSON", "hermes, 100,000-digit integer", "an int", "bytes")]
    results = asyncio.run(rollout("calculator", ScriptedPolicy(hostile), 3,
                                  env_kwargs={"max_turns": 4}))
    for trajectory in results:
        assert trajectory.error in (None, ""), trajectory.error
        assert trajectory.finish_reason == "max_turns"
        assert trajectory.tool_errors == 4 and trajectory.reward == 0.0
