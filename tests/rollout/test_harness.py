"""Harness episodes: an agent program of its own (stdlib Python, its own loop) plays a
sandboxed env's task through the capture proxy and the bridge, on both backends; the env's
grader scores the sandbox; the recorded samples are exactly what the policy sampled; a
program that rewrites its history gives several samples; crashes and hangs end only their
episode; the sandbox reaches the proxy and nothing else of the host."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the capture server needs the train extra")

from agentgym.core.env import SandboxAccess
from agentgym.core.episode import Episode, Submitted
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.harness import Harness
from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import SandboxLimits, SandboxSpec, open_sandboxes
from agentgym.core.task import Task, TaskList
from agentgym.core.tools import tool
from agentgym.rollout.harness import HarnessRunner, harness_by_id
from agentgym.testing import ScriptedTokens
from agentgym.toolkits import BashTools, SandboxedEnv
from agentgym.toolkits.sandboxed import episode_sandbox


class AnswerEnv(SandboxedEnv):
    """Write the word the task names into answer.txt; graded from the episode's sandbox."""

    system_prompt = "Use the bash tool. Call submit when done."
    toolsets = (BashTools,)

    def __init__(self, backend: str):
        self.backend = backend
        super().__init__(TaskList([Task("plum", "Write the word plum into answer.txt."),
                                   Task("fig", "Write the word fig into answer.txt.")]),
                         max_turns=5)

    async def sandbox_spec(self, task: Task) -> SandboxSpec:
        return SandboxSpec(limits=SandboxLimits(timeout_s=60))

    async def grade(self, episode: Episode) -> RewardResult:
        box = episode_sandbox(episode)
        ran = await box.exec("cat answer.txt 2>/dev/null", timeout=10)
        return RewardResult(float(ran.output.strip() == episode.task.id),
                            {"answer": ran.output.strip()})

    @tool
    def submit(self) -> str:
        """Submit. This ends the episode."""
        raise Submitted(None, "Submitted.")


#: A tiny agent of its own: asks the model, runs the first line of each answer as a shell
#: command, sends back the output; stops at "DONE". With KEEP=1 it keeps only the system
#: and instruction messages and the latest exchange (it rewrites its history).
AGENT = r'''
import json, os, subprocess, sys, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
keep = os.environ.get("KEEP")
messages = [{"role": "system", "content": "Answer with one shell command a turn."},
            {"role": "user", "content": open(os.environ["AGENTGYM_INSTRUCTION_FILE"]).read()}]
for turn in range(6):
    request = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps({"model": os.environ["AGENTGYM_MODEL"], "messages": messages,
                         "max_tokens": 64}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    answer = json.load(urllib.request.urlopen(request, timeout=30))
    text = answer["choices"][0]["message"]["content"]
    if text.strip() == "DONE":
        break
    ran = subprocess.run(text.strip().splitlines()[0], shell=True, capture_output=True, text=True)
    exchange = [{"role": "assistant", "content": text},
                {"role": "user", "content": "turn %d exit %d: %s" % (turn + 1, ran.returncode,
                                                                    ran.stdout)}]
    messages = (messages[:2] if keep and turn >= 1 else messages) + exchange
print("agent ran", turn + 1, "turns")
'''


def agent_harness(**env: str) -> Harness:
    return Harness(id="test-agent", command=f"python3 - <<'AGENT_EOF'\n{AGENT}\nAGENT_EOF",
                   time_limit_s=60, env=env)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def play(harness: Harness, policy: ScriptedTokens, env, task_id: str = "plum"):
    async def go():
        try:
            return await runner.play(env, task_id, env_id="answer")
        finally:
            await env.aclose()

    with HarnessRunner(harness, policy) as runner:
        return asyncio.run(go())


def masked_in(ids: list[int], mask: list[int]) -> list[int]:
    return [t for t, m in zip(ids, mask, strict=True) if m]


