"""Where a decode step of the engine spends its time, for the work on a cheaper host step.

    python scripts/gpu_engine_profile.py --model models/smollm2-135m-instruct --dtype bfloat16

Three readings of one engine (``--slots`` slots, ``--concurrency`` requests in flight, each
a ``--prompt``-token prompt and ``--new``-token budget, sampled at temperature 1 as GRPO's
rollouts are):

1. ``served``: the engine's own loop, ms per decode step (wall time over its decode steps,
   prefills included) and its busy fraction, with the decode steps overlapped with the
   host and without (``--overlap both``, the default; or ``on`` or ``off``);
2. ``parts``: one decode step's parts run one by one from this thread (the engine's thread
   idle), each timed with the device synchronized before and after: filling the inputs and
   launching the forward pass (the graph's replay on a GPU), the forward pass's device
   time, sampling, and reading the tokens back;
3. ``profile`` (``--profile``): torch.profiler over the parts of ``--repeats`` steps (the
   profiler sees this thread's operators, not the engine thread's), the operators that
   took the most host time and the most device time.

On a CPU it runs too (no graphs; the parts are then all host time).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from agentgym.core.policies import Sampling


def serve(engine: Any, concurrency: int, prompt: int, new: int) -> dict[str, float]:
    """``concurrency`` requests at once through the engine's own loop."""
    vocab = engine.local.vocab_size

    async def main() -> int:
        requests = [engine.generate([(97 * i + 7 * j + 11) % vocab for j in range(prompt)],
                                    Sampling(max_tokens=new, temperature=1.0))
                    for i in range(concurrency)]
        return sum(len(g.token_ids) for g in await asyncio.gather(*requests))

    steps, busy = engine.steps_run, engine.busy_s
    start = time.perf_counter()
    tokens = asyncio.run(main())
    wall = time.perf_counter() - start
    steps = engine.steps_run - steps
    return {"tokens": tokens, "wall_s": round(wall, 3), "decode_steps": steps,
            "ms_per_step": round(1000 * wall / max(steps, 1), 2),
            "busy": round((engine.busy_s - busy) / wall, 3)}


def parts(engine: Any, concurrency: int, prompt: int, repeats: int) -> dict[str, float]:
    """A decode step's parts, each between two synchronizations, in ms (median)."""
    import torch

    from agentgym.rollout.engine.sampling import sample_tokens

    device = engine.local.device
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tokens = [11] * concurrency
    positions = [prompt + k for k in range(concurrency)]
    reach = max(positions) + 1
    samplings = [Sampling(max_tokens=1, temperature=1.0)] * concurrency
    times: dict[str, list[float]] = {"launch": [], "forward": [], "sample": [], "read": []}
    with engine._step_lock, torch.inference_mode():
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            graphs = engine._graphs()
            if graphs is not None:
                logits = graphs.decode(tokens, positions, reach)
            else:
                logits = engine._forward(engine._to_device(tokens)[:, None],
                                         engine._to_device(positions)[:, None],
                                         range(concurrency), reach)
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            temperature = torch.ones(concurrency, device=device)
            top_p = torch.ones(concurrency, device=device)
            picked, logprobs, usable = sample_tokens(logits.float(), temperature, top_p,
                                                     samplings, [None] * concurrency)
            sync()
            t3 = time.perf_counter()
            torch.stack([picked.double(), logprobs.double(), usable.double()]).tolist()
            t4 = time.perf_counter()
            for name, value in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                times[name].append(1000 * value)
    return {name: round(sorted(values)[len(values) // 2], 3) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=200)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--overlap", choices=("both", "on", "off"), default="both")
    parser.add_argument("--compile", action="store_true",
                        help="the engine's forward passes through torch.compile")
    args = parser.parse_args()

    import torch

    from agentgym.rollout.engine import Engine

    dtype = getattr(torch, args.dtype) if args.dtype else None
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.overlap]
    for overlap in modes:
        engine = Engine(args.model, dtype=dtype, slots=args.slots, overlap=overlap,
                        compile=args.compile)
        start = time.perf_counter()
        serve(engine, args.concurrency, args.prompt, 16)  # captures the graphs, untimed
        print(f"first round (captures, compilation) {time.perf_counter() - start:.1f} s")
        for _ in range(2):
            print(f"served, overlap={overlap}",
                  serve(engine, args.concurrency, args.prompt, args.new), flush=True)
        if overlap != modes[-1]:
            engine.close()
    print("parts (ms, median)", parts(engine, args.concurrency, args.prompt, args.repeats),
          flush=True)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if engine.local.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities) as prof:
            parts(engine, args.concurrency, args.prompt, args.repeats)
        table = prof.key_averages()
        print(table.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=50))
        if engine.local.device.type == "cuda":
            print(table.table(sort_by="self_device_time_total", row_limit=15,
                              max_name_column_width=50))
    engine.close()


if __name__ == "__main__":
    main()
