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
* :func:`steps_per_generation_batch`: how often TRL calls the ``rollout_func``.
* :func:`vllm_generate`, :func:`stop_token_ids`: sample with TRL's vLLM engine.
* :func:`quiet_expected_warnings`: silence what TRL says about agentgym's intended use,
  and the deprecation TRL's own code trips in transformers.
* :func:`use_console_callback`: print each log as agentgym's line instead of
  transformers' dict.
* :class:`ModelCardHook`: the model card written beside checkpoints is agentgym's.
* :class:`ScoredBatchHook`, :class:`ScoredBatch`: see each generation batch TRL has scored
  (its advantages, its loss mask) before it trains on it, and add rows to it
  (:class:`ExtraRow`, :func:`append_rows`: an episode of several samples), and leave out
  the rows that cannot move the weights (:func:`drop_inert_rows`).
* :class:`PlainLogpsOffGPU`: without CUDA, score completions from the model's logits at
  the completion positions rather than TRL's fused LM head over every position, rows
  grouped by length (:func:`length_groups`) rather than all at the batch's width.
* :func:`completion_logps`, :func:`is_peft_trainer`, :func:`adapters_disabled`,
  :func:`frozen_copy`: score a batch's completion tokens as TRL does, under the trained
  model, its base (LoRA) or a copy.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ExtraRow", "LengthGroup", "ModelCardHook", "PlainLogpsOffGPU", "ScoredBatch",
           "ScoredBatchHook", "TrainSamplerHook", "adapters_disabled", "append_rows",
           "completion_logps", "drop_inert_rows", "forward_takes", "frozen_copy",
           "is_peft_trainer", "length_groups", "log_metrics", "quiet_expected_warnings",
           "repeat_sampler_layout", "steps_per_generation_batch", "stop_token_ids",
           "takes_logits_to_keep", "use_console_callback", "vllm_generate"]


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


