"""GRPO's scoring pass on a CPU: TRL's fused LM head against agentgym's plain logits, and
those with rows grouped by length.

    python bench/grpo_scoring.py [--rows 64] [--prompt 650] [--completion 96] [--vocab 2048]
                                 [--repeats 5] [--json]

GRPO scores each batch's completion tokens (log-probs and entropies) and trains through
them. TRL's fused LM head projects only the scored positions where Triton runs, and every
position elsewhere, prompts included; off CUDA, agentgym's trainer takes the model's logits
at the completion positions instead (:class:`~agentgym.trainers.trl_adapter.PlainLogpsOffGPU`).
Both are real ``GRPOTrainer`` s (built, not trained) over the same tiny model
(``agentgym.testing.build_tiny_model``, hidden 128, 2 layers and a ``vocab``-token
vocabulary: the memory and web CPU recipes' sizes) and
the same batch, shaped like an agent's: ``rows`` rows, prompts left-padded to ``prompt``
tokens (each 30-100% of it long), completions right-padded to ``completion`` (each 10-100%
of it). The plain path scores rows in groups of similar length, each cut to its own
columns (:func:`~agentgym.trainers.trl_adapter.length_groups`); ``plain_one_width`` is it
with every row in one group, at the batch's width, as it was before. Measured: the wall
time of one forward and backward pass through the scoring (the loss's share of a GRPO
step), the median of ``repeats`` runs of each path, taken in turns.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _shared import print_results


def _trainer(cls: type, model_dir: Path, out: Path) -> Any:
    from agentgym.rollout.models import load_model_and_tokenizer
    from agentgym.trainers.grpo import grpo_config, task_dataset

    model, tokenizer = load_model_and_tokenizer(model_dir, padding_side="left")
    args = grpo_config(out / cls.__name__, {"max_steps": 1, "per_device_train_batch_size": 8,
                                            "num_generations": 8})
    return cls(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
               args=args, processing_class=tokenizer,
               train_dataset=task_dataset([f"t{i}" for i in range(8)]))


def _batch(vocab: int, rows: int, prompt: int, completion: int) -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (rows, prompt + completion), generator=generator)
    mask = torch.zeros_like(ids)
    for row in range(rows):
        used = int(torch.randint(int(0.3 * prompt), prompt + 1, (1,), generator=generator))
        done = int(torch.randint(max(1, completion // 10), completion + 1, (1,),
                                 generator=generator))
        mask[row, prompt - used:prompt + done] = 1
    return ids, mask


def _time(trainer: Any, ids: Any, mask: Any, completion: int, ratio: float) -> float:
    trainer.length_ratio = ratio  # the fused trainer has none: it does not group
    began = time.perf_counter()
    logps, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, mask, completion, batch_size=len(ids), compute_entropy=True)
    (-logps.sum()).backward()
    trainer.model.zero_grad(set_to_none=True)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=650)
    parser.add_argument("--completion", type=int, default=96)
    parser.add_argument("--vocab", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    from trl import GRPOTrainer

    from agentgym.testing import build_tiny_model
    from agentgym.trainers.trl_adapter import PlainLogpsOffGPU

    class Plain(PlainLogpsOffGPU, GRPOTrainer):
        pass

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        model_dir = build_tiny_model(out / "model", hidden_size=128, num_layers=2,
                                     vocab_size=options.vocab)
        fused, plain = _trainer(GRPOTrainer, model_dir, out), _trainer(Plain, model_dir, out)
        ids, mask = _batch(fused.model.config.vocab_size, options.rows, options.prompt,
                           options.completion)
        paths = (("fused", fused, 1.0), ("one_width", plain, float("inf")),
                 ("grouped", plain, PlainLogpsOffGPU.length_ratio))
        times: dict[str, list[float]] = {name: [] for name, _, _ in paths}
        for _ in range(options.repeats + 1):  # the first round warms up
            for name, trainer, ratio in paths:
                times[name].append(_time(trainer, ids, mask, options.completion, ratio))
    fused_s, one_width_s, grouped_s = (statistics.median(times[name][1:])
                                       for name, _, _ in paths)
    print_results({"fused_head_s": fused_s, "plain_one_width_s": one_width_s,
                   "plain_grouped_s": grouped_s, "plain_vs_fused": fused_s / one_width_s,
                   "grouped_vs_one_width": one_width_s / grouped_s,
                   "grouped_vs_fused": fused_s / grouped_s}, options.json)


if __name__ == "__main__":
    main()
