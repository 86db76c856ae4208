"""The workspace of a swe-synth task is one an agent can work in, on both backends: a
scripted agent runs the tests, one test, the project's code and pip through the env's own
``bash`` tool, as the prompt tells it to, and no file in the sandbox names a host path."""

from __future__ import annotations

import asyncio
import json
import re

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core.policies import ScriptedPolicy
from agentgym.core.sandbox import DEFAULT_WORKDIR
from agentgym.plugins.swe import repo
from agentgym.plugins.swe.env import PACKAGED_TEST_CMD, run_tests_hint
from agentgym.plugins.swe.grading import DEFAULT_TEST_CMD
from agentgym.plugins.swe.instance import SWEInstance
from agentgym.plugins.swe.repo import ENV_MOUNT
from agentgym.rollout.loop import play_episode
from agentgym.toolkits import BashTools

#: Prefixes of host folders that no file of the env, seen from the sandbox, may name.
HOST_PREFIXES = ("/root", "/work", "/tmp/pytest")


def bash(command: str) -> str:
    return ('<tool_call>\n' + json.dumps({"name": "bash", "arguments": {"command": command}})
            + '\n</tool_call>')


SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'


def run_commands(env, task_id: str, commands: list[str]) -> tuple[list[dict], list[str]]:
    """Play ``commands`` through the env's bash tool, then submit; returns the reset's
    messages and each command's output."""
    policy = ScriptedPolicy([bash(c) for c in commands] + [SUBMIT])

    async def play():
        try:
            return await play_episode(env.unwrapped, policy, task_id)
        finally:  # on this loop, which the episode's sandboxes belong to
            await env.unwrapped.aclose()

    trajectory = asyncio.run(play())
    assert trajectory.error is None, trajectory.error
    tools = [m["content"] for m in trajectory.messages if m["role"] == "tool"]
    assert len(tools) == len(commands) + 1, trajectory.messages
    return trajectory.messages, tools[:-1]


@pytest.mark.slow
def test_an_agent_runs_the_tests_the_project_and_pip_from_its_workspace(backend, toolz_tasks):
    env = gym.make("swe-synth", tasks=str(toolz_tasks), backend=backend)
    raw = env.unwrapped
    task = raw.tasks[0]
    instance = raw.instances[task.id]
    failing = instance.FAIL_TO_PASS[0]
    passing = instance.PASS_TO_PASS[0]
    cache = str(repo.cache_dir().resolve())
    env_bin = f"{ENV_MOUNT}/bin"
    commands = [
        "which python python3 pip pytest",
        "python -m pytest -x -q",
        f"pytest {failing}",
        f"pytest -rA {passing}",
        'python -c "import toolz; print(toolz.__file__)"',
        # an edit is what gets imported, from any folder
        "echo 'AGENT_EDIT = 42' >> toolz/__init__.py && cd / &&"
        ' python -c "import toolz; print(toolz.AGENT_EDIT)"; cd - >/dev/null',
        "pip --version && pip list",
        # the env's scripts, its pyvenv.cfg and .pth files, then every file of the env
        f"grep -lE '{'|'.join(map(re.escape, (cache, *HOST_PREFIXES)))}'"
        f" {env_bin}/* {ENV_MOUNT}/pyvenv.cfg $(find {ENV_MOUNT} -name '*.pth');"
        f" echo scripts:$?; grep -rlF '{cache}' {ENV_MOUNT}; echo all:$?",
        "git status --short",
    ]
    messages, out = run_commands(env, task.id, commands)

    # The prompt says how to run the tests, and the bash tool's example agrees.
    assert f"Run the tests with `{PACKAGED_TEST_CMD}`" in messages[1]["content"]
    example = BashTools.definitions()[0].schema()["function"]["parameters"]
    assert PACKAGED_TEST_CMD in json.dumps(example)

    which, suite, one_failing, one_passing, where, edited, pip, grep, status = out
    assert which.splitlines()[:4] == [f"{env_bin}/{name}"
                                      for name in ("python", "python3", "pip", "pytest")]
    # The real suite ran: the injected bug fails a test and -x stops there.
    counts = re.search(r"(\d+) failed, (\d+) passed", suite)
    assert counts and counts.group(1) == "1" and int(counts.group(2)) > 0, suite
    assert suite.endswith("[exit code 1]"), suite
    # One test id runs exactly that test.
    assert re.search(r"\b1 failed in ", one_failing), one_failing
    assert f"FAILED {failing}" in one_failing and "passed" not in one_failing
    assert re.search(r"\b1 passed in ", one_passing), one_passing
    assert f"PASSED {passing}" in one_passing and one_passing.count("PASSED ") == 1
    assert where == f"{DEFAULT_WORKDIR}/toolz/__init__.py\n[exit code 0]"
    assert edited == "42\n[exit code 0]"
    assert pip.startswith("pip ") and f"from {ENV_MOUNT}/lib/" in pip, pip
    assert re.search(r"^pytest +8\.", pip, re.M) and pip.endswith("[exit code 0]"), pip
    # grep exits 1 when it finds nothing, and lists what it finds.
    assert grep == "scripts:1\nall:1\n[exit code 0]", grep
    # No bytecode or other leftovers of the commands: the edit alone.
    assert status == " M toolz/__init__.py\n[exit code 0]", status


def test_the_test_command_in_the_prompt_is_the_one_the_task_runs_with() -> None:
    base = {"instance_id": "demo__calc-1", "repo": "demo/calc", "base_commit": "0" * 40,
            "problem_statement": "add is wrong", "FAIL_TO_PASS": ["tests/test_calc.py::t"]}
    packaged = SWEInstance.from_dict({**base, "package": "calc", "package_version": "1.0",
                                      "test_cmd": f"{ENV_MOUNT}/bin/python -m pytest -rA"})
    assert f"`{PACKAGED_TEST_CMD}`" in run_tests_hint(packaged)
    # In an image, the command the grader runs: the instance's, else the grader's default.
    assert (f"`{ENV_MOUNT}/bin/python -m pytest -rA` (followed by"
            in run_tests_hint(packaged, image="me/calc:1"))
    assert f"`{DEFAULT_TEST_CMD}` (followed by" in run_tests_hint(SWEInstance.from_dict(base))
    django = SWEInstance.from_dict({**base, "test_cmd": "./tests/runtests.py {tests}"})
    assert run_tests_hint(django) == "Run the tests with `./tests/runtests.py TEST_IDS`."