def steps_per_generation_batch(args: Any) -> int:
    """Optimizer steps between two calls of the ``rollout_func`` under ``GRPOConfig``
    ``args`` (at least 1): each call's generation batch is trained on for that many."""
    # Relies on: GRPOTrainer._prepare_inputs generating a new batch (one rollout_func call)
    # every steps_per_generation * num_iterations micro-batches, and transformers' Trainer
    # stepping the optimizer every gradient_accumulation_steps micro-batches;
    # GRPOConfig.__post_init__ fills steps_per_generation (default:
    # gradient_accumulation_steps).
    return max(1, args.steps_per_generation * args.num_iterations
               // args.gradient_accumulation_steps)


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
    # Relies on: trl.models.utils reading model.is_gradient_checkpointing around every
    # generation and no-grad pass, a property transformers 5.24 deprecates with this
    # FutureWarning (TRL's code, nothing a user can change; the message is matched exactly).
    warnings.filterwarnings("ignore", message=_TRL_DEPRECATED_PROPERTY,
                            category=FutureWarning)


_TRL_DEPRECATED_PROPERTY = r"`is_gradient_checkpointing` is deprecated"


def use_console_callback(trainer: Any, callback: Any) -> None:
    """Make ``callback`` the one that shows ``trainer``'s logs on the console, instead of
    transformers' progress bar that writes each log under it as a dict (or its plain
    printer of the dict)."""
    from transformers import trainer as trainer_module
    from transformers.trainer_callback import PrinterCallback

    # Relies on: Trainer.__init__ adding one console callback: PrinterCallback when
    # args.disable_tqdm, else transformers.trainer.DEFAULT_PROGRESS_CALLBACK (ProgressCallback,
    # NotebookProgressCallback in a notebook); remove_callback(cls) removes an instance of cls.
    for printer in (PrinterCallback, trainer_module.DEFAULT_PROGRESS_CALLBACK):
        trainer.remove_callback(printer)
    trainer.add_callback(callback)


class ModelCardHook:
    """Mixin for a TRL trainer subclass (listed before the trainer class): the model card
    (``README.md``) TRL writes into ``args.output_dir`` with each checkpoint is
    ``self.model_card()`` instead of TRL's hub template, which names a base model loaded
    from a folder as ``[None]``."""

    def model_card(self) -> str:
        raise NotImplementedError

    # Relies on: trl's BaseTrainer.create_model_card(model_name=None, dataset_name=None,
    # tags=None), which each TRL trainer's _save_checkpoint calls to write README.md into
    # args.output_dir; Trainer.is_world_process_zero().
    def create_model_card(self, model_name: str | None = None, dataset_name: str | None = None,
                          tags: Any = None) -> None:
        if self.is_world_process_zero():  # type: ignore[attr-defined]
            path = Path(self.args.output_dir) / "README.md"  # type: ignore[attr-defined]
            path.write_text(self.model_card(), encoding="utf-8")


@dataclass
class ScoredBatch:
    """One generation batch as TRL trains on it (this process's rows, ``B`` episodes).

    Args:
        input_ids, attention_mask: ``(B, P + C)``: the left-padded prompts, then the
            right-padded completions (``C`` = ``logits_to_keep`` positions).
        logits_to_keep: ``C``, the completion positions TRL scores.
        loss_mask: ``(B, C)``, 1 for the tokens in the loss: model tokens (``env_mask``) of
            completions TRL did not mask (truncated ones are, with
            ``mask_truncated_completions``).
        advantages: ``(B,)``, TRL's advantage of each episode.
        policy_logps: ``(B, C)`` log-probs of the completion tokens under the weights
            being trained (before this batch's update), when TRL computed them (importance
            sampling: vLLM), else None.
        sampling_logps: ``(B, C)`` log-probs the sampler reported for the completion tokens
            (the rollout's ``logprobs``; NaN where unknown), else None.
        reference_logps: ``(B, C)``, under TRL's reference model when it keeps one
            (``beta != 0``), else None.
    """

    input_ids: Any
    attention_mask: Any
    logits_to_keep: int
    loss_mask: Any
    advantages: Any
    policy_logps: Any = None
    sampling_logps: Any = None
    reference_logps: Any = None


@dataclass
class ExtraRow:
    """One more training row for an episode whose first row TRL has scored: a further
    sample of an episode that has several (an agent program that rewrote its history).

    Args:
        source: the index, in the generation batch, of the episode's row; the extra row
            takes its advantage.
        prompt_ids, completion_ids: the sample, split before its first sampled token.
        loss_mask: per completion token, 1 where the policy sampled it.
        logprobs: per completion token, its sampling log-probability; None when unknown.
        advantage: its own advantage; None: row ``source``'s.
    """

    source: int
    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float] | None = None
    advantage: float | None = None


