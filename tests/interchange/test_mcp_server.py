"""MCP out: ``agentgym mcp serve`` played by the ``mcp`` SDK's own client, over streamable
HTTP and stdio; several clients and episodes at once; refusals as tool errors; an env that
breaks ends its episode and not the server."""

from __future__ import annotations

import asyncio
import re
import sys

import pytest
from click.testing import CliRunner

import agentgym
from agentgym.cli import main
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.serving import LocalServer
from tests.conftest import backend_missing

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install -e '.[mcp]'")

from mcp import Client, StdioServerParameters

from agentgym.interchange.mcp_server import EnvMCPServer


def oracle_calls(env_id: str, task_id: str, **kwargs) -> list[tuple[str, dict]]:
    """The task's reference solution as (tool, arguments) calls."""
    env = agentgym.make(env_id, **kwargs).unwrapped
    try:
        env.reset(options={"task_id": task_id})
        return [(c.name, c.arguments) for turn in env.task.solution
                for c in env.parser.parse_action(turn).tool_calls]
    finally:
        env.close()


async def play(client: Client, env_id: str, task_id: str | None = None, **kwargs) -> dict:
    started = await client.call_tool("start_task", {"task_id": task_id} if task_id else {})
    assert not started.is_error, started.content[0].text
    episode = started.structured_content
    for name, arguments in oracle_calls(env_id, episode["task_id"], **kwargs):
        result = await client.call_tool(name, {**arguments, "episode_id": episode["episode_id"]})
        assert not result.is_error, result.content[0].text
    return (await client.call_tool("get_reward", {"episode_id": episode["episode_id"]})
            ).structured_content


@pytest.fixture
def http_server():
    served = EnvMCPServer("calculator")
    with LocalServer(served.http_app(), lifespan=True) as server:
        yield served, server.url + "/mcp"


def test_the_sdk_client_plays_calculator_to_reward_one_over_http(http_server):
    served, url = http_server

    async def run() -> tuple[list[str], dict, str]:
        async with Client(url) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            status = await play(client, "calculator", "calculator-train-3")
            started = await client.call_tool("start_task", {})
            return tools, status, started.content[0].text

    tools, status, opening = asyncio.run(run())
    assert tools == ["start_task", "get_reward", "calculator", "submit"]
    assert re.fullmatch(r"e1-[0-9a-f]{8}", status.pop("episode_id"))  # numbered, unguessable
    assert status == {"task_id": "calculator-train-3", "done": True,
                      "finish_reason": "submitted", "reward": 1.0, "turns": 2}
    # The opening messages come back as text (the instruction with them).
    assert "Episode e2-" in opening and "What is" in opening
    assert next(iter(served.episodes.values())).env._closed  # an ended episode's env is released


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_several_clients_play_their_own_episodes_at_once(http_server, mode):
    """Clients of MCP's stateless protocol name their episode; clients that keep an HTTP
    session (legacy mode) may leave it out: their calls go to their own latest episode."""
    _, url = http_server

    async def one(task_id: str, answer_right: bool) -> tuple[str, dict]:
        async with Client(url, mode=mode) as client:
            started = await client.call_tool("start_task", {"task_id": task_id})
            episode = started.structured_content["episode_id"]
            named = {"episode_id": episode} if mode == "auto" else {}
            await asyncio.sleep(0.05)  # the other clients start theirs meanwhile
            calls = oracle_calls("calculator", task_id)
            for name, arguments in calls[:-1]:
                await client.call_tool(name, {**arguments, **named})
            name, arguments = calls[-1]
            if not answer_right:
                arguments = {"answer": "-1"}
            ended = await client.call_tool(name, {**arguments, **named})
            return episode, ended.structured_content

    async def run() -> list:
        return await asyncio.gather(*(one(f"calculator-train-{i}", i % 2 == 0)
                                      for i in range(4)))

    results = asyncio.run(run())
    assert len({episode for episode, _ in results}) == 4
    for i, (episode, status) in enumerate(results):
        assert status["episode_id"] == episode and status["task_id"] == f"calculator-train-{i}"
        assert status["reward"] == (1.0 if i % 2 == 0 else 0.0)


def test_a_stateless_call_without_an_episode_is_refused_when_it_is_ambiguous():
    served = EnvMCPServer("calculator")

    async def run() -> tuple:
        await served.call("start_task", {}, session=None)
        only = await served.call("calculator", {"expression": "2 * 3"}, session=None)
        await served.call("start_task", {}, session=None)
        ambiguous = await served.call("calculator", {"expression": "2 * 3"}, session=None)
        await served.aclose()
        return only, ambiguous

    only, ambiguous = asyncio.run(run())
    assert not only.is_error and only.content[0].text == "6"
    assert ambiguous.is_error and "2 episodes are running here; pass episode_id" in (
        ambiguous.content[0].text)


