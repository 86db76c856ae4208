"""OpenEnv both ways: agentgym envs served by ``agentgym openenv serve`` (openenv-core's own
server) and played by openenv-core's own client, and the ``openenv`` env playing such a
server through the rollout loop, including servers that hang or die."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openenv.core", reason="the OpenEnv tests need openenv-core"
                    " (pip install -e '.[openenv]')")

from click.testing import CliRunner
from openenv.core import GenericEnvClient
from openenv.core.env_client import EnvClient

import agentgym
from agentgym.cli import main
from agentgym.core.env import AgentEnv
from agentgym.core.episode import Episode, Submitted
from agentgym.core.errors import InvalidArgumentError, MissingResourceError, UnknownIdError
from agentgym.core.hookspecs import hookimpl
from agentgym.core.plugins import set_plugin_host
from agentgym.core.policies import NoopPolicy, OraclePolicy, ScriptedPolicy
from agentgym.core.registry import EnvRegistration
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import SandboxError
from agentgym.core.serving import LocalServer
from agentgym.core.task import SolutionTurn, Task, TaskList
from agentgym.core.tools import tool
from agentgym.interchange.openenv import OpenEnvServerError, openenv_app
from agentgym.rollout.evaluate import evaluate
from agentgym.rollout.loop import play_episode
from agentgym.testing import check_env
from tests.conftest import backend_missing


@pytest.fixture(scope="module")
def calculator() -> Iterator[str]:
    """``calculator`` served in this process; its URL."""
    with LocalServer(openenv_app("calculator", reveal_solutions=True)) as server:
        yield server.url


def turn_action(turn: Any) -> dict[str, Any]:
    """A policy's turn as the OpenEnv action: text, or an assistant message."""
    return {"text": turn} if isinstance(turn, str) else {"message": turn}


async def play(client: EnvClient, policy: Any, task_id: str | None = None,
               seed: int | None = None) -> tuple[float, dict[str, Any]]:
    """One episode through OpenEnv's client: ``policy`` writes each turn from the
    conversation and the task the reset observation carries; the final reward and
    observation."""
    result = await client.reset(seed=seed, **({} if task_id is None else {"task_id": task_id}))
    observation = result.observation
    task = Task.from_dict(observation["task"])
    conversation = list(observation["messages"])
    while not result.done:
        result = await client.step(turn_action(policy.act(conversation, task)))
        observation = result.observation
        conversation += [observation["info"]["assistant_message"], *observation["messages"]]
    return result.reward, observation


@pytest.mark.parametrize(("policy", "expected"), [(OraclePolicy(), 1.0), (NoopPolicy(), 0.0)])
def test_openenv_client_plays_calculator(calculator, policy, expected):
    async def run() -> tuple[float, dict[str, Any], dict[str, Any]]:
        async with GenericEnvClient(base_url=calculator) as client:
            reward, last = await play(client, policy, seed=5)
            return reward, last, await client.state()

    reward, last, state = asyncio.run(run())
    assert reward == expected
    assert last["terminated"] is (expected == 1.0)  # the oracle submits; noop runs out
    assert last["finish_reason"] == ("submitted" if expected else "max_turns")
    assert last["tools"] and last["tools"][0]["type"] == "function"
    assert state["env_id"] == "calculator" and state["done"] is True
    assert state["task_id"] == last["task_id"] and state["step_count"] == state["turn"]


def test_openenv_client_plays_a_terminal_task():
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"the terminal env needs the local sandbox: {missing}")

    async def run() -> list[float]:
        async with GenericEnvClient(base_url=server.url) as client:
            return [(await play(client, policy, task_id="log-top-ips"))[0]
                    for policy in (OraclePolicy(), NoopPolicy())]

    with LocalServer(openenv_app("terminal", reveal_solutions=True)) as server:
        assert asyncio.run(run()) == [1.0, 0.0]