class ScoredBatchHook:
    """Mixin for a ``GRPOTrainer`` subclass: every generation batch TRL has scored
    (rewards, advantages) gets the rows ``self.extra_rows()`` returns (:func:`append_rows`)
    and then passes through ``self.on_scored_batch(batch)``, a :class:`ScoredBatch`, before
    the optimizer steps that train on it (list it before the trainer class, as
    :class:`TrainSamplerHook`)."""

    def on_scored_batch(self, batch: ScoredBatch) -> None:
        pass

    def extra_rows(self) -> list[ExtraRow]:
        """Rows to add to the batch just scored (default: none)."""
        return []

    def row_advantages(self) -> list[float | None] | None:
        """Per row of the batch just scored, an advantage to train it with instead of
        TRL's (None in the list: TRL's), or None for TRL's throughout (the default)."""
        return None

    def shape_advantages(self, advantages: Any) -> Any:
        """The batch's advantages (``(B,)``, the extra rows' included) as trained on
        (default: as they are)."""
        return advantages

    def token_weights(self, batch: ScoredBatch) -> Any:
        """``(B, C)`` positive weights of each completion token's advantage (importance
        weights), or None for none. A weight ``w`` scales the token's clipped surrogate
        exactly: ``min(r A w, clip(r) A w) = w min(r A, clip(r) A)`` for ``w > 0``."""
        return None

    # Relies on: GRPOTrainer._generate_and_score_completions(inputs), called once per
    # generation batch (from _prepare_inputs) before training on it, returning a dict with
    # prompt_ids / prompt_mask (B, P, left-padded), completion_ids / completion_mask (B, C,
    # right-padded; completion_mask zeroed for truncated completions when
    # mask_truncated_completions), tool_mask (B, C; present when rollout_func returned
    # env_mask), advantages (B,) and, when TRL computed them, old_per_token_logps (the
    # sampling weights' log-probs: importance sampling) and ref_per_token_logps (beta != 0);
    # sampling_per_token_logps (B, C) when rollout_func returned logprobs. Its loss
    # (GRPOTrainer._compute_loss) takes advantages of shape (B,) or (B, C).
    def _generate_and_score_completions(self, inputs: Any) -> Any:
        import torch

        output = super()._generate_and_score_completions(inputs)  # type: ignore[misc]
        if self.model.training:  # type: ignore[attr-defined]
            own = self.row_advantages()
            if own is not None:
                output["advantages"] = torch.tensor(
                    [float(a) if o is None else o
                     for a, o in zip(output["advantages"].tolist(), own, strict=True)],
                    dtype=output["advantages"].dtype, device=output["advantages"].device)
            output = append_rows(self, output, self.extra_rows())
            output["advantages"] = self.shape_advantages(output["advantages"])
        loss_mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            loss_mask = loss_mask * output["tool_mask"]
        batch = ScoredBatch(
            input_ids=torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1),
            attention_mask=torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1),
            logits_to_keep=output["completion_ids"].size(1), loss_mask=loss_mask,
            advantages=output["advantages"], policy_logps=output.get("old_per_token_logps"),
            sampling_logps=output.get("sampling_per_token_logps"),
            reference_logps=output.get("ref_per_token_logps"))
        self.on_scored_batch(batch)
        weights = self.token_weights(batch)
        if weights is not None:
            # TRL's loss takes (B, T) advantages as they are (it unsqueezes (B,) ones).
            output["advantages"] = output["advantages"].reshape(-1, 1) * weights
        if self.model.training:  # type: ignore[attr-defined]
            output = drop_inert_rows(self, output)
        return output