def test_a_harness_that_does_the_task_is_paid_and_recorded_token_for_token(
        backend: str, tokenizer) -> None:
    policy = ScriptedTokens(tokenizer, ["echo plum > answer.txt", "cat answer.txt", "DONE"],
                            version=3)
    record = play(agent_harness(), policy, AnswerEnv(backend))
    assert record.error is None and record.finish_reason == "harness_exit"
    assert record.reward == 1.0 and record.metrics["answer"] == "plum"
    assert record.metrics["harness"]["exit_code"] == 0
    assert "agent ran 3 turns" in record.metrics["harness"]["output_tail"]
    assert record.metrics["capture/calls"] == 3 and record.metrics["capture/samples"] == 1
    assert record.earlier_samples == [] and record.turns == 3
    # One sample: its mask-1 tokens are exactly what was sampled, with their log-probs and
    # versions; the prompt's tokens and the tool outputs are masked.
    assert masked_in(record.completion_ids, record.loss_mask) == policy.sampled
    assert record.completion_ids[:len(policy.generations[0].token_ids)] == \
        policy.generations[0].token_ids
    assert [lp for lp, m in zip(record.logprobs, record.loss_mask, strict=True) if m] == \
        [-0.5] * len(policy.sampled)
    assert set(masked_in(record.versions, record.loss_mask)) == {3}
    assert record.messages[-1] == {"role": "assistant", "content": "DONE"}
    assert record.policy == "harness:test-agent"


def test_a_harness_that_does_nothing_useful_gets_nothing(backend: str, tokenizer) -> None:
    policy = ScriptedTokens(tokenizer, ["ls", "DONE"])
    record = play(agent_harness(), policy, AnswerEnv(backend))
    assert record.finish_reason == "harness_exit" and record.reward == 0.0
    assert masked_in(record.completion_ids, record.loss_mask) == policy.sampled


def test_a_harness_rewriting_its_history_gives_several_samples_none_masking_unsampled(
        tokenizer) -> None:
    policy = ScriptedTokens(tokenizer, ["echo one", "echo two", "echo three",
                                        "echo fig > answer.txt", "DONE"])
    record = play(agent_harness(KEEP="1"), policy, AnswerEnv("local"), "fig")
    assert record.reward == 1.0
    samples = [*record.earlier_samples,
               {"token_ids": record.prompt_ids + record.completion_ids,
                "loss_mask": [0] * len(record.prompt_ids) + record.loss_mask}]
    assert len(samples) == record.metrics["capture/samples"] > 1
    assert record.metrics["capture/rewritten"] == len(samples) - 1
    # Each sample's mask covers sampled tokens only, and together every sampled token once.
    covered = [masked_in(s["token_ids"], s["loss_mask"]) for s in samples]
    assert [t for c in covered for t in c] == policy.sampled


def test_a_crashing_or_hanging_harness_ends_its_episode_with_a_reason(tokenizer) -> None:
    crash = Harness(id="crash", command="echo about to fail; exit 3", time_limit_s=30)
    record = play(crash, ScriptedTokens(tokenizer, ["DONE"]), AnswerEnv("local"))
    assert record.finish_reason == "harness_error" and record.reward == 0.0
    assert "status 3" in record.error and "about to fail" in record.error
    hang = Harness(id="hang", command="sleep 600", time_limit_s=1.5)
    before = len(open_sandboxes.live)
    record = play(hang, ScriptedTokens(tokenizer, ["DONE"]), AnswerEnv("local"))
    assert record.finish_reason == "harness_timeout" and record.reward == 0.0
    assert record.metrics["harness"]["timed_out"] and record.timings["generate"] < 30
    assert len(open_sandboxes.live) == before  # its sandbox was closed like any other


