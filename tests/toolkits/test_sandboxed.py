"""``SandboxedEnv`` on real sandboxes: each episode's sandbox is opened from the task, kept
by the episode, prepared, and graded from the episode, so that a grade still reading its
sandbox while the env's next episode starts reads its own, and then closes it."""

from __future__ import annotations

import asyncio
import json

from agentgym.core.episode import Episode, Submitted
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import Sandbox, SandboxLimits, SandboxSpec, open_sandboxes
from agentgym.core.task import Task, TaskList
from agentgym.core.tools import tool
from agentgym.toolkits import BashTools, SandboxedEnv, episode_sandbox


class NoteEnv(SandboxedEnv):
    """The agent copies task.txt (written by the env) to note.txt; the grader, slowly, reads
    note.txt back from the graded episode's sandbox."""

    toolsets = (BashTools,)

    def __init__(self, backend: str):
        self.backend = backend
        super().__init__(TaskList([Task("a", "Copy task.txt to note.txt."),
                                   Task("b", "Copy task.txt to note.txt.")]), max_turns=5)

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        return SandboxSpec(limits=SandboxLimits(timeout_s=30))

    async def prepare_sandbox(self, sandbox: Sandbox, episode: Episode) -> None:
        await sandbox.write_file("task.txt", episode.task.id)

    async def grade(self, episode: Episode) -> RewardResult:
        await asyncio.sleep(0.3)  # the next episode's reset runs meanwhile
        box = episode_sandbox(episode)
        assert box is not None
        note = (await box.read_file("note.txt")).decode()
        return RewardResult(float(note == episode.task.id), {"note": note})

    @tool
    def submit(self) -> str:
        """Submit. This ends the episode."""
        raise Submitted(None)


def call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def test_a_grade_reads_its_own_sandbox_while_the_next_episode_starts(backend: str) -> None:
    async def play() -> None:
        env = NoteEnv(backend)
        try:
            await env.areset(options={"task_id": "a", "defer_grading": True})
            first = env.episode
            assert first is not None
            await env.astep(call("bash", command="cp task.txt note.txt"))
            await env.astep(call("submit"))
            box = episode_sandbox(first)
            assert box is not None and box in open_sandboxes.live
            grading = asyncio.ensure_future(env.agrade())
            await asyncio.sleep(0)  # the grade has started
            await env.areset(options={"task_id": "b", "overlap_setup": True})
            assert await grading == (1.0, {"note": "a"})
            assert box not in open_sandboxes.live  # closed once graded
            new, *_ = await env.astep(call("bash", command="cat task.txt"))
            assert new[0]["content"].startswith("b"), new
            assert episode_sandbox(env.episode) not in (None, box)
        finally:
            await env.aclose()

    asyncio.run(play())


def test_a_sandbox_opens_on_the_default_backend_with_the_default_spec() -> None:
    class Plain(SandboxedEnv):
        toolsets = (BashTools,)
        reward = "numeric_answer"

    env = Plain(TaskList([Task("t", "p", {"answer": "1"})]))
    assert env.backend_for(env.tasks[0]) == "local"
    spec = asyncio.run(env.sandbox_spec(env.tasks[0]))
    assert spec == SandboxSpec()
    env.close()