def test_sessions_run_at_once_each_with_its_env_up_to_the_limit():
    async def run(url: str) -> None:
        first, second = GenericEnvClient(base_url=url), GenericEnvClient(base_url=url)
        async with first, second:
            # Interleaved: each session keeps its own env and episode.
            a = await first.reset(task_id="calculator-train-1")
            b = await second.reset(task_id="calculator-train-2")
            assert a.observation["messages"] != b.observation["messages"]
            plays = await asyncio.gather(play(first, OraclePolicy(), "calculator-train-3"),
                                         play(second, OraclePolicy(), "calculator-train-4"))
            assert [reward for reward, _ in plays] == [1.0, 1.0]
            assert [(await c.state())["task_id"] for c in (first, second)] == [
                "calculator-train-3", "calculator-train-4"]
            # OpenEnv's server refuses a third session as it opens; its own client may see
            # only the closed connection, the openenv env reads the refusal.
            env = agentgym.make("openenv", url=url).unwrapped
            try:
                with pytest.raises(OpenEnvServerError, match=r"CAPACITY_REACHED.*--max-sessions"):
                    await env.areset()
            finally:
                await env.aclose()
        # Closed sessions free their places.
        async with GenericEnvClient(base_url=url) as fourth:
            assert (await play(fourth, OraclePolicy(), "calculator-train-5"))[0] == 1.0

    with LocalServer(openenv_app("calculator", max_sessions=2, reveal_solutions=True)) as server:
        asyncio.run(run(server.url))


def test_openenv_validates_the_running_server(calculator):
    from openenv.cli._validation import validate_running_environment

    report = validate_running_environment(calculator)
    assert report["passed"], [c for c in report["criteria"] if not c["passed"]]
    assert report["mode"] == "production"  # sessions only: no stateless /reset, /step


def test_bad_requests_get_errors_that_say_why(calculator):
    async def run() -> None:
        async with GenericEnvClient(base_url=calculator) as client:
            with pytest.raises(RuntimeError, match="step before reset"):
                await client.step({"text": "hello"})
            with pytest.raises(RuntimeError, match="Unknown task 'calculator-nope'"):
                await client.reset(task_id="calculator-nope")
            with pytest.raises(RuntimeError, match="reset got tasks"):
                await client.reset(tasks=3)
            await client.reset(seed=0)
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                await client.step({"text": "a", "end": "b"})
            done = await client.step({"end": "wall_time"})  # ended from outside, graded
            assert (done.done, done.reward) == (True, 0.0)
            assert done.observation["truncated"] and done.observation["finish_reason"] == (
                "wall_time")
            with pytest.raises(RuntimeError, match=r"already ended \(wall_time\)"):
                await client.step({"text": "hello"})

    asyncio.run(run())


# ---- the openenv env ------------------------------------------------------------------------


def test_the_openenv_env_passes_check_env(calculator):
    check_env(agentgym.make("openenv", url=calculator))


def test_the_openenv_env_scores_oracle_1_and_noop_0(calculator):
    for policy, expected in ((OraclePolicy(), 1.0), (NoopPolicy(), 0.0)):
        report = asyncio.run(evaluate("openenv", policy, 3, env_kwargs={"url": calculator}))
        assert [t.reward for t in report.trajectories] == [expected] * 3
        assert [t.task_id for t in report.trajectories] == [
            f"calculator-train-{i}" for i in range(3)]
        assert all(t.error is None for t in report.trajectories)


def test_the_openenv_env_keeps_deferred_grading_and_outside_ends(calculator):
    env = agentgym.make("openenv", url=calculator).unwrapped
    try:
        _, info = env.reset(options={"task_id": "calculator-train-7", "defer_grading": True})
        for turn in info["task"].solution:
            _, reward, terminated, _, step_info = env.step(turn)
        assert (reward, terminated, step_info["grading_deferred"]) == (0.0, True, True)
        assert env.run_coroutine(env.agrade())[0] == 1.0
        env.reset(options={"task_id": "calculator-train-7"})
        env.run_coroutine(env.aend("context_limit"))
        reward, metrics = env.run_coroutine(env.agrade())  # the server grades it
        assert (reward, metrics["submitted"]) == (0.0, False)
    finally:
        env.close()


