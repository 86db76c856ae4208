"""The shared toolkits in a plugin env of its own, on both sandbox backends.

``ScriptEnv`` is written as a plugin author would write one: a ``SandboxedEnv`` that names
``BashTools`` and ``EditorTools`` in ``toolsets`` (bound to each episode's sandbox) and
the backend, adds its own ``submit``, and whose reward reads the agent's file in the
sandbox of the episode it scores. An episode creates a script with the editor, runs it with bash,
edits it, runs it again, and submits.
"""

from __future__ import annotations

import asyncio
import functools

from agentgym.core.episode import Episode, Submitted
from agentgym.core.parsers import ToolCall
from agentgym.core.reward import Reward, RewardResult
from agentgym.core.sandbox import SandboxLimits, SandboxSpec, open_sandboxes
from agentgym.core.task import SolutionTurn, Task, TaskList
from agentgym.core.tools import tool
from agentgym.toolkits import BashTools, EditorTools, SandboxedEnv, episode_sandbox

SCRIPT = "hello.py"


class ScriptPrints(Reward):
    """1.0 when the agent's script prints the task's word."""

    name = "script_prints"

    async def score(self, episode: Episode) -> RewardResult:
        box = episode_sandbox(episode)
        assert box is not None
        try:
            source = (await box.read_file(SCRIPT)).decode()
        except FileNotFoundError:
            return RewardResult(0.0, {"reason": f"{SCRIPT} does not exist"})
        ran = await box.exec(f"python3 {SCRIPT}", timeout=30)
        printed = ran.output.strip()
        return RewardResult(float(printed == episode.task.metadata["word"]),
                            {"source": source, "printed": printed})


def solution(word: str) -> list[SolutionTurn]:
    return [
        SolutionTurn([ToolCall("str_replace_editor", {
            "command": "create", "path": SCRIPT, "file_text": 'print("hello")\n'})]),
        SolutionTurn([ToolCall("bash", {"command": f"python3 {SCRIPT}"})]),
        SolutionTurn([ToolCall("str_replace_editor", {
            "command": "str_replace", "path": SCRIPT, "old_str": '"hello"',
            "new_str": f'"{word}"'})]),
        SolutionTurn([ToolCall("bash", {"command": f"python3 {SCRIPT}"})]),
        SolutionTurn([ToolCall("submit", {})]),
    ]


class ScriptEnv(SandboxedEnv):
    """Write a Python script that prints a word."""

    system_prompt = "You write Python scripts in your workspace. Call submit when done."
    reward = ScriptPrints()

    def __init__(self, backend: str):
        self.backend = backend
        self.toolsets = (functools.partial(BashTools, command_timeout_s=30), EditorTools)
        task = Task("goodbye", f"Write {SCRIPT}, which prints goodbye.",
                    metadata={"word": "goodbye"}, solution=list(solution("goodbye")))
        super().__init__(TaskList([task]), max_turns=10)

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        return SandboxSpec(limits=SandboxLimits(timeout_s=30))

    @tool
    def submit(self) -> str:
        """Submit your script. This ends the episode."""
        raise Submitted(None, "Submitted.")


def test_a_plugin_env_runs_the_shared_toolkits(backend: str) -> None:
    env = ScriptEnv(backend)
    # The env's async API on a loop of the test's own: between calls nothing runs, so
    # what reset returned is seen before the overlapped setup goes on.
    loop = asyncio.new_event_loop()
    run = loop.run_until_complete
    try:
        messages, info = run(env.areset(options={"overlap_setup": True}))
        first = env.episode
        assert first is not None and episode_sandbox(first) is None  # still starting:
        assert first.toolsets is None  # the tools are described
        assert messages[-1]["content"] == f"Write {SCRIPT}, which prints goodbye."
        assert [t["function"]["name"] for t in info["tools"]] == [
            "bash", "str_replace_editor", "submit"]
        assert info["tools"][:2] == [t.schema() for t in
                                     [*BashTools.definitions(), *EditorTools.definitions()]]

        answers = []
        for turn in info["task"].solution:
            new, reward, terminated, truncated, step = run(env.astep(turn))
            assert step["errors"] == [], step["errors"]
            answers.append(new[0]["content"])
        assert answers[0] == f"Created {SCRIPT} (1 line)."
        assert answers[1] == "hello\n[exit code 0]"
        assert answers[2].startswith(f"Edited {SCRIPT}. The edited region:\n"
                                     '     1\tprint("goodbye")')
        assert answers[3] == "goodbye\n[exit code 0]"
        assert terminated and not truncated
        assert reward == 1.0, step["reward_metrics"]
        assert step["reward_metrics"]["source"] == 'print("goodbye")\n'

        # A new episode gets a new sandbox and new toolsets: the editor's history is gone;
        # the last episode's sandbox was closed with it.
        first_box = episode_sandbox(first)
        assert first_box is not None and first.toolsets is not None
        run(env.areset())
        assert env.episode is not None and env.episode is not first
        box = episode_sandbox(env.episode)
        assert box is not None and box is not first_box and first.toolsets is None
        assert first_box not in open_sandboxes.live and box in open_sandboxes.live
        new, *_ = run(env.astep('<tool_call>{"name": "str_replace_editor", "arguments":'
                                f' {{"command": "undo_edit", "path": "{SCRIPT}"}}}}'
                                '</tool_call>'))
        assert f"No edit of {SCRIPT} to undo" in new[0]["content"]
        _, reward, terminated, _, step = run(env.astep(
            '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'))
        assert terminated and reward == 0.0
        assert step["reward_metrics"]["reason"] == f"{SCRIPT} does not exist"
    finally:
        run(env.aclose())
        loop.close()
        env.close()
