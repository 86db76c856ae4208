"""Capture proxy overhead: what a call through ``agentgym serve``'s per-episode endpoint
costs beyond calling the policy directly.

    python bench/capture.py [--calls 200] [--turns 8] [--json]

An agent program's episode is ``--turns`` chat calls whose history grows (each call sends
the previous messages, the assistant's answers and a tool result), made with the ``openai``
client. Three ways, side by side in one run, on the same messages:

1. ``direct``: the policy's ``generate`` on the prompt's token ids, already rendered (no
   HTTP, no template): the floor;
2. ``served``: ``POST /v1/chat/completions`` (HTTP, JSON, the chat template, tool-call
   parsing), nothing recorded;
3. ``captured``: ``POST /episodes/KEY/v1/chat/completions``: the same and the recording,
   and ``build_samples`` over each episode's calls at its end (counted in its calls).

The policy answers at once (a fixed completion of 24 tokens), so what is measured is the
proxy, not a model. Per way: p50 and p95 ms per call; ``overhead_p50_ms`` is captured minus
direct at the median (target: < 5 ms on CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from _shared import percentile, print_results

ANSWER = "I will list the files, then read the one that matters and fix the failing test."


class Answering:
    """A token policy that answers every prompt with the same tokens, at once."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.ids = [*tokenizer.encode(ANSWER, add_special_tokens=False), tokenizer.eos_token_id]

    async def generate(self, prompt_ids: list[int], sampling: Any) -> Any:
        from agentgym.core.policies import Generation

        return Generation(list(self.ids), [-0.5] * len(self.ids), "stop")


def episode_messages(turns: int) -> list[list[dict[str, str]]]:
    """The messages of each call of an episode of ``turns`` calls."""
    messages = [{"role": "system", "content": "You are a coding agent. Fix the bug."},
                {"role": "user", "content": "The test test_parse fails; make it pass."}]
    calls = []
    for turn in range(turns):
        calls.append(list(messages))
        messages += [{"role": "assistant", "content": ANSWER},
                     {"role": "user", "content": f"Output of command {turn}:\n" + "ok\n" * 20}]
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per way")
    parser.add_argument("--turns", type=int, default=8, help="calls per episode")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    import openai

    from agentgym.core.policies import Sampling
    from agentgym.core.serving import LocalServer
    from agentgym.rollout.capture import CaptureStore, build_samples
    from agentgym.rollout.models import load_tokenizer
    from agentgym.rollout.serve import openai_app
    from agentgym.testing import build_tiny_model

    model_dir = build_tiny_model(Path(tempfile.gettempdir()) / "agentgym-bench-tiny-model")
    tokenizer = load_tokenizer(model_dir)
    policy = Answering(tokenizer)
    episodes = -(-args.calls // args.turns)
    conversation = episode_messages(args.turns)
    store = CaptureStore()
    seconds: dict[str, list[float]] = {"direct": [], "served": [], "captured": []}
    samples = mismatches = 0

    for messages in conversation * episodes:  # direct: rendered outside the timing
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                               tokenize=True, return_dict=False)
        start = time.perf_counter()
        asyncio.run(policy.generate(list(prompt), Sampling(max_tokens=64)))
        seconds["direct"].append(time.perf_counter() - start)

    with LocalServer(openai_app(policy, "bench", capture=store)) as server:
        served = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
        for messages in conversation * episodes:
            start = time.perf_counter()
            served.chat.completions.create(model="bench", messages=messages, max_tokens=64)
            seconds["served"].append(time.perf_counter() - start)
        for _ in range(episodes):
            key = store.open()
            client = openai.OpenAI(base_url=f"{server.url}/episodes/{key}/v1",
                                   api_key="unused")
            for i, messages in enumerate(conversation):
                start = time.perf_counter()
                client.chat.completions.create(model="bench", messages=messages,
                                               max_tokens=64)
                if i == len(conversation) - 1:
                    built = build_samples(store.close(key))
                    samples += len(built.samples)
                    mismatches += built.mismatches
                seconds["captured"].append(time.perf_counter() - start)

    results: dict[str, float] = {}
    for way, values in seconds.items():
        results[f"{way}_p50_ms"] = 1000 * percentile(values, 0.5)
        results[f"{way}_p95_ms"] = 1000 * percentile(values, 0.95)
    results["overhead_p50_ms"] = results["captured_p50_ms"] - results["direct_p50_ms"]
    results["overhead_p95_ms"] = results["captured_p95_ms"] - results["direct_p95_ms"]
    results["calls"] = len(seconds["captured"])
    results["samples_per_episode"] = samples / episodes
    results["mismatches"] = mismatches
    print_results(results, args.json)


if __name__ == "__main__":
    main()