def append_rows(trainer: Any, output: dict[str, Any], rows: list[ExtraRow]) -> dict[str, Any]:
    """``output`` (what ``GRPOTrainer._generate_and_score_completions`` returned) with
    ``rows`` added, scored as TRL scores its own: each takes its source row's advantage,
    its ``old_per_token_logps`` (and ``ref_per_token_logps``) are computed now under the
    trained (reference) weights when TRL keeps them, its sampling log-probs are its own,
    and ``num_items_in_batch`` counts its tokens. Every tensor is padded again to the
    widest row (prompts on the left, completions on the right). Rows with no token in the
    loss are left out; inert rows (copies with nothing in the loss) are added so that the
    batch still splits into ``steps_per_generation`` equal parts."""
    import torch

    rows = [r for r in rows if any(r.loss_mask)]
    if not rows:
        return output
    # Relies on: the output keys listed at ScoredBatchHook._generate_and_score_completions,
    # importance_sampling_ratio (B, C) when TRL corrects vLLM's sampling, advantages (B,)
    # here (before any token weights), num_items_in_batch (the loss mask's sum over all
    # processes), GRPOTrainer._tokenizer (its pad token pads, as TRL's own padding does),
    # .ref_model (None with beta == 0 or peft) and args.steps_per_generation
    # (_prepare_inputs splits the batch into that many parts, dropping any remainder).
    if "importance_sampling_ratio" in output:
        logging.getLogger(__name__).warning(
            "%d further samples of multi-sample episodes were not trained on: TRL's vLLM"
            " importance-sampling correction does not extend to added rows", len(rows))
        return output
    device = output["prompt_ids"].device
    pad = trainer._tokenizer.pad_token_id
    if pad is None:
        pad = trainer._tokenizer.eos_token_id
    steps = max(1, trainer.args.steps_per_generation)
    while (len(output["prompt_ids"]) + len(rows)) % steps:  # inert: in no loss
        rows.append(ExtraRow(rows[-1].source, rows[-1].prompt_ids, rows[-1].completion_ids,
                             [0] * len(rows[-1].completion_ids), rows[-1].logprobs))
    width_p = max(output["prompt_ids"].size(1), *(len(r.prompt_ids) for r in rows))
    width_c = max(output["completion_ids"].size(1), *(len(r.completion_ids) for r in rows))

    def left(t: Any, value: float) -> Any:
        return torch.nn.functional.pad(t, (width_p - t.size(1), 0), value=value)

    def right(t: Any, value: float) -> Any:
        return torch.nn.functional.pad(t, (0, width_c - t.size(1)), value=value)

    def tensor(values: list[Any], dtype: Any) -> Any:
        return torch.tensor(values, dtype=dtype, device=device)

    new = {
        "prompt_ids": torch.stack([left(tensor([r.prompt_ids], torch.long), pad)[0]
                                   for r in rows]),
        "prompt_mask": torch.stack([left(tensor([[1] * len(r.prompt_ids)], torch.long), 0)[0]
                                    for r in rows]),
        "completion_ids": torch.stack([right(tensor([r.completion_ids], torch.long), pad)[0]
                                       for r in rows]),
        "completion_mask": torch.stack([
            right(tensor([[1] * len(r.completion_ids)], torch.long), 0)[0] for r in rows]),
        "tool_mask": torch.stack([right(tensor([r.loss_mask], torch.long), 0)[0]
                                  for r in rows]),
    }
    merged = {key: torch.cat([(left if key.startswith("prompt") else right)(
        output[key] if key in output else torch.ones_like(output["completion_mask"]),
        pad if key.endswith("_ids") else 0), new[key]]) for key in new}
    advantages = output["advantages"]
    merged["advantages"] = torch.cat([advantages, torch.stack([
        advantages[r.source] if r.advantage is None else advantages.new_tensor(r.advantage)
        for r in rows])])
    batch = ScoredBatch(  # the new rows alone, as wide as the merged batch
        input_ids=torch.cat([merged["prompt_ids"][-len(rows):],
                             merged["completion_ids"][-len(rows):]], dim=1),
        attention_mask=torch.cat([merged["prompt_mask"][-len(rows):],
                                  merged["completion_mask"][-len(rows):]], dim=1),
        logits_to_keep=width_c, loss_mask=merged["tool_mask"][-len(rows):],
        advantages=merged["advantages"][-len(rows):])
    everything = torch.arange(len(rows), device=device)
    if "old_per_token_logps" in output:
        merged["old_per_token_logps"] = torch.cat([
            right(output["old_per_token_logps"], 0),
            completion_logps(trainer, batch, everything)])
    if "ref_per_token_logps" in output:
        if trainer.ref_model is None:  # peft: the reference is the model without adapters
            with adapters_disabled(trainer):
                reference = completion_logps(trainer, batch, everything)
        else:
            reference = completion_logps(trainer, batch, everything, model=trainer.ref_model)
        merged["ref_per_token_logps"] = torch.cat([right(output["ref_per_token_logps"], 0),
                                                   reference])
    if "sampling_per_token_logps" in output:
        sampled = torch.stack([right(tensor(
            [r.logprobs if r.logprobs is not None else [float("nan")] * len(r.completion_ids)],
            output["sampling_per_token_logps"].dtype), 0)[0] for r in rows])
        merged["sampling_per_token_logps"] = torch.cat(
            [right(output["sampling_per_token_logps"], 0), sampled])
    added = (new["completion_mask"] * new["tool_mask"]).sum()
    merged["num_items_in_batch"] = output["num_items_in_batch"] + \
        trainer.accelerator.gather(added).sum()
    return {**output, **merged}


#: Loss types whose loss is a sum over tokens divided by one normalizer for the whole
#: generation batch (its ``num_items_in_batch``): a row that adds 0 to the sum can be left out
#: and every optimizer step's gradient, summed over the generation batch, stays the same.
SUMMED_LOSSES = ("dapo", "cispo")


