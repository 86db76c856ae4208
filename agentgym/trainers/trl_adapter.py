"""Everything agentgym relies on inside TRL (and transformers' ``Trainer``), in one place.

:mod:`agentgym.trainers.grpo` drives ``trl.GRPOTrainer`` through its ``rollout_func``
argument (experimental in TRL) and needs a few things TRL has no public API for. Each is a
function or mixin here, with a comment naming exactly what it relies on, so that a TRL
upgrade is checked in this file alone. pyproject's ``train`` extra pins ``trl`` to the
minor versions these were checked against (``trl>=1.16,<1.17``); widen the pin only after
``tests/trainers`` pass on the new version.

* :func:`log_metrics`: extra per-step metrics, logged with TRL's own.
* :class:`TrainSamplerHook`: see the sampler TRL builds (to predict the next batch).
* :func:`repeat_sampler_layout`: how that sampler repeats and batches prompts.
* :func:`vllm_generate`, :func:`stop_token_ids`: sample with TRL's vLLM engine.
* :func:`quiet_expected_warnings`: silence what TRL says about agentgym's intended use.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["TrainSamplerHook", "log_metrics", "quiet_expected_warnings",
           "repeat_sampler_layout", "stop_token_ids", "vllm_generate"]


def log_metrics(trainer: Any, metrics: dict[str, float]) -> None:
    """Add one value per key to the metrics ``trainer`` logs at its next logging step
    (averaged with the other values of the key since the last one, as TRL's own are)."""
    # Relies on: GRPOTrainer._metrics, {"train"|"eval": defaultdict(list)}, averaged per key
    # (NaN skipped) and cleared by GRPOTrainer.log; the mode is "train" while
    # trainer.model.training, as in GRPOTrainer.log.
    store = trainer._metrics["train" if trainer.model.training else "eval"]
    for key, value in metrics.items():
        store[key].append(value)


class TrainSamplerHook:
    """Mixin for a ``Trainer`` subclass: the sampler the trainer builds for its training
    data passes through ``self.wrap_train_sampler(sampler, dataset)``, whose result the
    trainer then uses (list it before the trainer class: ``class T(TrainSamplerHook,
    GRPOTrainer)``)."""

    def wrap_train_sampler(self, sampler: Any, dataset: Any) -> Any:
        return sampler

    # Relies on: transformers.Trainer._get_train_sampler(self, train_dataset=None), called
    # by Trainer.get_train_dataloader to build the training sampler; GRPOTrainer overrides
    # it to return a trl.trainer.utils.RepeatSampler over the dataset (None: train_dataset).
    def _get_train_sampler(self, dataset: Any = None) -> Any:
        sampler = super()._get_train_sampler(dataset)  # type: ignore[misc]
        return self.wrap_train_sampler(sampler, dataset if dataset is not None
                                       else self.train_dataset)  # type: ignore[attr-defined]


def repeat_sampler_layout(sampler: Any) -> tuple[int, int, int]:
    """``(batch_size, mini_repeat_count, repeat_count)`` of GRPOTrainer's sampler: it
    yields chunks of ``batch_size`` distinct dataset indices (one generation batch), each
    index ``mini_repeat_count`` times in a row (the group), and each chunk
    ``repeat_count`` times in a row (once per optimizer step that reads the generation:
    ``steps_per_generation * num_iterations``)."""
    # Relies on: the attributes trl.trainer.utils.RepeatSampler.__init__ stores, with the
    # order of indices its __iter__ yields (chunk by chunk, as described above).
    return sampler.batch_size, sampler.mini_repeat_count, sampler.repeat_count


def vllm_generate(trainer: Any, prompts: list[list[int]]) -> tuple[list[list[int]],
                                                                    list[list[float | None]]]:
    """One completion per prompt (token ids) from ``trainer``'s vLLM engine, with each
    sampled token's logprob (None where vLLM reports none)."""
    # Relies on: GRPOTrainer.vllm_generation (trl.generation.vllm_generation.VLLMGeneration,
    # set when args.use_vllm), whose generate(prompts, images, num_generations) returns
    # (prompt_ids, completion_ids, logprobs, logprob_token_ids) with logprobs[i][j] the list
    # of logprobs of token j, the sampled token's first. TRL keeps the engine's weights in
    # sync with the trained ones.
    _, completions, logprobs, _ = trainer.vllm_generation.generate(
        prompts=prompts, images=None, num_generations=1)
    return ([list(ids) for ids in completions],
            [[lp[0] if lp else None for lp in row] for row in logprobs])


def stop_token_ids(trainer: Any) -> set[int]:
    """The tokens that end a completion for ``trainer``."""
    # Relies on: GRPOTrainer.eos_token_ids, the tokenizer's eos token plus every eos id of
    # the model's generation_config, set in GRPOTrainer.__init__.
    return {int(t) for t in trainer.eos_token_ids}


def _expected_reward_warning(record: logging.LogRecord) -> bool:
    """Masked episodes report no reward on purpose (``masked/finish_reason`` counts them);
    TRL would print each one's whole conversation as a warning."""
    return "All reward functions returned None" not in record.getMessage()


def quiet_expected_warnings() -> None:
    """Silence TRL's warnings about what agentgym does on purpose (idempotent)."""
    # Relies on: TRL_EXPERIMENTAL_SILENCE=1 silencing GRPOTrainer's warning that
    # rollout_func is experimental.
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # Relies on: the logger "trl.trainer.grpo_trainer" and the text of its warning for rows
    # whose reward functions all returned None (GRPOTrainer._calculate_rewards).
    logger = logging.getLogger("trl.trainer.grpo_trainer")
    if _expected_reward_warning not in logger.filters:
        logger.addFilter(_expected_reward_warning)