def test_refused_calls_are_tool_errors_that_say_what_to_do():
    served = EnvMCPServer("calculator", max_episodes=1)

    async def run() -> list[str]:
        said = []
        for name, arguments in [
            ("calculator", {"expression": "1 + 1"}),          # nothing started yet
            ("start_task", {"task_id": "calculator-train-x"}),  # no such task
            ("start_task", {"task_id": "calculator-train-1"}),
            ("start_task", {}),                                # past max_episodes
            ("nope", {}),
            ("calculator", {"episode_id": "e9", "expression": "1"}),
            ("calculator", {"expression": 3}),                 # a bad argument: the env's error
            ("submit", {"answer": "0"}),
            ("submit", {"answer": "0"}),                       # after the end
        ]:
            result = await served.call(name, arguments)
            said.append(("ERR " if result.is_error else "ok ") + result.content[0].text)
        await served.aclose()
        return said

    said = asyncio.run(run())
    assert said[0] == "ERR Error: no episode is running for you; call start_task first"
    assert said[1].startswith("ERR Error: task_id='calculator-train-x' is not a task")
    assert "did you mean" in said[1]
    assert said[2].startswith("ok Episode e1-")
    assert "--max-episodes 1" in said[3] and said[3].startswith("ERR")
    assert said[4].startswith("ERR Error: there is no tool 'nope'; the tools are: start_task")
    assert said[5].startswith("ERR Error: episode_id='e9' is not an episode")
    assert said[6].startswith("ERR") and "expression" in said[6]
    assert said[7].startswith("ok Submitted") and "reward 0" in said[7]
    assert re.match(r"ERR Error: episode e1-\w+ already ended \(submitted, reward 0.0\)",
                    said[8])


def test_an_env_that_breaks_ends_its_episode_not_the_server():
    class Broken:
        def __init__(self):
            self.env = agentgym.make("calculator").unwrapped

        def __getattr__(self, name):
            return getattr(self.env, name)

        async def astep(self, action):
            raise RuntimeError("the sandbox went away")

    made = []

    def make_env():
        made.append(Broken() if made else agentgym.make("calculator").unwrapped)
        return made[-1]

    served = EnvMCPServer("calculator", make_env=make_env)

    async def run():
        await served.call("start_task", {})
        broken = await served.call("calculator", {"expression": "1"})
        again = await served.call("start_task", {})
        return broken, again

    broken, again = asyncio.run(run())
    assert broken.is_error and "the env failed (the sandbox went away)" in broken.content[0].text
    assert broken.structured_content["finish_reason"] == "error"
    assert not again.is_error and "Episode e2-" in again.content[0].text


def test_idle_episodes_are_ended_and_released():
    served = EnvMCPServer("calculator", idle_timeout_s=60)

    async def run():
        await served.call("start_task", {})
        kept = await served.end_idle()
        first = next(iter(served.episodes.values()))
        ended = await served.end_idle(now=first.last_used + 61)
        return kept, ended, (await served.call("get_reward", {})).structured_content

    kept, ended, status = asyncio.run(run())
    first = next(iter(served.episodes))
    assert kept == [] and ended == [first]
    assert status["finish_reason"] == "idle" and status["reward"] == 0.0
    assert served.episodes[first].env._closed


def test_an_env_tool_named_like_the_servers_own_is_refused():
    from agentgym.core.tools import tool

    @tool
    def start_task() -> str:
        """Start something of the env's own."""
        return "x"

    class Clash:
        def tool_schemas(self):
            return [start_task.schema()]

        def task_ids(self):
            return ["t"]

        def close(self):
            pass

    with pytest.raises(InvalidArgumentError, match="rename the env's tool"):
        EnvMCPServer("calculator", make_env=Clash)


def test_the_sdk_client_plays_over_stdio_through_the_command():
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentgym", "mcp", "serve", "calculator", "--transport", "stdio",
              "-e", "split=test"])

    async def run() -> dict:
        async with Client(params) as client:
            return await play(client, "calculator", "calculator-test-5", split="test")

    status = asyncio.run(run())
    assert status["reward"] == 1.0 and status["task_id"] == "calculator-test-5"


def test_the_command_refuses_other_hosts_and_unknown_envs():
    runner = CliRunner()
    refused = runner.invoke(main, ["mcp", "serve", "calculator", "--host", "0.0.0.0"])
    assert refused.exit_code == 2 and "--allow-remote" in refused.output
    unknown = runner.invoke(main, ["mcp", "serve", "calculater"])
    assert unknown.exit_code == 2 and "calculator" in unknown.output


@pytest.mark.slow
def test_a_sandboxed_terminal_task_is_played_over_mcp():
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"terminal tasks run in local sandboxes, unavailable here: {missing}")
    env = agentgym.make("terminal").unwrapped
    task_id = env.task_ids()[0]
    env.close()
    served = EnvMCPServer("terminal")
    with LocalServer(served.http_app(), lifespan=True) as server:
        async def run() -> dict:
            async with Client(server.url + "/mcp") as client:
                return await play(client, "terminal", task_id)

        status = asyncio.run(run())
    assert status["reward"] == 1.0 and status["done"]


def test_starts_at_once_cannot_pass_the_limit_and_old_episodes_are_forgotten(monkeypatch):
    import agentgym.interchange.mcp_server as served_module

    served = EnvMCPServer("calculator", max_episodes=2)

    async def starts() -> list:
        return await asyncio.gather(*(served.call("start_task", {}, session=None)
                                      for _ in range(3)))

    results = asyncio.run(starts())
    assert sorted(r.is_error for r in results) == [False, False, True]
    assert "--max-episodes 2" in next(r for r in results if r.is_error).content[0].text
    asyncio.run(served.aclose())

    monkeypatch.setattr(served_module, "KEPT_ENDED", 2)

    async def play_four() -> list[str]:
        for _ in range(4):
            await served.call("start_task", {})
            await served.call("submit", {"answer": "0"})
        return list(served.episodes)

    oldest = next(iter(served.episodes))
    kept = asyncio.run(play_four())
    # the two newest ended ones (e1 and e2 ended at aclose)
    assert [k.split("-")[0] for k in kept] == ["e5", "e6"]
    said = asyncio.run(served.call("get_reward", {"episode_id": oldest}))
    assert said.is_error and "is not an episode" in said.content[0].text
