"""``agentgym serve``: a token policy behind an OpenAI-compatible API, answering the
``openai`` client (tool calls, token ids, log-probs) and the ``openai:`` policy."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the engine needs the train extra")
openai = pytest.importorskip("openai", reason="the openai client is a dev dependency")

from agentgym.core.policies import Generation, Sampling, TokenPolicy  # noqa: E402
from agentgym.core.serving import LocalServer  # noqa: E402
from agentgym.rollout.engine import Engine  # noqa: E402
from agentgym.rollout.evaluate import rollout  # noqa: E402
from agentgym.rollout.loop import RolloutConfig  # noqa: E402
from agentgym.rollout.policies.openai import OpenAIPolicy  # noqa: E402
from agentgym.rollout.serve import openai_app  # noqa: E402

CALCULATE = {"type": "function", "function": {
    "name": "calculate", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}


class Scripted(TokenPolicy):
    """Answers every prompt with the tokens of ``text`` and the end-of-turn token."""

    def __init__(self, tokenizer, text: str):
        self.tokenizer, self.text = tokenizer, text
        self.prompts: list[list[int]] = []

    async def generate(self, prompt_ids, sampling: Sampling) -> Generation:
        self.prompts.append(list(prompt_ids))
        ids = self.tokenizer.encode(self.text, add_special_tokens=False)
        ids = [*ids[:sampling.max_tokens - 1], self.tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop")


def assert_computes(choice) -> None:
    """``choice`` says "Let me compute." and calls calculate(37 * 4)."""
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me compute."
    (tool_call,) = choice.message.tool_calls
    assert tool_call.function.name == "calculate"
    assert json.loads(tool_call.function.arguments) == {"expression": "37 * 4"}


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path) -> Engine:
    engine = Engine(str(tiny_model_dir), slots=8, max_len=1024)
    yield engine
    engine.close()


def test_the_openai_client_gets_tool_calls_token_ids_and_logprobs(engine: Engine) -> None:
    call = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "37 * 4"}}\n</tool_call>'
    policy = Scripted(engine.tokenizer, "Let me compute.\n" + call)
    with LocalServer(openai_app(policy, "scripted")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        assert [m.id for m in client.models.list().data] == ["scripted"]
        answer = client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "What is 37 * 4?"}],
            tools=[CALCULATE], max_tokens=64, temperature=0, logprobs=True,
            extra_body={"return_token_ids": True})
    choice = answer.choices[0]
    assert_computes(choice)
    extra = choice.model_extra
    assert extra["token_ids"][-1] == engine.tokenizer.eos_token_id
    assert extra["prompt_token_ids"] == policy.prompts[0]
    assert "<tools>" in engine.tokenizer.decode(policy.prompts[0])  # the tools were rendered
    assert len(choice.logprobs.content) == len(extra["token_ids"])
    assert answer.usage.completion_tokens == len(extra["token_ids"])


@pytest.mark.parametrize("parser,text", [
    ("llama3-json", 'Let me compute.\n<|python_tag|>{"name": "calculate", "parameters":'
                    ' {"expression": "37 * 4"}}'),
    ("mistral", 'Let me compute.[TOOL_CALLS][{"name": "calculate", "arguments":'
                ' {"expression": "37 * 4"}}]'),
    ("mistral", 'Let me compute.[TOOL_CALLS]calculate[ARGS]{"expression": "37 * 4"}'),
])
def test_other_models_tool_call_formats(engine: Engine, parser: str, text: str) -> None:
    """A Llama 3 or Mistral model's calls, in its own format, reach the client as
    tool_calls when the server is told that format (``--tool-parser``)."""
    with LocalServer(openai_app(Scripted(engine.tokenizer, text), "scripted",
                                tool_parser=parser)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        answer = client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "What is 37 * 4?"}],
            tools=[CALCULATE], max_tokens=64)
    choice = answer.choices[0]
    assert_computes(choice)
    if parser == "mistral":  # the only ids Mistral's chat templates take back
        assert re.fullmatch(r"[A-Za-z0-9]{9}", choice.message.tool_calls[0].id)


def test_streaming_clients_get_the_same_answer_in_chunks(engine: Engine) -> None:
    """Harnesses that stream: the openai client's streams of a chat completion (content,
    tool call, finish reason, usage) and of a text completion add up to the answer."""
    call = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "37 * 4"}}\n</tool_call>'
    policy = Scripted(engine.tokenizer, "Let me compute.\n" + call)
    with LocalServer(openai_app(policy, "scripted")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        chunks = list(client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "What is 37 * 4?"}],
            tools=[CALCULATE], max_tokens=64, stream=True,
            stream_options={"include_usage": True}, extra_body={"return_token_ids": True}))
        text = list(client.completions.create(model="scripted", prompt=[5, 6, 7],
                                              max_tokens=64, stream=True))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert content == "Let me compute."
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [
        ("calculate", {"expression": "37 * 4"})]
    assert finish[-1] == "tool_calls" and not any(finish[:-1])
    assert chunks[0].choices[0].model_extra["prompt_token_ids"] == policy.prompts[0]
    assert chunks[-1].usage.completion_tokens == len(chunks[0].choices[0].model_extra["token_ids"])
    assert "".join(c.choices[0].text for c in text) == "Let me compute.\n" + call
    assert text[-1].choices[0].finish_reason == "stop"


def test_a_history_with_tool_calls_renders_as_the_rollout_renders_it(engine: Engine) -> None:
    policy = Scripted(engine.tokenizer, "148")
    history = [{"role": "user", "content": "What is 37 * 4?"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {
                       "name": "calculate", "arguments": '{"expression": "37 * 4"}'}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "148"}]
    with LocalServer(openai_app(policy, "scripted")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        answer = client.chat.completions.create(model="scripted", messages=history,
                                                tools=[CALCULATE], max_tokens=16)
    assert answer.choices[0].message.content == "148"
    assert answer.choices[0].finish_reason == "stop"
    expected = engine.tokenizer.apply_chat_template(
        [history[0], {**history[1], "tool_calls": [{**history[1]["tool_calls"][0], "function": {
            "name": "calculate", "arguments": {"expression": "37 * 4"}}}]}, history[2]],
        tools=[CALCULATE], add_generation_prompt=True, tokenize=True, return_dict=False)
    assert policy.prompts[0] == list(expected)


def test_the_openai_policy_plays_the_calculator_env_against_the_server(
        engine: Engine) -> None:
    """Greedy episodes through the server are the episodes the engine plays directly."""
    config = RolloutConfig(Sampling(max_tokens=24, temperature=0), max_total_tokens=600)
    direct = asyncio.run(rollout("calculator", engine, 4, config=config))
    with LocalServer(openai_app(engine, "tiny")) as server:
        remote = OpenAIPolicy(server.url + "/v1", tokenizer=engine.tokenizer)
        try:
            served = asyncio.run(rollout("calculator", remote, 4, config=config))
        finally:
            remote.close()
    assert remote.requests_sent >= 4
    for a, b in zip(sorted(direct, key=lambda t: t.episode),
                    sorted(served, key=lambda t: t.episode), strict=True):
        assert b.error is None, b.error
        assert b.completion_ids == a.completion_ids
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)


def test_bad_requests_get_openai_errors_and_the_server_goes_on(engine: Engine) -> None:
    with LocalServer(openai_app(engine, "tiny")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="one choice per request"):
            client.completions.create(model="tiny", prompt=[1, 2, 3], max_tokens=4, n=2)
        with pytest.raises(openai.BadRequestError, match="positions per slot"):
            client.completions.create(model="tiny", prompt=[1, 2, 3] * 400, max_tokens=4)
        with pytest.raises(openai.BadRequestError, match="vocabulary"):
            client.completions.create(model="tiny", prompt=[10**7], max_tokens=4)
        request = urllib.request.Request(server.url + "/v1/completions", data=b"{not json",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(request)
        assert bad.value.code == 400 and "not JSON" in json.loads(bad.value.read())[
            "error"]["message"]
        answer = client.completions.create(model="tiny", prompt=[1, 2, 3], max_tokens=5,
                                           temperature=0, logprobs=1,
                                           extra_body={"return_token_ids": True})
    assert len(answer.choices[0].model_extra["token_ids"]) <= 5
    assert len(answer.choices[0].logprobs.token_logprobs) == len(
        answer.choices[0].model_extra["token_ids"])


def test_the_serve_command_serves_a_model_folder(tiny_model_dir: Path,
                                                 agentgym_cli: str) -> None:
    process = subprocess.Popen([agentgym_cli, "serve", f"hf:{tiny_model_dir}", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert "serving" in line, process.stderr.read() if process.poll() is not None else line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "/models", timeout=30) as response:
            models = json.loads(response.read())
        assert models["data"][0]["id"] == str(tiny_model_dir.resolve())
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_text_policy_is_refused(agentgym_cli: str) -> None:
    done = subprocess.run([agentgym_cli, "serve", "oracle"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "text-level policy" in done.stderr