def drop_inert_rows(trainer: Any, output: dict[str, Any]) -> dict[str, Any]:
    """``output`` (a scored generation batch, as :func:`append_rows` takes it) without the
    rows whose every loss token has advantage 0: with no KL term (``beta == 0``) and a
    summed loss (:data:`SUMMED_LOSSES`) they add exactly nothing to the gradient, yet cost a
    forward and a backward pass in each of the ``num_iterations`` passes over the batch.
    Without dynamic sampling most rows are such (a group whose episodes all passed, or all
    failed), and with ``negative_scale: 0`` every failure is. ``num_items_in_batch`` keeps
    counting their tokens, so the loss of what is trained is scaled as before. Enough
    inert rows stay for the batch to split into ``steps_per_generation`` equal parts, at
    least one a part; TRL's per-step ``entropy`` and ``clip_ratio`` then describe the rows
    trained on. Logs ``rows/trained``, the fraction of the batch's rows kept."""
    import torch

    # Relies on: GRPOTrainer.beta, args.loss_type, args.top_entropy_quantile (the entropy
    # mask's quantile is taken over each step's rows, so leaving rows out would move it),
    # args.steps_per_generation, and the output keys listed at
    # ScoredBatchHook._generate_and_score_completions: per-row tensors and lists (first
    # dimension B) besides the scalar num_items_in_batch.
    args = trainer.args
    if (trainer.beta != 0.0 or args.loss_type not in SUMMED_LOSSES
            or args.top_entropy_quantile < 1.0):
        return output
    advantages = output["advantages"]
    rows = len(advantages)
    mask = output["completion_mask"]
    if output.get("tool_mask") is not None:
        mask = mask * output["tool_mask"]
    per_token = advantages if advantages.dim() == 2 else advantages.reshape(-1, 1)
    live = ((per_token != 0) & (mask > 0)).any(dim=1)
    steps = max(1, args.steps_per_generation)
    keep = min(rows, max(steps, -(-int(live.sum()) // steps) * steps))
    log_metrics(trainer, {"rows/trained": keep / rows})
    if keep == rows:
        return output
    # The inert rows kept to fill the parts: ones with tokens in the loss first, so TRL's
    # entropy is read on sampled tokens.
    tokens = mask.sum(dim=1) > 0
    order = torch.cat([live.nonzero().flatten(), (~live & tokens).nonzero().flatten(),
                       (~live & ~tokens).nonzero().flatten()])
    index = order[:keep].sort().values
    listed = index.tolist()
    return {key: value[index.to(value.device)] if torch.is_tensor(value) and value.dim() > 0
            and value.size(0) == rows
            else [value[i] for i in listed] if isinstance(value, list) and len(value) == rows
            else value for key, value in output.items()}


#: The most bytes of float32 logits :class:`PlainLogpsOffGPU` computes at once.
_PLAIN_LOGITS_BYTES = 512 * 2**20


class PlainLogpsOffGPU:
    """Mixin for a ``GRPOTrainer`` subclass (listed before it): on tensors off CUDA, the
    log-probs (and entropies) of completion tokens come from the model's own logits at the
    completion positions, through ``logits_to_keep``.

    TRL scores them with its fused LM head, which projects only the scored positions where
    Triton runs and every position elsewhere: on a CPU that is every prompt token too, the
    LM head is a large share of a small model's step, and an agent's prompts are long (a
    memory-env GRPO step of 265 rows spent 38% of its time in that kernel). The numbers are
    the same (a test compares them). Rows are scored in groups of similar length, each cut
    to the columns its rows attend (:func:`length_groups`): a batch comes padded to its
    longest prompt and longest completion, and an agent's rows vary several-fold. Positions
    are counted from each row's first token (``position_ids``), so cutting left padding moves
    none. Anything beyond plain text rows (images, MoE aux loss, a model whose forward takes
    no ``logits_to_keep``) takes TRL's path."""

    #: Rows whose attended spans differ by up to this factor share a forward pass
    #: (:func:`length_groups`; ``inf``: every row in one, at the batch's width).
    length_ratio: float = 1.5

    # Relies on: GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids,
    # attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
    # compute_aux_loss=False, **multimodal inputs) -> (logps, entropies or None, aux or None),
    # each (B, logits_to_keep), 0 where attention_mask is 0, logits divided by
    # self.temperature; add_fused_lm_head keeping the model's own forward (with
    # logits_to_keep) when fused_lm_head is not passed; self.accelerator.autocast().
    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any,
                                           attention_mask: Any, logits_to_keep: int,
                                           batch_size: int | None = None,
                                           compute_entropy: bool = False,
                                           compute_aux_loss: bool = False,
                                           **multimodal: Any) -> Any:
        import torch

        if (input_ids.is_cuda or compute_aux_loss or not takes_logits_to_keep(model)
                or any(value is not None for value in multimodal.values())):
            return super()._get_per_token_logps_and_entropies(  # type: ignore[misc]
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss,
                **multimodal)
        # Whole logits are materialised here: rows go through in chunks whose float32
        # logits stay within _PLAIN_LOGITS_BYTES (a large vocabulary on a CPU).
        head = getattr(getattr(model, "module", model), "get_output_embeddings", lambda: None)()
        vocab = head.weight.size(0) if head is not None else 1
        rows, width = input_ids.shape
        prompt_width = width - logits_to_keep
        all_logps = input_ids.new_zeros((rows, logits_to_keep), dtype=torch.float32)
        all_entropies = torch.zeros_like(all_logps) if compute_entropy else None
        positions = forward_takes(model, "position_ids")  # left padding can go
        for group in length_groups(attention_mask, prompt_width, trim_left=positions,
                                   ratio=self.length_ratio):
            ids, mask = input_ids[group.rows, group.start:group.end], \
                attention_mask[group.rows, group.start:group.end]
            keep = group.end - prompt_width  # the group's completion columns, at least 1
            fits = max(1, _PLAIN_LOGITS_BYTES // (4 * (keep + 1) * vocab))
            step = min(batch_size or len(ids), fits)
            for first in range(0, len(ids), step):
                chunk_ids, chunk_mask = ids[first:first + step], mask[first:first + step]
                extra = {"position_ids": (chunk_mask.cumsum(1) - 1).clamp(min=0)} \
                    if positions else {}
                with self.accelerator.autocast():  # type: ignore[attr-defined]
                    logits = model(input_ids=chunk_ids, attention_mask=chunk_mask,
                                   use_cache=False, logits_to_keep=keep + 1, **extra).logits
                log_probs = torch.log_softmax(
                    logits[:, :-1].float() / self.temperature,  # type: ignore[attr-defined]
                    dim=-1)
                padding = chunk_mask[:, -keep:] == 0
                targets = chunk_ids[:, -keep:]
                where = group.rows[first:first + step]
                all_logps[where, :keep] = log_probs.gather(-1, targets[..., None]) \
                    .squeeze(-1).masked_fill(padding, 0)
                if all_entropies is not None:
                    entropy = -(log_probs.exp() * log_probs).sum(-1)
                    all_entropies[where, :keep] = entropy.masked_fill(padding, 0)
        return all_logps, all_entropies, None


@dataclass
class LengthGroup:
    """Rows of a left-padded batch scored together, and the columns ``[start, end)`` that
    hold all their attended tokens."""

    rows: Any
    start: int
    end: int


def length_groups(attention_mask: Any, prompt_width: int, trim_left: bool = True,
                  ratio: float = 1.5) -> list[LengthGroup]:
    """The rows of a batch (``attention_mask`` ``(B, W)``: prompts left-padded to
    ``prompt_width``, then completions right-padded) in groups of similar length, each
    with the columns its rows need: from the first attended column of any of them (0
    without ``trim_left``) to the last, and at least one column past the prompt's end.

    A batch is padded to its longest prompt and its longest completion; an agent's rows
    vary (a memory env's windows run from 30 to 650 tokens), and a forward pass over the
    padding costs as much as over tokens. Sorted by attended span and cut where a span
    grows past ``ratio`` times its group's first, at most that share of a group's columns
    is padding."""
    import torch

    attended = attention_mask > 0
    width = attention_mask.size(1)
    columns = torch.arange(width, device=attention_mask.device)
    first = torch.where(attended, columns, width).min(dim=1).values.clamp(max=prompt_width - 1)
    # At least one completion column, padding or not: a group whose rows all completed
    # nothing still goes through the model, so the loss stays on the autograd graph (a step
    # of such rows trains nothing, but its backward must not fail).
    last = torch.where(attended, columns, -1).max(dim=1).values.clamp(min=prompt_width)
    if not trim_left:
        first = torch.zeros_like(first)
    span = last - first + 1
    order = span.argsort(stable=True).tolist()
    groups: list[list[int]] = []
    for row in order:
        if not groups or int(span[row]) > ratio * int(span[groups[-1][0]]):
            groups.append([])
        groups[-1].append(row)
    out = []
    for rows in groups:
        index = torch.tensor(sorted(rows), device=attention_mask.device)
        out.append(LengthGroup(index, int(first[index].min()), int(last[index].max()) + 1))
    return out


def forward_takes(model: Any, name: str) -> bool:
    """Whether ``model``'s forward takes the argument ``name`` (unwrapped from DDP or
    accelerate first)."""
    import inspect

    model = getattr(model, "module", model)
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def takes_logits_to_keep(model: Any) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (transformers' causal LMs do:
    an int keeps the last N positions, a 1-D tensor of positions keeps those)."""
    return forward_takes(model, "logits_to_keep")


def completion_logps(trainer: Any, batch: ScoredBatch, rows: Any, model: Any = None) -> Any:
    """``(len(rows), C)`` log-probs of ``batch``'s completion tokens in ``rows`` (a bool
    mask or indices) under ``model`` (default: the trained model), at the trainer's
    temperature, as TRL scores them for its loss; no gradient."""
    import torch
    from trl.models.utils import disable_gradient_checkpointing

    # Relies on: GRPOTrainer._get_per_token_logps_and_entropies(model, input_ids,
    # attention_mask, logits_to_keep, batch_size=...) -> (logps, entropies, aux_loss), which
    # calls model(..., fused_lm_head=True): the model must carry TRL's fused LM head
    # (trl.trainer.utils.add_fused_lm_head, added to trainer.model in GRPOTrainer.__init__;
    # a copy.deepcopy of that model keeps it, bound to the copy). TRL wraps its own no-grad
    # passes in trl.models.utils.disable_gradient_checkpointing(model, kwargs).
    model = trainer.model if model is None else model
    with torch.no_grad(), disable_gradient_checkpointing(
            trainer.model, trainer.args.gradient_checkpointing_kwargs):
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            model, batch.input_ids[rows], batch.attention_mask[rows], batch.logits_to_keep,
            batch_size=trainer.args.per_device_train_batch_size)
    return logps


def is_peft_trainer(trainer: Any) -> bool:
    """Whether ``trainer`` trains LoRA (peft) adapters over a frozen model."""
    from accelerate.utils import is_peft_model

    return is_peft_model(trainer.model)


@contextlib.contextmanager
def adapters_disabled(trainer: Any) -> Iterator[None]:
    """Inside, ``trainer.model`` (a peft model) computes as the model its adapters were
    added to."""
    from trl.trainer.utils import use_adapter

    # Relies on: trl.trainer.utils.use_adapter(model, adapter_name=None), which disables every
    # adapter (GRPOTrainer's own reference for a new adapter when beta != 0).
    with use_adapter(trainer.accelerator.unwrap_model(trainer.model), adapter_name=None):
        yield


def frozen_copy(trainer: Any) -> Any:
    """A frozen copy of ``trainer.model`` as it is now, that :func:`completion_logps` can
    score with; None when training is sharded (DeepSpeed, FSDP), where a plain copy would
    copy shards."""
    # Relies on: Trainer.is_deepspeed_enabled / is_fsdp_enabled, set in Trainer.__init__
    # (before the model is wrapped, so trainer.model is the whole model here).
    if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
        return None
    from trl.trainer.utils import add_fused_lm_head

    reference = copy.deepcopy(trainer.model)
    # Relies on: add_fused_lm_head(model, temperature, cast_lm_head_to_fp32, outputs)
    # setting the instance's ``forward`` to a closure that, without fused_lm_head=True,
    # calls the bound forward of the model it patched: a deep copy keeps that closure, so
    # the copy's plain forward would run the trained model. The copy gets a head of its own.
    reference.__dict__.pop("forward", None)
    add_fused_lm_head(reference, temperature=trainer.temperature,
                      cast_lm_head_to_fp32=trainer.args.cast_lm_head_to_fp32)
    reference.requires_grad_(False)
    return reference.eval()
