"""Capture: an agent program's calls to the OpenAI-compatible server, under its episode's
base URL, recorded token for token and made into samples by the prefix rule (a harness
that keeps its history gives one sample, one that rewrites it several, one that
re-serialises a turn a counted mismatch; no mask ever covers a token nobody sampled)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the engine needs the train extra")
openai = pytest.importorskip("openai", reason="the openai client is a dev dependency")

from agentgym.core.policies import Generation, Sampling, TokenPolicy  # noqa: E402
from agentgym.core.serving import LocalServer  # noqa: E402
from agentgym.rollout.capture import (  # noqa: E402
    CapturedCall,
    CaptureStore,
    UnknownEpisodeKeyError,
    build_samples,
)
from agentgym.rollout.engine import Engine  # noqa: E402
from agentgym.rollout.serve import openai_app  # noqa: E402


class Scripted(TokenPolicy):
    """Answers the n-th prompt with the tokens of ``texts[n]`` and the end-of-turn token."""

    def __init__(self, tokenizer, texts: list[str]):
        self.tokenizer, self.texts = tokenizer, texts
        self.generations: list[Generation] = []

    async def generate(self, prompt_ids, sampling: Sampling) -> Generation:
        text = self.texts[len(self.generations) % len(self.texts)]
        ids = [*self.tokenizer.encode(text, add_special_tokens=False),
               self.tokenizer.eos_token_id]
        generation = Generation(ids, [-0.1 * (i + 1) for i in range(len(ids))], "stop",
                                versions=[len(self.generations)] * len(ids))
        self.generations.append(generation)
        return generation


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@contextlib.contextmanager
def episode(policy: TokenPolicy, name: str = "scripted"):
    """A capturing server for ``policy`` and one open episode: (store, key, its client)."""
    store = CaptureStore()
    with LocalServer(openai_app(policy, name, capture=store)) as server:
        key = store.open()
        yield store, key, openai.OpenAI(base_url=f"{server.url}/episodes/{key}/v1",
                                        api_key="unused"), server


def call(prompt: list[int], completion: list[int], version: int = 0) -> CapturedCall:
    return CapturedCall(prompt, completion, [-1.0] * len(completion), [version] * len(completion))


def test_the_prefix_rule_on_token_ids() -> None:
    kept = build_samples([call([1, 2], [3, 4]), call([1, 2, 3, 4, 5], [6]),
                          call([1, 2, 3, 4, 5, 6, 7, 8], [9, 10], version=1)])
    (sample,) = kept.samples
    assert sample.token_ids == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert sample.loss_mask == [0, 0, 1, 1, 0, 1, 0, 0, 1, 1]
    assert sample.versions == [-1, -1, 0, 0, -1, 0, -1, -1, 1, 1]
    assert sample.prompt_length == 2 and sample.calls == 3
    assert (kept.rewritten, kept.mismatches) == (0, 0)

    # History dropped (a new prompt): a new sample. The previous completion re-rendered as
    # other tokens (the prompt kept): a mismatch, and a new sample too.
    broken = build_samples([call([1, 2], [3, 4]), call([1, 9], [5]),
                            call([1, 9, 6, 7], [8])])
    assert [s.token_ids for s in broken.samples] == [[1, 2, 3, 4], [1, 9, 5], [1, 9, 6, 7, 8]]
    assert (broken.rewritten, broken.mismatches) == (1, 1)
    assert broken.metrics == {"capture/calls": 3, "capture/samples": 3,
                              "capture/rewritten": 1, "capture/mismatches": 1}
    for sample in broken.samples:
        assert sum(sample.loss_mask) == len(sample.token_ids) - sample.prompt_length

    unknown = build_samples([CapturedCall([1], [2], None), call([1, 2, 3], [4])])
    assert unknown.samples[0].logprobs is None


def test_a_harness_keeping_its_history_gives_one_sample_of_exactly_the_sampled_tokens(
        tokenizer) -> None:
    policy = Scripted(tokenizer, ["I will look.", "Found it: 42.", "Done."])
    with episode(policy) as (store, key, client, server):
        assert [m.id for m in client.models.list().data] == ["scripted"]
        messages = [{"role": "system", "content": "You are an agent."},
                    {"role": "user", "content": "Find the answer."}]
        for observation in ("The file says 42.", "Thanks."):
            answer = client.chat.completions.create(model="scripted", messages=messages,
                                                    max_tokens=32)
            messages += [{"role": "assistant", "content": answer.choices[0].message.content},
                         {"role": "user", "content": observation}]
        client.chat.completions.create(model="scripted", messages=messages, max_tokens=32)
        calls = store.close(key)
        with pytest.raises(openai.NotFoundError, match="unknown or its episode has ended"):
            client.chat.completions.create(model="scripted", messages=messages)
        stranger = openai.OpenAI(base_url=f"{server.url}/episodes/nope/v1", api_key="x")
        with pytest.raises(openai.NotFoundError):
            stranger.chat.completions.create(model="scripted", messages=messages)
    samples = build_samples(calls)
    (sample,) = samples.samples
    assert (samples.rewritten, samples.mismatches) == (0, 0)
    assert sample.token_ids == calls[-1].prompt_ids + calls[-1].completion_ids
    sampled = [t for t, m in zip(sample.token_ids, sample.loss_mask, strict=True) if m]
    assert sampled == [t for g in policy.generations for t in g.token_ids]
    assert [lp for lp, m in zip(sample.logprobs, sample.loss_mask, strict=True) if m] == [
        lp for g in policy.generations for lp in g.logprobs]
    assert {v for v, m in zip(sample.versions, sample.loss_mask, strict=True) if m} == {0, 1, 2}


def test_history_rewritten_or_reserialised_starts_new_samples(tokenizer) -> None:
    policy = Scripted(tokenizer, ["First.", "Second.", "Third."])
    with episode(policy) as (store, key, client, _):
        system = {"role": "system", "content": "You are an agent."}
        first = client.chat.completions.create(
            model="scripted", messages=[system, {"role": "user", "content": "Go."}])
        # The assistant turn echoed back with other text: a mismatch, not a mask over it.
        said = first.choices[0].message.content
        client.chat.completions.create(model="scripted", messages=[
            system, {"role": "user", "content": "Go."},
            {"role": "assistant", "content": said + "  "},
            {"role": "user", "content": "Again."}])
        # Old turns dropped (a summary instead): history rewritten.
        client.chat.completions.create(model="scripted", messages=[
            system, {"role": "user", "content": "Summary: two turns. Go on."}])
        calls = store.close(key)
    samples = build_samples(calls)
    assert len(samples.samples) == 3
    assert (samples.rewritten, samples.mismatches) == (1, 1)
    for sample, generation in zip(samples.samples, policy.generations, strict=True):
        assert [t for t, m in zip(sample.token_ids, sample.loss_mask, strict=True) if m] == \
            generation.token_ids


def test_the_engine_behind_the_proxy_records_what_it_sampled(tiny_model_dir: Path) -> None:
    engine = Engine(str(tiny_model_dir), slots=2, max_len=1024)
    try:
        with episode(engine, "tiny") as (store, key, client, _):
            answer = client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "Hello"}], max_tokens=12,
                temperature=1.0, logprobs=True, extra_body={"return_token_ids": True})
            (recorded,) = store.close(key)
    finally:
        engine.close()
    choice = answer.choices[0]
    assert recorded.completion_ids == choice.model_extra["token_ids"]
    assert recorded.prompt_ids == choice.model_extra["prompt_token_ids"]
    assert recorded.logprobs == pytest.approx([t.logprob for t in choice.logprobs.content])
    assert recorded.versions == [0] * len(recorded.completion_ids)


def test_a_streaming_harness_is_recorded_too(tokenizer) -> None:
    policy = Scripted(tokenizer, ["Streaming along."])
    with episode(policy) as (store, key, client, _):
        chunks = list(client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "Go."}], stream=True))
        (recorded,) = store.close(key)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Streaming along."
    assert recorded.completion_ids == policy.generations[0].token_ids


AGENT_PROGRAM = """\
import json, os, urllib.request
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
messages = [{"role": "user", "content": "Fix the bug."}]
for turn in range(3):
    request = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps({"model": "m", "messages": messages, "max_tokens": 16}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    answer = json.load(urllib.request.urlopen(request, timeout=30))
    messages += [{"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "Command output %d." % turn}]
print("turns", turn + 1)
"""


def test_an_agent_program_in_a_sandbox_is_captured_through_the_bridge(
        backend: str, tokenizer) -> None:
    """An unmodified agent program (stdlib HTTP, its own loop) inside a sandbox, pointed at
    the capture proxy through the bridge: its calls are one sample of the sampled tokens."""
    import asyncio
    import tempfile

    from agentgym.core.registry import open_sandbox
    from agentgym.sandboxes.bridge import bridge_mounts, start_bridge

    folder = Path(tempfile.mkdtemp(prefix="agentgym-capture-", dir="/tmp"))
    folder.chmod(0o755)
    socket_path = folder / "proxy.sock"
    policy = Scripted(tokenizer, ["Looking.", "Editing.", "Done."])
    store = CaptureStore()

    async def play() -> str:
        box = await open_sandbox(backend, mounts=bridge_mounts(socket_path))
        try:
            url = await start_bridge(box, socket_path)
            await box.write_file("agent.py", AGENT_PROGRAM)
            key = store.open()
            ran = await box.exec(f"OPENAI_BASE_URL={url}/episodes/{key}/v1"
                                 f" OPENAI_API_KEY={key} python3 agent.py", timeout=60)
            assert ran.exit_code == 0, ran.output
            return key
        finally:
            await box.close()

    try:
        with LocalServer(openai_app(policy, "scripted", capture=store), uds=socket_path):
            key = asyncio.run(play())
    finally:
        folder.rmdir()
    samples = build_samples(store.close(key))
    (sample,) = samples.samples
    assert sample.calls == 3 and (samples.rewritten, samples.mismatches) == (0, 0)
    assert [t for t, m in zip(sample.token_ids, sample.loss_mask, strict=True) if m] == [
        t for g in policy.generations for t in g.token_ids]


def test_the_store_refuses_keys_it_does_not_hold() -> None:
    store = CaptureStore()
    key = store.open()
    assert len(store) == 1 and key != store.open()
    store.record(key, call([1], [2]))
    assert len(store.close(key)) == 1
    with pytest.raises(UnknownEpisodeKeyError, match="already closed"):
        store.close(key)
    with pytest.raises(UnknownEpisodeKeyError, match="has ended"):
        store.record(key, call([1], [2]))