def test_the_openenv_env_needs_a_reachable_openenv_server(calculator):
    with pytest.raises(MissingResourceError, match="agentgym openenv serve") as no_url:
        agentgym.make("openenv")
    assert no_url.value.fix
    with pytest.raises(InvalidArgumentError, match="allow_remote=True"):
        agentgym.make("openenv", url="http://10.1.2.3:8001")
    with LocalServer(_not_found_app()) as other, pytest.raises(
            MissingResourceError, match="is not an OpenEnv environment server"):
        agentgym.make("openenv", url=other.url)
    port = other.port  # closed now: nothing listens there
    with pytest.raises(MissingResourceError, match="no OpenEnv server answers"):
        agentgym.make("openenv", url=f"http://127.0.0.1:{port}")


def _not_found_app() -> Any:
    from starlette.applications import Starlette

    return Starlette()


def test_a_server_for_an_unknown_env_or_no_sessions_is_refused_before_it_starts():
    with pytest.raises(UnknownIdError, match="Did you mean 'calculator'"):
        openenv_app("calculater")
    with pytest.raises(InvalidArgumentError, match=r"max_sessions must be .* got 0"):
        openenv_app("calculator", max_sessions=0)


def test_serving_elsewhere_than_loopback_needs_allow_remote():
    result = CliRunner().invoke(main, ["openenv", "serve", "calculator", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--allow-remote" in lines[0] and "'0.0.0.0'" in lines[0]


# ---- failures ---------------------------------------------------------------------------------


class Crashing(AgentEnv):
    """Its one tool loses the sandbox: the episode cannot go on."""

    def __init__(self, **kwargs: Any):
        task = Task("crash-0", "Call crash.", solution=[SolutionTurn([])])
        super().__init__(TaskList([task]), **kwargs)

    @tool
    def crash(self) -> str:
        """Lose the sandbox."""
        raise SandboxError("the sandbox died")

    @tool
    def finish(self) -> str:
        """Finish."""
        raise Submitted("done")

    async def grade(self, episode: Episode) -> RewardResult:
        return RewardResult(1.0)


class CrashingPlugin:
    @hookimpl
    def agentgym_envs(self) -> list:
        return [EnvRegistration("openenv-test-crashing", Crashing, "loses its sandbox")]


def test_a_failing_env_ends_the_episode_with_its_reason_on_both_sides():
    agentgym.register_plugin(CrashingPlugin(), name="openenv-test-crashing")
    call = '<tool_call>{"name": "crash", "arguments": {}}</tool_call>'
    try:
        with LocalServer(openenv_app("openenv-test-crashing", reveal_solutions=True)) as server:
            async def direct() -> Any:
                async with GenericEnvClient(base_url=server.url) as client:
                    await client.reset()
                    return await client.step({"text": call})

            failed = asyncio.run(direct())
            assert failed.done and failed.reward == 0.0
            assert failed.observation["finish_reason"] == "sandbox_error"
            assert "the sandbox died" in failed.observation["error"]

            env = agentgym.make("openenv", url=server.url).unwrapped
            try:
                played = env.run_coroutine(play_episode(env, ScriptedPolicy([call]), "crash-0"))
            finally:
                env.close()
            assert played.finish_reason == "sandbox_error"
            assert "OpenEnvServerError" in played.error and "the sandbox died" in played.error
    finally:
        set_plugin_host(None)


def test_a_server_that_stops_ends_the_episode_with_sandbox_error():
    server = LocalServer(openenv_app("calculator", reveal_solutions=True)).start()
    env = agentgym.make("openenv", url=server.url).unwrapped

    def stop_then_play(messages: Any, task: Task) -> Any:
        server.close()
        return task.solution[0]

    try:
        played = env.run_coroutine(play_episode(env, ScriptedPolicy(stop_then_play),
                                                "calculator-train-0"))
        assert (played.finish_reason, played.reward) == ("sandbox_error", 0.0)
        assert "closed the connection during the step" in played.error
    finally:
        env.close()
        server.close()


@pytest.fixture
def cli_server() -> Iterator[tuple[subprocess.Popen, str]]:
    """``agentgym openenv serve calculator`` in a process of its own; it and its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "openenv", "serve", "calculator", "--port", "0",
         "--reveal-solutions"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stdout.readline()  # printed once the port is open
        assert "over OpenEnv at http://127.0.0.1:" in line, (line, process.stderr.read()[-2000:]
                                                            if process.poll() is not None
                                                            else "")
        yield process, line.split(" at ")[1].split()[0]
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.kill()
        process.wait(timeout=30)
        process.stdout.close()
        process.stderr.close()


@pytest.mark.slow  # a server process of its own, and a timeout waited out
def test_a_hung_or_dead_server_ends_the_episode_in_bounded_time(cli_server):
    process, url = cli_server
    env = agentgym.make("openenv", url=url, timeout_s=2.0, connect_timeout_s=5.0).unwrapped
    try:
        _, info = env.reset(options={"task_id": "calculator-train-0"})
        os.kill(process.pid, signal.SIGSTOP)  # alive, listening, answering nothing
        started = time.monotonic()
        with pytest.raises(OpenEnvServerError, match=r"did not answer the step within 2 s"):
            env.step(info["task"].solution[0])
        assert time.monotonic() - started < 15
        os.kill(process.pid, signal.SIGCONT)
        # The server is back: a new episode gets a new session and plays to the end.
        oracle = env.run_coroutine(play_episode(env, OraclePolicy(), "calculator-train-1"))
        assert (oracle.reward, oracle.finish_reason) == (1.0, "submitted")

        def kill_then_play(messages: Any, task: Task) -> str:
            process.kill()
            process.wait(timeout=30)
            return task.solution[0]

        dead = env.run_coroutine(play_episode(env, ScriptedPolicy(kill_then_play),
                                              "calculator-train-2"))
        assert dead.finish_reason == "sandbox_error" and dead.reward == 0.0
        assert f"the OpenEnv server at {url}" in dead.error
        with pytest.raises(OpenEnvServerError, match="cannot be reached"):
            env.reset()
    finally:
        env.close()


def test_untransportable_turns_reach_the_agent_as_errors(calculator):
    env = agentgym.make("openenv", url=calculator).unwrapped
    try:
        env.reset(seed=0)
        new, _, terminated, _, info = env.step(b"<tool_call>{}</tool_call>")
        assert not terminated and info["tool_errors"] >= 1
        assert "got bytes" in info["errors"][0] and "got bytes" in new[0]["content"]
        deep: Any = []
        for _ in range(500):
            deep = [deep]
        new, *_, info = env.step({"role": "assistant", "tool_calls": [
            {"function": {"name": "calculator", "arguments": {"expression": deep}}}]})
        assert "nests over 100 levels" in info["errors"][0]
    finally:
        env.close()


def test_the_served_messages_are_json(calculator):
    async def run() -> Any:
        async with GenericEnvClient(base_url=calculator) as client:
            return (await client.reset(task_id="calculator-train-0")).observation

    observation = asyncio.run(run())
    assert json.loads(json.dumps(observation)) == observation
    assert observation["task"]["solution"]  # what the oracle replays, in the env's format


def test_tasks_are_shown_without_their_answers_unless_revealed():
    """Whoever connects may be the policy in training: by default neither the reset's
    observation nor the task route carries the solution or the expected answer."""
    with LocalServer(openenv_app("calculator")) as server:
        async def run() -> dict[str, Any]:
            async with GenericEnvClient(base_url=server.url) as client:
                return (await client.reset(task_id="calculator-train-2")).observation

        task = asyncio.run(run())["task"]
        with urllib.request.urlopen(f"{server.url}/agentgym/tasks/calculator-train-2") as r:
            routed = json.load(r)
    for shown in (task, routed):
        assert shown["id"] == "calculator-train-2" and "What is" in str(shown["prompt"])
        assert "solution" not in shown and shown["metadata"] == {}
    env = agentgym.make("calculator").unwrapped
    answer = env.tasks.get("calculator-train-2").metadata["answer"]
    assert str(answer) not in json.dumps(routed)
