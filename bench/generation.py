"""Generation speed: the continuous-batching engine against the static-batch loop and
transformers' ``generate`` with a static cache.

    python bench/generation.py [--model PATH] [--concurrency 1,8,32,64] [--json]

Workload: ``C`` concurrent clients, each asking for ``--requests`` completions one after
another (as an episode asks for its turns): prompts of 32-``--max-prompt`` tokens and
budgets of 8-``--max-new`` tokens, drawn from a seeded generator, greedy (so every path
produces the same tokens and does the same work); ``--lengths fixed`` instead gives every
request a ``--max-prompt``-token prompt and a ``--max-new``-token budget. Paths:

1. ``loop``: :class:`~agentgym.rollout.policies.hf.HFPolicy` (static batches: requests that
   arrive during a batch wait for it to finish);
2. ``engine``: :class:`~agentgym.rollout.engine.Engine` with ``C`` slots (a request joins
   as soon as a slot is free);
3. ``generate``: ``model.generate(cache_implementation="static")`` on batches of ``C``
   left-padded prompts decoded to the batch's longest budget, as the reference of what
   transformers reaches on this device (on a GPU it compiles the decode step into CUDA
   graphs); it cannot serve requests as they come, so its clients run in lockstep.

Measured per path and ``C``: tokens/s (completion tokens of all requests over the wall
time) and ms per decode step (wall time over the forward passes that decode one token per
row, prefill included in the wall time; the engine counts its own steps, since a step
replayed from a CUDA graph runs no forward pass a hook could count). ``--warmup`` has
the engine and ``generate`` serve one round of requests untimed first (graph captures,
compilation); ``--dtype`` loads the model in another dtype (``bfloat16`` on a GPU). The
multi-turn row (``--multi-turn N``, default 64; 0 skips it): ``N`` episodes of
bench/pipeline.py's env (real sandboxes and tools, several turns whose prompts grow)
through the real rollout pipeline with each policy.

The default model is the tiny local one (``agentgym.testing.build_tiny_model``), so the
CPU numbers measure the host side (scheduling, Python per step), which is what continuous
batching changes; ``--model`` takes a real one (SmolLM2-135M on a GPU:
scripts/gpu_smollm2.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _shared import print_results

#: How token budgets are drawn between 8 and ``--max-new``: evenly, or log-uniformly (most
#: turns short, a few long: an agent's tool calls beside its occasional long answers).
LENGTHS = ("uniform", "log-uniform")
#: Not drawn (``--lengths fixed``): every prompt ``--max-prompt`` tokens, every budget
#: ``--max-new`` (one batch decoding in step; how a decode step is usually quoted).
FIXED = "fixed"


def workload(vocab: int, count: int, max_prompt: int, max_new: int, lengths: str = "uniform",
             seed: int = 0) -> list[tuple[list[int], int]]:
    """``count`` requests: (prompt token ids, token budget)."""
    rng = random.Random(seed)

    def budget() -> int:
        if lengths == FIXED:
            return max_new
        if lengths == "uniform":
            return rng.randrange(8, max_new + 1)
        return round(math.exp(rng.uniform(math.log(8), math.log(max_new))))

    def prompt_length() -> int:
        return max_prompt if lengths == FIXED else rng.randrange(32, max_prompt + 1)

    return [([rng.randrange(vocab) for _ in range(prompt_length())], budget())
            for _ in range(count)]


class DecodeCounter:
    """Counts the model's forward passes that decode one token per row, while in a
    ``with`` block."""

    def __init__(self, model: Any):
        self.model, self.steps = model, 0

    def __enter__(self) -> DecodeCounter:
        self._hook = self.model.register_forward_pre_hook(self._count, with_kwargs=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hook.remove()

    def _count(self, module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None and ids.shape[-1] == 1:
            self.steps += 1


def run_policy(policy: Any, requests: list[tuple[list[int], int]],
               concurrency: int) -> dict[str, float]:
    """Serve ``requests`` with ``concurrency`` in flight: each of ``concurrency`` workers
    sends the next request as soon as its previous one is answered."""
    from agentgym.core.policies import Sampling

    pending = iter(requests)

    async def worker() -> int:
        tokens = 0
        for prompt, budget in pending:
            generation = await policy.generate(prompt, Sampling(max_tokens=budget,
                                                                temperature=0))
            tokens += len(generation.token_ids)
        return tokens

    async def main() -> int:
        return sum(await asyncio.gather(*(worker() for _ in range(concurrency))))

    # The engine counts its own decode steps: replayed from a CUDA graph, a step runs no
    # forward pass that a hook could count.
    steps_before = getattr(policy, "steps_run", None)
    with DecodeCounter(policy.model) as counter:
        start = time.perf_counter()
        tokens = asyncio.run(main())
    steps = counter.steps if steps_before is None else policy.steps_run - steps_before
    return measured(tokens, time.perf_counter() - start, steps)


def run_generate(model: Any, pad: int, requests: list[tuple[list[int], int]],
                 concurrency: int, device: Any) -> dict[str, float]:
    """``requests`` in lockstep batches of ``concurrency`` (``generate`` takes no request
    while a batch runs)."""
    with DecodeCounter(model) as counter:
        tokens, start = 0, time.perf_counter()
        for first in range(0, len(requests), concurrency):
            tokens += _generate_turn(model, pad, requests[first:first + concurrency], device)
    return measured(tokens, time.perf_counter() - start, counter.steps)


def _generate_turn(model: Any, pad: int, batch: list[tuple[list[int], int]],
                   device: Any) -> int:
    """One lockstep batch through ``generate``; the completion tokens it owes."""
    import torch

    width = max(len(p) for p, _ in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, (prompt, _) in enumerate(batch):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    longest = max(b for _, b in batch)
    with torch.inference_mode():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                             max_new_tokens=longest, min_new_tokens=longest, do_sample=False,
                             cache_implementation="static", pad_token_id=pad)
    # Each request's own budget of the tokens produced (the rest is waste).
    return sum(min(b, out.shape[1] - width) for _, b in batch)


def run_multi_turn(policy: Any, episodes: int, concurrency: int) -> dict[str, float]:
    """``episodes`` episodes of bench/pipeline.py's env (real local sandboxes over a copy
    of click, a real tool command per turn, no remote latency) through the rollout
    pipeline, greedy, so both policies play the same turns."""
    import click as click_package
    import pipeline as pipeline_bench

    from agentgym.core.policies import Sampling
    from agentgym.rollout.evaluate import rollout
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.pipeline import PipelineConfig

    constants = pipeline_bench.Constants(episodes=episodes, concurrency=concurrency,
                                         remote_latency_s=0.0)
    constants.template = pipeline_bench._copy_repo(Path(click_package.__file__).parent)
    config = RolloutConfig(Sampling(max_tokens=constants.tokens_max, temperature=0), seed=0)
    with DecodeCounter(policy.model) as counter:
        start = time.perf_counter()
        trajectories = asyncio.run(rollout(
            "bench-sandbox", policy, episodes,
            make_env=lambda: pipeline_bench.SandboxedBenchEnv(constants),
            pipeline=PipelineConfig(mode="pipeline", concurrency=concurrency), config=config))
        seconds = time.perf_counter() - start
    tokens = sum(sum(t.loss_mask) for t in trajectories)
    return {**measured(tokens, seconds, counter.steps),
            "turns_per_episode": sum(t.turns for t in trajectories) / len(trajectories),
            "errors": sum(t.error is not None for t in trajectories)}


def measured(tokens: int, seconds: float, steps: int) -> dict[str, float]:
    return {"tokens_per_s": tokens / seconds, "ms_per_step": 1000 * seconds / max(steps, 1),
            "seconds": seconds, "tokens": tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the tiny one)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--requests", type=int, default=8,
                        help="requests per unit of concurrency")
    parser.add_argument("--lengths", default=",".join(LENGTHS),
                        help="how budgets are drawn: uniform, log-uniform or both; or"
                             " fixed (every prompt --max-prompt, every budget --max-new)")
    parser.add_argument("--max-prompt", type=int, default=256)
    parser.add_argument("--max-new", type=int, default=256)
    parser.add_argument("--paths", default="loop,engine,generate")
    parser.add_argument("--multi-turn", type=int, default=64,
                        help="episodes of the multi-turn row (0 skips it)")
    parser.add_argument("--multi-turn-concurrency", type=int, default=16)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--dtype", default=None, help="e.g. bfloat16 (default: the model's)")
    parser.add_argument("--warmup", action="store_true",
                        help="engine and generate: serve one round of requests untimed"
                             " first (CUDA graph captures, compilation)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    import torch

    from agentgym.rollout.engine import Engine
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.policies.hf import HFPolicy
    from agentgym.testing import build_tiny_model

    torch.set_num_threads(args.torch_threads)
    model_dir = args.model or str(build_tiny_model(Path(tempfile.gettempdir())
                                                   / "agentgym-bench-tiny-model"))
    paths = args.paths.split(",")
    results: dict[str, float] = {}
    for lengths in args.lengths.split(","):
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            loop = HFPolicy(model_dir, device=args.device, max_batch_size=concurrency,
                            dtype=getattr(torch, args.dtype) if args.dtype else None)
            requests = workload(loop.vocab_size, args.requests * concurrency,
                                args.max_prompt, args.max_new, lengths)
            first_round = requests[:concurrency] if args.warmup else []
            print(f"{lengths} budgets, {concurrency} at once ...", file=sys.stderr)
            row = f"{lengths}_c{concurrency}"
            if "loop" in paths:  # nothing to warm up: no graphs, no compilation
                for key, value in run_policy(loop, requests, concurrency).items():
                    results[f"loop_{row}_{key}"] = value
            if "engine" in paths:
                engine = Engine(loop.model, tokenizer=loop.tokenizer, slots=concurrency,
                                max_len=args.max_prompt + args.max_new + 2)
                try:
                    if first_round:
                        results[f"engine_{row}_warmup_s"] = run_policy(
                            engine, first_round, concurrency)["seconds"]
                    for key, value in run_policy(engine, requests, concurrency).items():
                        results[f"engine_{row}_{key}"] = value
                    if engine.graphs is not None:
                        results[f"engine_{row}_graphs_captured"] = engine.graphs.captures
                finally:
                    engine.close()
            if "generate" in paths:
                if first_round:
                    run_generate(loop.model, loop.pad_token_id, first_round, concurrency,
                                 loop.device)
                for key, value in run_generate(loop.model, loop.pad_token_id, requests,
                                               concurrency, loop.device).items():
                    results[f"generate_{row}_{key}"] = value
            if "loop" in paths and "engine" in paths:
                results[f"engine_over_loop_{row}"] = (results[f"engine_{row}_tokens_per_s"]
                                                      / results[f"loop_{row}_tokens_per_s"])
    if args.multi_turn:
        print(f"multi-turn: {args.multi_turn} episodes ...", file=sys.stderr)
        loop = HFPolicy(model_dir, device=args.device, max_batch_size=args.multi_turn_concurrency)
        engine = Engine(loop.model, tokenizer=loop.tokenizer, slots=args.multi_turn_concurrency,
                        max_len=RolloutConfig().max_total_tokens + 1)
        try:
            for name, policy in (("loop", loop), ("engine", engine)):
                if name in paths:
                    for key, value in run_multi_turn(policy, args.multi_turn,
                                                     args.multi_turn_concurrency).items():
                        results[f"{name}_multi_turn_{key}"] = value
        finally:
            engine.close()
        if "loop" in paths and "engine" in paths:
            results["engine_over_loop_multi_turn"] = (
                results["engine_multi_turn_tokens_per_s"] / results["loop_multi_turn_tokens_per_s"])
    print_results(results, args.json, width=44)


if __name__ == "__main__":
    main()