def test_the_sandbox_reaches_the_proxy_and_nothing_else_of_the_host(backend: str,
                                                                      tokenizer) -> None:
    # A server on the host's loopback that would answer anyone who reached it.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    reached: list[bool] = []

    def accept() -> None:
        try:
            connection, _ = listener.accept()
            reached.append(True)
            connection.close()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    probe = f"""python3 - <<'PROBE_EOF'
import json, os, socket, urllib.request
out = {{}}
for name, address in [("host_loopback", ("127.0.0.1", {port})), ("outside", ("1.1.1.1", 80))]:
    try:
        socket.create_connection(address, timeout=3).close()
        out[name] = "reached"
    except OSError as e:
        out[name] = type(e).__name__
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/models",
                                 headers={{"Authorization": "Bearer x"}})
out["proxy"] = json.load(urllib.request.urlopen(request, timeout=10))["data"][0]["id"]
open("answer.txt", "w").write(json.dumps(out))
print(json.dumps(out))
PROBE_EOF"""
    try:
        record = play(Harness(id="probe", command=probe, time_limit_s=60),
                      ScriptedTokens(tokenizer, ["DONE"]), AnswerEnv(backend))
    finally:
        listener.close()
    out = json.loads(record.metrics["answer"])
    assert out["proxy"] == "agentgym", record.metrics["harness"]
    assert out["host_loopback"] != "reached" and out["outside"] != "reached"
    assert not reached


def test_an_env_without_sandboxes_is_refused_with_the_fix(tokenizer) -> None:
    import agentgym

    env = agentgym.make("calculator")
    assert isinstance(env.unwrapped, SandboxAccess)
    task_id = env.unwrapped.task_ids()[0]
    record = play(agent_harness(), ScriptedTokens(tokenizer, ["DONE"]), env, task_id)
    assert record.finish_reason == "error" and "have no sandbox" in record.error


def test_a_harness_is_checked_when_made() -> None:
    with pytest.raises(InvalidArgumentError, match="one string"):
        Harness(id="x", command="run", requirements="mini-swe-agent")
    with pytest.raises(InvalidArgumentError, match="time_limit_s"):
        Harness(id="x", command="run", time_limit_s=0)
    with pytest.raises(InvalidArgumentError, match="exactly one of command"):
        Harness(id="x", command="run", run=lambda session: None)
    # A host harness whose package is missing says what to install before any episode.
    missing = Harness(id="x", run="agentgym_no_such_package.agent:run",
                      requirements=("agentgym-no-such-package",))
    with pytest.raises(InvalidArgumentError, match="pip install agentgym-no-such-package"):
        HarnessRunner(missing, ScriptedTokens(None, [""])).start()


def test_an_openai_agents_sdk_agent_plays_any_env_through_its_tools(tokenizer) -> None:
    """The openai-agents host harness on the calculator (no sandbox): the SDK's tool calls
    run through the env, the model's reference answer is paid, its calls are recorded."""
    pytest.importorskip("agents", reason="the openai-agents harness: pip install agentgym[agents]")
    import agentgym

    env = agentgym.make("calculator")
    task_id = env.unwrapped.task_ids()[0]
    env.reset(options={"task_id": task_id})
    solution = list(env.unwrapped.task.solution)  # the reference turns, hermes tool calls
    policy = ScriptedTokens(tokenizer, solution)
    record = play(harness_by_id("openai-agents"), policy, env, task_id)
    assert record.error is None and record.finish_reason == "harness_exit", record.error
    assert record.reward == 1.0, record.metrics
    assert record.metrics["harness"]["env_finish_reason"] == "submitted"
    assert record.metrics["harness"]["tool_calls"] == len(solution)
    assert record.metrics["capture/calls"] == len(solution)  # the SDK stopped at the submit
    assert masked_in(record.completion_ids, record.loss_mask)[-len(
        policy.generations[-1].token_ids):] == policy.generations[-1].token_ids


def test_the_built_in_harnesses_stay_listed_after_a_host_harness_is_loaded() -> None:
    """Loading a host harness imports its module; the plugin's hook must still work after
    (a module named like the plugin's builder function once replaced it)."""
    from agentgym.core.plugins import plugin_host
    from agentgym.plugins import harnesses

    pytest.importorskip("agents", reason="the openai-agents harness: pip install agentgym[agents]")
    harness_by_id("openai-agents").load()
    assert {h.id for h in harnesses.agentgym_harnesses()} >= {"mini-swe-agent", "openai-agents"}
    assert "openai-agents" in plugin_host().entries("harnesses")
