"""OpenAIPolicy against fake OpenAI-compatible servers on 127.0.0.1 (no network).

One fake answers ``/v1/completions`` the way vLLM does with ``return_token_ids`` and
``return_tokens_as_token_ids``; one answers with text only, like servers without vLLM's
extensions. Both are real HTTP servers (``http.server`` in a thread, port 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="OpenAIPolicy loads a tokenizer with transformers")

from agentgym.core.errors import AgentGymError
from agentgym.core.policies import Sampling, TokenPolicy
from agentgym.rollout.policies.openai import (
    TOKENIZER_ENV,
    OpenAIPolicy,
    OpenAIServerError,
    openai_policy,
)

EOS = 1026  # <|im_end|> in the tiny tokenizer (checked in the fixture)
DIGITS = range(15, 25)  # "0".."9", one token each (checked in the fixture)
STOP_AFTER = 5  # the fakes stop with eos after this many tokens


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tokenizer.eos_token_id == EOS
    assert tokenizer.decode(list(DIGITS)) == "0123456789"
    return tokenizer


def completion_for(prompt: list[int], max_tokens: int) -> tuple[list[int], str]:
    """What the fake model answers: digits that depend on the prompt, then eos."""
    count = min(max_tokens, STOP_AFTER)
    ids = [DIGITS[(sum(prompt) + i) % 10] for i in range(count)]
    if max_tokens > STOP_AFTER:
        return [*ids, EOS], "stop"
    return ids, "length"


@dataclass
class FakeServer:
    """An OpenAI-compatible server: ``mode`` is ``vllm`` (token ids + logprobs), ``text``
    (text only) or a callable answering the parsed body."""

    mode: str | Callable[[dict], tuple[int, Any]]
    tokenizer: Any
    model_id: str = "tiny"
    delay: float = 0.0
    #: Requests wait here until this many are in flight together (or its timeout passes).
    barrier: threading.Barrier | None = None
    bodies: list[dict] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, path: str, body: dict | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.model_id, "object": "model"}]}
        if path != "/v1/completions" or body is None:
            return 404, {"error": {"message": f"no route {path}"}}
        self.bodies.append(body)
        if callable(self.mode):
            return self.mode(body)
        prompt = body["prompt"]
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return 400, {"error": {"message": "prompt must be token ids here"}}
        ids, reason = completion_for(prompt, body["max_tokens"])
        # vLLM's text drops special tokens only when skip_special_tokens is true (default)
        text = self.tokenizer.decode(ids, skip_special_tokens=body.get("skip_special_tokens", True))
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": reason}
        if self.mode == "vllm":
            logprobs = [-0.25 * (i + 1) for i in range(len(ids))]
            pairs = zip(ids, logprobs, strict=True)
            as_ids = body.get("return_tokens_as_token_ids")
            choice["logprobs"] = {
                "tokens": [f"token_id:{t}" if as_ids else f"tok{t}" for t in ids],
                "token_logprobs": logprobs,
                "top_logprobs": [{f"token_id:{t}": lp} for t, lp in pairs],
                "text_offset": list(range(len(ids))),
            }
            if body.get("return_token_ids"):
                choice["token_ids"] = ids
                choice["prompt_token_ids"] = prompt
        else:
            choice["logprobs"] = None
        return 200, {"id": "cmpl-1", "object": "text_completion", "choices": [choice]}


@pytest.fixture
def serve(tokenizer) -> Iterator[Callable[..., tuple[str, FakeServer]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(mode, **kwargs) -> tuple[str, FakeServer]:
        fake = FakeServer(mode, tokenizer, **kwargs)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def reply(self, body: dict | None) -> None:
                with fake.lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if fake.barrier is not None:
                        with contextlib.suppress(threading.BrokenBarrierError):
                            fake.barrier.wait()
                    time.sleep(fake.delay)
                    status, payload = fake.answer(self.path, body)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.reply(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                self.reply(json.loads(self.rfile.read(length)))

        class Server(ThreadingHTTPServer):
            # socketserver listens with a backlog of 5; 16 connections at once under the
            # full suite's load overflowed it and one was reset (a real server takes more).
            request_queue_size = 128

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/v1", fake

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def run(*calls):
    async def main():
        return await asyncio.gather(*calls)

    return asyncio.run(main())


PROMPT = [1025, 339, 198, 558, 333, 220, 18, 1026, 198, 1025, 404, 198]


def test_vllm_style_answers_give_token_ids_and_logprobs(
    serve, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, fake = serve("vllm")
    monkeypatch.setenv(TOKENIZER_ENV, str(tiny_model_dir))
    policy = openai_policy(url + "/")  # a trailing slash is fine
    assert isinstance(policy, TokenPolicy)
    assert policy.tokenizer.eos_token_id == EOS
    assert policy.model is None, "asked of /v1/models at the first request"
    stop, length = run(
        policy.generate(PROMPT, Sampling(max_tokens=16, temperature=0.7, seed=3)),
        policy.generate(PROMPT, Sampling(max_tokens=3)),
    )
    expected, _ = completion_for(PROMPT, 16)
    assert stop.token_ids == expected and stop.token_ids[-1] == EOS
    assert stop.finish_reason == "stop"
    assert stop.logprobs == [-0.25 * (i + 1) for i in range(len(expected))]
    assert length.finish_reason == "length" and len(length.token_ids) == 3
    assert stop.metrics["tokens_from"] == "server"

    body = next(b for b in fake.bodies if b["max_tokens"] == 16)
    assert body["prompt"] == PROMPT, "the prompt travels as token ids"
    assert body["model"] == "tiny", "the model name comes from /v1/models"
    assert body["logprobs"] == 1 and body["return_token_ids"] is True
    assert body["return_tokens_as_token_ids"] is True
    assert body["temperature"] == 0.7 and body["seed"] == 3 and body["top_p"] == 1.0
    assert "seed" not in next(b for b in fake.bodies if b["max_tokens"] == 3)


def test_token_ids_are_read_from_logprob_tokens(serve, tokenizer) -> None:
    """Older vLLM: no ``token_ids`` field, but ``"token_id:N"`` strings in the logprobs."""
    url, fake = serve("vllm")
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny", extra_body={"top_k": 5})
    fake_answer = fake.answer

    def without_token_ids(path: str, body: dict | None):
        status, payload = fake_answer(path, body)
        if body is not None:
            payload["choices"][0].pop("token_ids", None)
        return status, payload

    fake.answer = without_token_ids  # type: ignore[method-assign]
    (result,) = run(policy.generate(PROMPT, Sampling(max_tokens=16)))
    assert result.token_ids == completion_for(PROMPT, 16)[0]
    assert result.logprobs is not None and len(result.logprobs) == len(result.token_ids)
    assert fake.bodies[-1]["top_k"] == 5


def test_text_only_answers_are_tokenized_without_logprobs(serve, tokenizer) -> None:
    url, fake = serve("text")
    policy = OpenAIPolicy(url, tokenizer=tokenizer, vllm_extensions=False)
    stop, length = run(
        policy.generate(PROMPT, Sampling(max_tokens=16)),
        policy.generate(PROMPT, Sampling(max_tokens=4)),
    )
    assert "return_token_ids" not in fake.bodies[0]
    expected, _ = completion_for(PROMPT, 16)
    # the server dropped <|im_end|> from its text; the policy puts the stop token back
    assert stop.token_ids == expected and expected[-1] == EOS
    assert stop.logprobs is None and stop.finish_reason == "stop"
    assert stop.metrics["tokens_from"] == "text"
    assert length.token_ids == completion_for(PROMPT, 4)[0]
    assert length.logprobs is None and length.finish_reason == "length"


def test_concurrent_requests_are_in_flight_together(serve, tokenizer) -> None:
    # The server answers none until all 16 are in flight at once (no clock involved: a
    # policy that queued them one by one would leave the barrier to break after 60 s).
    url, fake = serve("vllm", barrier=threading.Barrier(16, timeout=60))
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny", max_concurrency=16)
    prompts = [[*PROMPT, i] for i in range(16)]
    results = run(*(policy.generate(p, Sampling(max_tokens=8)) for p in prompts))
    for prompt, result in zip(prompts, results, strict=True):
        assert result.token_ids == completion_for(prompt, 8)[0]
    assert fake.max_in_flight == 16, "requests queued instead of being in flight together"
    assert policy.requests_sent == 16
    policy.close()


def test_tokenizer_comes_from_the_served_model_or_the_environment(
    serve, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = serve("vllm", model_id=str(tiny_model_dir))
    policy = OpenAIPolicy(url)  # vLLM reports the folder it serves as the model id
    assert policy.model == str(tiny_model_dir)
    assert policy.tokenizer.convert_tokens_to_ids("<tool_call>") == 1027

    url, _ = serve("vllm", model_id="some-org/unavailable")
    monkeypatch.setenv(TOKENIZER_ENV, str(tiny_model_dir))
    assert OpenAIPolicy(url).tokenizer.eos_token_id == EOS
    monkeypatch.delenv(TOKENIZER_ENV)
    with pytest.raises(AgentGymError, match=TOKENIZER_ENV):
        OpenAIPolicy(url)


def test_server_down_names_the_url(tokenizer) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny")
    with pytest.raises(OpenAIServerError, match=rf"cannot reach .*{url}/completions"):
        run(policy.generate(PROMPT, Sampling(max_tokens=4)))
    with pytest.raises(OpenAIServerError, match=rf"{url}/models.*{TOKENIZER_ENV}"):
        OpenAIPolicy(url)


def test_error_answers_are_reported_and_overload_is_retried(serve, tokenizer) -> None:
    calls = {"n": 0}

    def flaky(body: dict):
        calls["n"] += 1
        if calls["n"] == 1:
            return 503, {"error": {"message": "busy"}}
        return 200, {"choices": [{"text": "ok", "finish_reason": "length"}]}

    url, _ = serve(flaky)
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny")
    (result,) = run(policy.generate(PROMPT, Sampling(max_tokens=4)))
    assert calls["n"] == 2 and result.finish_reason == "length"
    assert tokenizer.decode(result.token_ids) == "ok"

    url, _ = serve(lambda body: (400, {"error": {"message": "unknown field return_token_ids"}}))
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny")
    with pytest.raises(OpenAIServerError, match=r"HTTP 400.*vllm_extensions=False"):
        run(policy.generate(PROMPT, Sampling(max_tokens=4)))

    url, _ = serve(lambda body: (200, {"choices": []}))
    policy = OpenAIPolicy(url, tokenizer=tokenizer, model="tiny")
    with pytest.raises(OpenAIServerError, match="without choices"):
        run(policy.generate(PROMPT, Sampling(max_tokens=4)))


def test_bad_urls_and_arguments() -> None:
    with pytest.raises(ValueError, match="not an http"):
        openai_policy("127.0.0.1:8000/v1")
    with pytest.raises(AgentGymError, match="openai:http"):
        openai_policy(None)
