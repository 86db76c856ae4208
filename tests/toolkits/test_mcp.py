"""MCP tools in: real servers from PyPI (mcp-server-time, mcp-server-git) and servers written
here with the SDK, run in local sandboxes; their tools, results and errors as the agent
sees them; servers that fail to start, die, answer garbage or hang end the episode with a
reason (or become a tool error) and never hang it; the mcp-git and mcp-time envs validate.

Needs the ``mcp`` extra, the local sandbox, and the package index the first time (the
servers are installed into cached environments)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import ScriptedPolicy
from agentgym.core.task import Task, TaskList
from agentgym.plugins.mcp.env import TIME_SERVER
from agentgym.rollout.loop import play_episode
from agentgym.toolkits.mcp import MCPServer
from agentgym.toolkits.sandboxed import SandboxedEnv
from tests.conftest import backend_missing

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")


@pytest.fixture(autouse=True)
def local() -> None:
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"the MCP servers run in local sandboxes, unavailable here: {missing}")


def turn(name: str, **arguments) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


# ---- the server's description --------------------------------------------------------------


def test_a_server_needs_one_way_to_reach_it_and_a_loopback_url():
    with pytest.raises(InvalidArgumentError, match="exactly one of command"):
        MCPServer("x")
    with pytest.raises(InvalidArgumentError, match="not on the loopback"):
        MCPServer("x", url="http://example.com/mcp")
    assert MCPServer("x", url="http://example.com/mcp", allow_remote=True).url
    assert MCPServer("x", url="http://127.0.0.1:9/mcp").url
    with pytest.raises(InvalidArgumentError, match="must start with a letter"):
        MCPServer("x y", command=["true"])
    with pytest.raises(InvalidArgumentError, match=r"unknown field.*colour"):
        MCPServer.from_dict({"name": "x", "command": ["true"], "colour": "red"})
    assert MCPServer.from_dict({"name": "x", "command": "python3 -m s"}).command == (
        "python3", "-m", "s")


# ---- a throw-away env whose sandbox holds server scripts ------------------------------------

#: Servers written with the SDK (run by the python of mcp-server-time's environment).
SERVERS = {
    "tools.py": """
        import os, sys, time
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from pydantic import BaseModel
        server = MCPServer("tools")

        @server.tool()
        def shout(text: str) -> str:
            '''Upper-case the text.'''
            return text.upper() * (200_000 if text == "long" else 1)

        @server.tool()
        def fail(why: str) -> str:
            '''Always fails.'''
            raise ToolError(why)

        @server.tool()
        def sleep(seconds: float) -> str:
            '''Sleep.'''
            time.sleep(seconds)
            return "slept"

        @server.tool()
        def die() -> str:
            '''Exit the server.'''
            # At once, as a crash does (sys.exit here ends the tool's worker thread only;
            # stdin's reader thread then keeps the process, silent, until a timeout).
            os._exit(3)

        class Point(BaseModel):
            x: int
            y: int

        @server.tool()
        def taxicab(point: Point) -> str:
            '''Distance from the origin.'''
            return str(abs(point.x) + abs(point.y))

        server.run()
    """,
    "garbage.py": """
        import sys
        sys.stdin.readline()
        print("this is not JSON-RPC", flush=True)
        sys.stdin.read()
    """,
    "crash.py": """
        import sys
        print("cannot start: no database", file=sys.stderr)
        sys.exit(2)
    """,
}


class ScriptEnv(SandboxedEnv):
    system_prompt = "Use the tools."

    def __init__(self, folder: Path, servers: list[MCPServer], **kwargs):
        super().__init__(TaskList([Task(id="t", prompt="go", metadata={"answer": "x"})]),
                         turn_timeout_s=kwargs.pop("turn_timeout_s", 60), **kwargs)
        self.folder, self.mcp_servers = folder, servers

    async def sandbox_spec(self, task):
        from agentgym.core.sandbox import SandboxSpec

        return SandboxSpec(template=str(self.folder))

    async def grade(self, episode):
        from agentgym.core.reward import RewardResult

        return RewardResult(0.0)


def script_server(name: str, script: str, **options) -> MCPServer:
    return MCPServer(name, command=["{env}/bin/python", f"/workspace/{script}"],
                     requirements=TIME_SERVER.requirements, **options)


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("servers")
    for name, text in SERVERS.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def play(env, *turns):
    """One episode of ``turns`` through the rollout loop (as training plays it), on the
    env's own event loop (where its sandboxes' processes live)."""
    policy = ScriptedPolicy(list(turns), repeat_last=True)
    return env.run_coroutine(play_episode(env, policy, "t"))


# ---- real servers from PyPI in a local sandbox ---------------------------------------------


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_mcp_server_time_runs_in_the_sandbox_and_its_tools_are_the_agents():
    import agentgym

    env = agentgym.make("mcp-time", num_tasks=2)
    try:
        schemas = {t.name: t.schema()["function"]["parameters"] for t in env.tools()}
        assert {"get_current_time", "convert_time", "submit"} <= set(schemas)
        assert schemas["convert_time"]["required"] == ["source_timezone", "time",
                                                       "target_timezone"]
        _, info = env.reset(seed=0, options={"task_id": "time-0000"})
        assert [t["function"]["name"] for t in info["tools"]][:2] == ["get_current_time",
                                                                      "convert_time"]
        new, *_ = env.step(turn("convert_time", source_timezone="Asia/Tokyo", time="09:00",
                                target_timezone="Asia/Kolkata"))
        assert '"datetime"' in new[0]["content"] and "05:30:00+05:30" in new[0]["content"]
        # The server's own error and a call its schema refuses: messages, the episode goes on.
        new, _, done, _, step = env.step(turn("convert_time", source_timezone="Nowhere",
                                              time="09:00", target_timezone="UTC"))
        assert step["tool_errors"] == 1 and "Invalid timezone" in new[0]["content"]
        assert not done
        new, _, done, _, step = env.step(turn("convert_time", time="09:00"))
        assert step["tool_errors"] == 1 and "missing required" in new[0]["content"]
        # It runs inside the sandbox, as the sandbox's user.
        box = env.episode.resources["sandbox"]
        ps = env.run_coroutine(box.exec("ps -eo user,args | grep [m]cp_server_time"))
        assert "/opt/agentgym-mcp/time/bin/python" in ps.output
    finally:
        env.close()


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_a_terminal_env_takes_mcp_servers_as_a_kwarg(tmp_path):
    """Any terminal task with a server's tools besides its shell, declared in the kwargs
    (the server sees the episode's own workspace); such an env's tasks are not Harbor
    folders, and the export says why."""
    import agentgym
    from agentgym.interchange.harbor import export_tasks

    env = agentgym.make("terminal", mcp_servers=[
        {"name": "time", "command": list(TIME_SERVER.command),
         "requirements": list(TIME_SERVER.requirements)}])
    try:
        task_id = env.unwrapped.task_ids()[0]
        _, info = env.reset(options={"task_id": task_id})
        names = [t["function"]["name"] for t in info["tools"]]
        assert {"bash", "get_current_time", "convert_time", "submit"} <= set(names)
        new, *_ = env.step(turn("convert_time", source_timezone="UTC", time="12:00",
                                target_timezone="Asia/Kolkata"))
        assert "17:30:00+05:30" in new[0]["content"]
        new, *_ = env.step(turn("bash", command="echo shell still here"))
        assert "shell still here" in new[0]["content"]
    finally:
        env.close()
    report = export_tasks("terminal", tmp_path / "out", env_kwargs={"mcp_servers": [
        {"name": "time", "command": list(TIME_SERVER.command)}]}, n=1)
    assert not report.written and "MCP servers' tools (time)" in str(report.refused)


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_mcp_server_git_edits_the_episodes_repository():
    import agentgym

    env = agentgym.make("mcp-git", num_tasks=3)
    try:
        env.reset(seed=0, options={"task_id": "git-branch-0001"})
        task = env.episode.task
        branch = task.metadata["expect"]["branch"]
        new, *_ = env.step(turn("git_create_branch", repo_path="/workspace/repo",
                                branch_name=branch))
        assert "Created branch" in new[0]["content"], new
        new, *_ = env.step(turn("git_status", repo_path="/etc"))
        assert "outside the allowed repository" in new[0]["content"]
        env.step(turn("git_checkout", repo_path="/workspace/repo", branch_name=branch))
        _, reward, done, _, _ = env.step(turn("submit"))
        assert done and reward == 1.0
    finally:
        env.close()


# ---- failures end the episode with a reason, or are the agent's to see ----------------------


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_results_and_errors_of_a_server_written_with_the_sdk(scripts):
    env = ScriptEnv(scripts, [script_server("tools", "tools.py", max_output_chars=1000)])
    try:
        tools = {t.name: t.schema()["function"]["parameters"] for t in env.tools()}
        assert list(tools) == ["shout", "fail", "sleep", "die", "taxicab"]
        # A nested argument's schema keeps what its "$ref" points to.
        ref = tools["taxicab"]["properties"]["point"]["$ref"].split("/")[-1]
        assert set(tools["taxicab"]["$defs"][ref]["properties"]) == {"x", "y"}
        env.reset(seed=0, options={"task_id": "t"})
        new, *_ = env.step(turn("taxicab", point={"x": 3, "y": -4}))
        assert new[0]["content"] == "7"
        new, *_ = env.step(turn("shout", text="hi"))
        assert new[0]["content"] == "HI"
        new, *_ = env.step(turn("shout", text="long"))
        assert len(new[0]["content"]) < 1100 and "characters cut" in new[0]["content"]
        new, _, _, _, step = env.step(turn("fail", why="the disk is full"))
        assert step["tool_errors"] == 1 and "the disk is full" in new[0]["content"]
    finally:
        env.close()


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_a_call_past_the_turns_budget_is_stopped_and_the_episode_goes_on(scripts):
    env = ScriptEnv(scripts, [script_server("tools", "tools.py")], turn_timeout_s=3)
    try:
        env.reset(seed=0, options={"task_id": "t"})
        new, _, done, _, step = env.step(turn("sleep", seconds=60))
        assert step["tool_errors"] == 1 and not done
        assert "stopped" in new[0]["content"] or "too long" in new[0]["content"]
        new, *_ = env.step(turn("shout", text="still here"))
        assert new[0]["content"] == "STILL HERE"
    finally:
        env.close()


@pytest.mark.slow  # servers start in sandboxes: 5-15 s
def test_a_server_that_exits_mid_episode_ends_it_with_a_reason(scripts):
    env = ScriptEnv(scripts, [script_server("tools", "tools.py")])
    try:
        result = play(env, turn("shout", text="a"), turn("die"), turn("shout", text="b"))
    finally:
        env.close()
    assert result.finish_reason == "sandbox_error", (result.finish_reason, result.error)
    # Seen on the call it died in, as the connection closed (not after a timeout).
    assert "MCP server 'tools' closed its connection while calling die" in result.error


@pytest.mark.slow
@pytest.mark.parametrize(("script", "expected"), [
    ("crash.py", "cannot start: no database"),
    ("garbage.py", "MCP server 'bad'"),
])
def test_a_server_that_cannot_start_or_speaks_garbage_ends_the_episode(scripts, script,
                                                                       expected):
    good = script_server("tools", "tools.py")
    env = ScriptEnv(scripts, [good])

    async def scenario():
        await env.amcp_toolsets()  # listed with the good server; the episode adds a broken one
        # A garbage reply is ignored by the client, so the start bound is what ends it:
        # short, as a bound that only has to outlast a sandbox's start.
        env.mcp_servers = [good, script_server("bad", script, start_timeout_s=8)]
        return await play_episode(env, ScriptedPolicy([turn("shout", text="a")],
                                                       repeat_last=True), "t")

    try:
        result = env.run_coroutine(scenario())
    finally:
        env.close()
    assert result.finish_reason == "sandbox_error", (result.finish_reason, result.error)
    assert expected in (result.error or ""), result.error


# ---- the envs validate ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
@pytest.mark.parametrize(("env_id", "n"), [("mcp-time", 2), ("mcp-git", 3)])
def test_the_mcp_envs_are_valid_with_their_probes(env_id, n, backend):
    """oracle 1.0, noop 0.0, the known-wrong solution < 1.0, and every probe that applies
    (mcp-time: answer stuffing) unpaid, on both backends (the socket folder and the
    servers' environment are bind mounts on docker too); mcp-git's first three tasks are
    one of each kind."""
    from agentgym.testing import assert_valid

    missing = backend_missing(backend)
    if missing:
        pytest.skip(f"the {backend} backend is unavailable: {missing}")
    report = assert_valid(env_id, n=n, probes=True, backend=backend)
    assert report.ok and len(report.task_ids) == n
    if env_id == "mcp-time":
        stuffed = report.probe_counts()["answer.stuff"]
        assert (stuffed["played"], stuffed["paid"]) == (n, 0)
