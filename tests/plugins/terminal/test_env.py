"""The terminal envs with real sandboxes: every shipped task valid under its real grader,
Harbor and Terminal-Bench tasks with their own images on docker, and the tests out of the
agent's reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentgym
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.sandbox import SandboxError, SandboxSpecError
from agentgym.plugins.terminal.env import BUILTIN_TASKS, TerminalEnv
from agentgym.plugins.terminal.formats import load_tasks
from agentgym.plugins.terminal.probes import probes as terminal_probes
from agentgym.testing import assert_valid, check_env
from agentgym.toolkits.probes import PROBES, shell_probes

DATA = Path(__file__).parent / "data"
CATEGORIES = ("git", "text", "sqlite", "archive", "build", "schedul", "service")


def turn(name: str, arguments: dict) -> dict:
    """An assistant turn calling one tool."""
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def play(env: TerminalEnv, task_id: str, *calls: dict) -> tuple[float, dict]:
    """Reset to ``task_id``, make each ``terminal`` call in its own turn, submit; the
    reward and the last info."""
    env.reset(seed=0, options={"task_id": task_id})
    for arguments in calls:
        env.step({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "terminal",
                                              "arguments": json.dumps(arguments)}}]})
    _, reward, terminated, _, info = env.step(turn("submit", {}))
    assert terminated
    return reward, info


def test_shipped_tasks_cover_the_categories() -> None:
    tasks = load_tasks(BUILTIN_TASKS)
    assert len(tasks) >= 20
    for task in tasks:
        assert task.format == "harbor" and task.solution and task.wrong_solutions, task.id
        assert task.runs_locally, f"{task.id}: {task.local_reason}"
    text = " ".join(f"{t.id} {t.metadata.get('category', '')}" for t in tasks).lower()
    for category in CATEGORIES:
        assert category in text, f"no shipped task about {category!r}"


@pytest.mark.slow
def test_every_shipped_task_is_valid_under_its_grader(local) -> None:
    """oracle 1.0, noop 0.0, each wrong solution < 1.0, on the local backend."""
    report = assert_valid("terminal", n=None, require_solutions=True, concurrency=4,
                          probes=False)  # probes: test_reward_integrity.py, on a sample
    assert len(report.task_ids) >= 20
    assert sum(r.check.startswith("wrong") for r in report.results) >= 20


def test_check_env(local) -> None:
    check_env(agentgym.make("terminal"))


def test_prompt_names_the_workspace_and_programs(local) -> None:
    env = TerminalEnv()
    messages, info = env.reset(seed=0)
    prompt = messages[-1]["content"]
    assert "starts in /app" in prompt and "python3" in prompt and "git" in prompt
    assert [t["function"]["name"] for t in info["tools"]] == ["terminal", "bash", "submit"]
    env.close()


def test_the_prompt_names_the_programs_the_backend_says_its_image_has() -> None:
    """Read from the backend's SandboxImage, not from a backend's module: a plugin
    backend's image is described as truly as docker's."""
    from agentgym.core import hookimpl
    from agentgym.core.plugins import PluginHost, plugin_host, set_plugin_host
    from agentgym.core.sandbox import SandboxBackend, SandboxImage, SandboxSpec

    class Images(SandboxBackend):
        name = "images"
        supports = frozenset({"image", "workdir", "limits"})
        default_image = SandboxImage("images/base", programs=("git", "make"))

        async def start(self, spec: SandboxSpec):
            raise AssertionError("never started here")

    class Plugin:
        @staticmethod
        @hookimpl
        def agentgym_sandboxes():
            return [Images()]

    host = PluginHost()
    host.register(Plugin, "images")
    old = set_plugin_host(host)
    try:
        assert plugin_host() is host
        prompt = TerminalEnv(DATA / "local-task", backend="images").tasks[0].prompt
    finally:
        set_plugin_host(old)
    assert "Programs on PATH include git, make." in prompt


def test_tests_are_out_of_reach_until_grading(local) -> None:
    env = TerminalEnv(DATA / "local-task")
    env.reset(seed=0)
    command = ("ls -A /tests /logs/verifier; grep -rl EXPECTED-ANSWER /app /tests /logs /tmp"
               " /home 2>/dev/null | grep -v agentgym-terminal; echo listed")
    looked = env.step(turn("terminal", {"input": command}))[0][0]["content"]
    assert "listed" in looked and "test.sh" not in looked and "EXPECTED-ANSWER" in looked
    assert looked.count("EXPECTED-ANSWER") == 1  # only the echo of the command itself
    env.close()


def test_editing_the_tests_or_the_reward_file_does_not_pay(local) -> None:
    env = TerminalEnv(DATA / "local-task")
    forged = ("printf '#!/bin/bash\\necho 1 > /logs/verifier/reward.txt\\n' > /tests/test.sh;"
              " echo 1 > /logs/verifier/reward.txt; chmod 0 /tests/test.sh")
    reward, info = play(env, "local-task", {"input": forged})
    assert reward == 0.0, info["reward_metrics"]
    reward, _ = play(env, "local-task", {"input": "echo 42 > /app/answer.txt"})
    assert reward == 1.0
    env.close()


def test_exports_in_the_agents_shells_do_not_reach_the_grader(local) -> None:
    env = TerminalEnv(DATA / "local-task")
    poisoned = ("mkdir -p /tmp/bin && printf '#!/bin/sh\\necho 1\\n' > /tmp/bin/cat &&"
                " chmod +x /tmp/bin/cat && export PATH=/tmp/bin:$PATH")
    reward, _ = play(env, "local-task", {"input": poisoned},
                     {"input": "echo 42 > /app/answer.txt"})
    assert reward == 1.0
    env.close()


def test_a_task_needing_an_image_is_refused_on_local() -> None:
    with pytest.raises(SandboxSpecError, match=r"harbor-image.*needs its own image.*USER"):
        TerminalEnv(DATA / "harbor-image", backend="local")


@pytest.mark.slow
@pytest.mark.parametrize("task", ["harbor-image", "tb-image"])
def test_tasks_with_their_own_dockerfile_run_on_docker(docker, task) -> None:
    """Built locally FROM the default image (cached by content), graded in the container."""
    env = TerminalEnv(DATA / task)
    assert env.backend_of(env.terminal_tasks[task]) == "docker"
    env.close()
    report = assert_valid("terminal", n=None, require_solutions=True, concurrency=3,
                          tasks=str(DATA / task), probes=False)
    assert sorted(r.check for r in report.results) == ["noop", "oracle", "wrong solution #1"]


@pytest.mark.slow
def test_terminal_bench_fraction_reward(docker) -> None:
    env = TerminalEnv(DATA / "tb-image")
    reward, info = play(env, "tb-image", {"input": "cp /etc/demo/app.conf /app/app.conf"})
    metrics = info["reward_metrics"]
    assert (metrics["tests_passed"], metrics["tests_total"]) == (1, 3)
    assert reward == pytest.approx(1 / 3)
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "at_least"), [("terminal-agentbench-os", 60),
                                                  ("terminal-nl2bash", 150)])
def test_package_sourced_tasks_are_valid_under_their_grader(local, env_id, at_least,
                                                            sample) -> None:
    """The converters keep at least ``at_least`` tasks from the packages' data; 15 of them a
    run (every one under ``AGENTGYM_TEST_FULL=1``) score oracle 1.0, noop 0.0 and wrong
    solutions < 1.0 on the local backend. (Every task: ``agentgym validate ENV_ID --all``,
    or ``python scripts/validate_all_envs.py terminal- --all``.)"""
    env = TerminalEnv(env_id=env_id, backend="local")
    ids = env.task_ids()
    env.close()
    assert len(ids) >= at_least
    chosen = sample(ids, 15)
    report = assert_valid(env_id, task_ids=chosen, require_solutions=True, concurrency=4,
                          probes=False)
    assert report.task_ids == chosen


@pytest.mark.slow
@pytest.mark.parametrize(("env_id", "tasks"), [("terminal-agentbench-os", 1),
                                               ("terminal-nl2bash", 3)])
def test_package_sourced_tasks_are_valid_on_docker(docker, env_id, tasks) -> None:
    """A few tasks of each package-sourced env, with every probe, on docker: AgentBench's
    work in the agent's home, which the docker sandbox once refused as a workspace. (Each
    AgentBench task builds its own image, about a minute: one is checked here; every task:
    ``python scripts/validate_all_envs.py terminal- --all --backend docker``.)"""
    env = TerminalEnv(env_id=env_id, backend="docker")
    ids = env.task_ids()
    env.close()
    sample = ids[::len(ids) // tasks][:tasks]
    report = assert_valid(env_id, backend="docker", task_ids=sample,
                          require_solutions=True, probes=True)
    assert len(report.task_ids) == tasks
    assert sum(c["played"] for c in report.probe_counts().values()) >= tasks * len(PROBES)


@pytest.mark.slow
def test_validate_runs_a_users_task_folder(local, agentgym_cli) -> None:
    import subprocess

    done = subprocess.run([agentgym_cli, "validate", "terminal", "-e",
                           f"tasks={DATA / 'local-task'}", "--all", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    # oracle, noop, the wrong solution, every generic shell probe and the terminal
    # family's own (none paid)
    probes = len(shell_probes()) + len(terminal_probes())
    assert (result["tasks"], result["checked"], result["ok"]) == (1, 3 + probes, True)


def test_a_missing_base_image_is_named(docker, tmp_path) -> None:
    import shutil

    task = tmp_path / "needs-base"
    shutil.copytree(DATA / "harbor-image", task)
    (task / "environment" / "Dockerfile").write_text("FROM example.invalid/absent:1\n"
                                                     "WORKDIR /app\n")
    env = TerminalEnv(task)
    with pytest.raises(SandboxError, match=r"base image 'example.invalid/absent:1' .* never"
                                           r" pulls"):
        env.reset(seed=0)
    env.close()


def test_the_verifier_env_reaches_the_tests(local, tmp_path) -> None:
    import shutil

    task = tmp_path / "with-env"
    shutil.copytree(DATA / "local-task", task)
    with open(task / "task.toml", "a") as config:
        config.write('env = { WANTED = "43" }\n')
    (task / "tests" / "test.sh").write_text(
        '[ "$(cat /app/answer.txt)" = "$WANTED" ] && echo 1 > /logs/verifier/reward.txt'
        " || echo 0 > /logs/verifier/reward.txt\n")
    env = TerminalEnv(task)
    assert play(env, "with-env", {"input": "echo 43 > /app/answer.txt"})[0] == 1.0
    assert play(env, "with-env", {"input": "echo 42 > /app/answer.txt"})[0] == 0.0
    env.close()


@pytest.mark.slow
def test_a_rebuildable_dockerfile_makes_the_same_workspace_on_both_backends(local, docker,
                                                                          tmp_path) -> None:
    """A Dockerfile FROM the default image with COPY, ENV and RUN: the docker build makes
    the workspace the local backend makes (files, owners, modes, what RUN wrote), where
    built as written its RUN steps could not write the root-owned copies."""
    import asyncio
    import shutil

    from agentgym.core.registry import open_sandbox

    task = tmp_path / "tasks" / "rebuilt"
    shutil.copytree(DATA / "local-task", task)
    context = task / "environment"
    (context / "app" / "sub").mkdir(parents=True)
    (context / "app" / "sub" / "data.txt").write_text("x\n")
    (context / "setup.sh").write_text("#!/bin/bash\nchmod 640 sub/data.txt\n")
    (context / "Dockerfile").write_text(
        "FROM agentgym/sandbox:default\nWORKDIR /srv/app\nCOPY app/ ./\n"
        "COPY setup.sh /srv/app/tools/\nENV MODE=\"a $b \\\"c\\\"\" PLAIN=1\n"
        "RUN bash tools/setup.sh && mkdir -p made && echo \"$MODE\" > made/mode.txt\n"
        "WORKDIR /srv/app/sub\nRUN id -un > who.txt && echo $PLAIN >> who.txt\n"
        "WORKDIR /srv/app\n")
    listing = ("{ find . -type f -printf '%P %u %m %s\\n'; find . -type d -printf '%P/ %u %m\\n'"
               "; } | sort && cat made/mode.txt sub/who.txt && echo \"$MODE\"")

    async def workspace(backend: str) -> str:
        env = TerminalEnv(task.parent, backend=backend)
        try:
            spec = await env.workspace_spec(env.terminal_tasks["rebuilt"])
        finally:
            env.close()
        async with await open_sandbox(backend, spec) as box:
            result = await box.exec(listing)
            assert result.ok, result.output
            return result.output

    local_view, docker_view = asyncio.run(workspace("local")), asyncio.run(workspace("docker"))
    assert docker_view == local_view
    assert "sub/data.txt agent 640 2" in local_view and 'a $b "c"' in local_view
    assert "agent\n1" in local_view


@pytest.mark.parametrize("script, typed", [
    # set -e and exit end the child shell the script is typed into, not the session; a
    # heredoc of its own and a `!` (history expansion, off inside a quoted heredoc) stay
    ("#!/usr/bin/env bash\n# the reference\nset -euo pipefail\ncat > /tmp/part <<'END'\n"
     "4\nEND\n[ ! -e /tmp/none ] && printf '%s%s\\n' \"$(cat /tmp/part)\" 2 > answer.txt\n"
     "exit 0\n", True),
    # a tab would be taken for completion: typed as base64 instead
    ("printf '4\t2\\n' | tr -d '\\t' > /app/answer.txt\n", False),
])
def test_the_oracle_types_a_script_as_it_reads_where_a_terminal_can(local, tmp_path, script,
                                                                    typed) -> None:
    import shutil

    task = tmp_path / "typed"
    shutil.copytree(DATA / "local-task", task)
    (task / "solution" / "solve.sh").write_text(script)
    env = TerminalEnv(task)
    first = env.unwrapped.tasks.get("typed").solution[0].tool_calls[0].arguments["input"]
    if typed:  # a demonstration a model can learn from: the commands, from the first on
        assert first.startswith("bash <<'AGENTGYM_EOF'\nset -euo pipefail\n")
        assert first.endswith("\nexit 0\nAGENTGYM_EOF") and "#" not in first
    else:
        assert "base64 -d" in first
    env.close()
    # oracle 1.0 (typed, its exit ended no session), noop 0.0, the wrong solution < 1.0
    assert_valid("terminal", n=None, require_solutions=True, probes=False, tasks=str(task))


def test_split_holds_tasks_out_for_evaluation() -> None:
    every = TerminalEnv(env_id="terminal-nl2bash")
    train = TerminalEnv(env_id="terminal-nl2bash", split="train")
    test = TerminalEnv(env_id="terminal-nl2bash", split="test")
    ids = [env.unwrapped.task_ids() for env in (every, train, test)]
    assert sorted(ids[1] + ids[2]) == sorted(ids[0]) and not set(ids[1]) & set(ids[2])
    assert 0.15 < len(ids[2]) / len(ids[0]) < 0.35
    for env in (every, train, test):
        env.close()
    with pytest.raises(InvalidArgumentError, match="split='validation'"):
        TerminalEnv(env_id="terminal-nl2bash", split="validation")
