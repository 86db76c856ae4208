"""Exploit probes in validate, on a third-party env written the weak way: its grader runs
its check in the agent's sandbox and reads the verdict from a file the agent can write.
The generic shell probes (plugin ``sandboxes``) apply to it without its author doing
anything, and validate fails naming the probe that was paid."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.conftest import backend_missing

WEAK_ENV = '''
import agentgym
from agentgym.core import RewardResult, SandboxSpec, Submitted, Task, TaskList, tool
from agentgym.core.registry import EnvRegistration
from agentgym.core.task import SolutionTurn
from agentgym.core.parsers import ToolCall
from agentgym.toolkits import BashTools, SandboxedEnv, episode_sandbox

CHECK = ("mkdir -p /logs/verifier; cd /workspace && sort in.txt | cmp -s - out.txt"
         " && echo 1 > /logs/verifier/reward.txt; cat /logs/verifier/reward.txt")


def make_task(i):
    solve = SolutionTurn([ToolCall("bash", {"command": "sort in.txt > out.txt"})])
    return Task(f"sort-{i}", "Write the lines of in.txt, sorted, to out.txt.",
                {"lines": [f"line {(7 * i + k) % 5}" for k in range(5)]},
                [solve, SolutionTurn([ToolCall("submit", {})])])


class WeakSortEnv(SandboxedEnv):
    """Sort a file. Its grader trusts /logs/verifier/reward.txt: the agent can write it."""

    system_prompt = "Use bash, then submit."
    toolsets = (BashTools,)

    def __init__(self, backend: str = "local"):
        self.backend = backend
        super().__init__(TaskList([make_task(i) for i in range(5)]), max_turns=6)

    async def sandbox_spec(self, task):
        return SandboxSpec(scratch_dirs=("/logs",))

    async def prepare_sandbox(self, sandbox, episode):
        lines = episode.task.metadata["lines"]
        await sandbox.write_file("in.txt", "\\n".join(lines) + "\\n")

    @tool
    def submit(self) -> str:
        """Say that the work is done."""
        raise Submitted(None, "Submitted.")

    async def grade(self, episode):
        result = await episode_sandbox(episode).exec(CHECK, timeout=30)
        paid = result.output.strip().endswith("1")
        return RewardResult(float(paid), {"reason": f"reward.txt says {result.output.strip()!r}"})


@agentgym.hookimpl
def agentgym_envs():
    return [EnvRegistration("weak-sort", WeakSortEnv, "Sort a file (a weak grader).")]
'''


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_weak_third_party_grader_fails_validation_with_the_probe_named(
        backend, fake_plugin, agentgym_cli):
    if why := backend_missing(backend):
        pytest.skip(why)
    fake_plugin("weak-sort", WEAK_ENV)
    command = [agentgym_cli, "validate", "weak-sort", "-e", f"backend={backend}", "-n", "2"]
    # Every probe on local; on docker the two that attack this grader's file.
    chosen = [] if backend == "local" else ["--probe", "shell.grader-files-prefill",
                                            "--probe", "shell.verifier-symlink"]
    out = subprocess.run([*command, *chosen, "--json"], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads(out.stdout)
    # The oracle and noop hold: the task itself is sound...
    assert not [f for f in report["failed"] if not f["check"].startswith("probe ")]
    # ...but its grader pays the probes that write the file it reads: the simplest, a
    # pre-filled verifier folder, on every task; each paid one is named with the reason.
    assert report["probes"]["shell.grader-files-prefill"] == {
        "attack": "grader-files", "played": 2, "paid": 2, "not_applicable": 0}
    paid = [f for f in report["failed"] if f["check"] == "probe shell.grader-files-prefill"]
    assert [f["reason"] for f in paid] == [
        "paid 1 (pass threshold 1) for no work: reward.txt says '1'"] * 2
    # The table names it too.
    table = subprocess.run([*command, "--probe", "shell.grader-files-prefill"],
                           capture_output=True, text=True, timeout=900,
                           env={**os.environ, "COLUMNS": "200"})
    assert table.returncode == 1, table.stdout + table.stderr
    assert "shell.grader-files-prefill" in table.stdout and "grader-files" in table.stdout
    assert "1 exploit probe played 2 times, paid 2" in table.stdout
