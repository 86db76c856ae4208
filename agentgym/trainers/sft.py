"""Supervised fine-tuning on trajectories: the model's own tokens carry the loss, nothing else.

:func:`trajectory_dataset` turns trajectories into a pre-tokenized dataset with rows
``{"input_ids": prompt + completion, "completion_mask": [0] * len(prompt) + loss_mask}``.
Token-level trajectories (sampled by ``hf:``, ``openai:``, ``vllm:`` policies) are used as
recorded, so the trained tokens are the sampled tokens; text-level ones (``oracle``
demonstrations, chat APIs) are tokenized with
:func:`~agentgym.rollout.chat.tokenize_conversation`, exactly as the rollout loop would
have recorded them had the model written those turns. Environment tokens (tool results,
the template's glue) are mask 0 either way.

:func:`train_sft` runs TRL's ``SFTTrainer`` on such a dataset with
``completion_only_loss=True``: TRL turns the mask into labels (-100 wherever the mask is
0), so only mask-1 tokens carry loss. It trains, optionally resuming from the last
checkpoint in ``output_dir``, and saves the final model and tokenizer to
``output_dir/final``. This is the path every SFT stage takes: a trajectory file written by
``agentgym rollout ... --out FILE``, and rejection fine-tuning (:mod:`.rft`).

On a machine without CUDA the loss is computed from the model's plain logits instead of
TRL's fused LM head: that chunked kernel saves GPU memory on large vocabularies, but in
torch on a CPU it takes about half of a small model's step. Logits are computed only at
the positions where some row of the batch has a token with loss (``logits_to_keep``), not
over the prompts. The loss, and the logged ``entropy``, ``mean_token_accuracy`` and
``num_tokens``, are the same quantities.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import logging
import os
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.context import visible
from agentgym.core.errors import InvalidArgumentError
from agentgym.core.registry import build
from agentgym.rollout.chat import tokenize_conversation
from agentgym.rollout.models import load_tokenizer, source_folder
from agentgym.rollout.trajectory import Sample, Trajectory
from agentgym.trainers.trl_adapter import takes_logits_to_keep

__all__ = [
    "FINAL_DIR",
    "build_config",
    "checkpointing_setting",
    "run_and_save",
    "sft_trainer",
    "train_sft",
    "trajectory_dataset",
]

logger = logging.getLogger(__name__)

#: Where :func:`train_sft` saves the trained model and tokenizer, inside ``output_dir``.
FINAL_DIR = "final"


def trajectory_dataset(trajectories: Iterable[Trajectory], tokenizer: Any, *,
                       tool_schemas: bool = True, parser: Any = None) -> Any:
    """A ``datasets.Dataset`` of ``input_ids`` and ``completion_mask`` rows, one per
    trajectory that has at least one model token (others are skipped: nothing to learn).

    Args:
        trajectories: token-level ones are used as recorded; text-level ones (no
            ``completion_ids``) are tokenized from their ``messages`` and ``tools``.
        tokenizer: the tokenizer of the model to train (its chat template renders
            text-level trajectories).
        tool_schemas: render the recorded tool schemas into text-level prompts; pass the
            rollout's ``tool_schemas`` so that training sees the prompts the model will get.
        parser: the env's tool-call format (a parser id such as ``"xml"``, or a parser),
            used only where the chat template does not write ``tool_calls`` (see
            :func:`~agentgym.rollout.chat.tokenize_conversation`); default ``hermes``.

    Raises:
        ValueError: no trajectory has a model token, or a token-level trajectory holds ids
            outside ``tokenizer``'s vocabulary (it was sampled by another model).
    """
    import datasets

    if isinstance(parser, str):
        parser = build("parsers", parser)
    rows: dict[str, list[list[int]]] = {"input_ids": [], "completion_mask": []}
    seen = 0
    untooled = 0
    vocabulary = len(tokenizer)
    for trajectory in trajectories:
        seen += 1
        if trajectory.completion_ids:
            samples = _recorded_samples(trajectory, vocabulary)
        elif any(m.get("role") == "assistant" for m in trajectory.messages):
            if tool_schemas and not trajectory.tools and _calls_tools(trajectory.messages):
                untooled += 1
            schemas = trajectory.tools if tool_schemas else None
            samples = [tokenize_conversation(tokenizer, messages, schemas or None, parser,
                                             train_from=first)
                       for messages, first in _windows(trajectory)]
        else:
            continue
        for prompt, completion, mask, *_ in samples:
            if 1 not in mask:
                continue
            rows["input_ids"].append([*prompt, *completion])
            rows["completion_mask"].append([0] * len(prompt) + list(mask))
    if untooled:
        warnings.warn(
            f"{untooled} text-level trajectories call tools but record no tool schemas (files"
            " written before trajectories kept them): their prompts are rendered without the"
            " tools' descriptions. Re-run `agentgym rollout` to record them",
            stacklevel=2,
        )
    if not rows["input_ids"]:
        raise InvalidArgumentError(
            f"none of the {seen} trajectories has a model token to train on (each needs an"
            " assistant turn); pass finished episodes, e.g. from `agentgym rollout ENV"
            " --policy oracle -n N --out FILE.jsonl`"
        )
    return datasets.Dataset.from_dict(rows)


def _recorded_samples(trajectory: Trajectory, vocabulary: int) -> list[Sample]:
    """A token-level trajectory's samples, checked against the tokenizer's vocabulary."""
    samples = trajectory.samples()
    for sample in samples:
        if len(sample.loss_mask) != len(sample.completion_ids):
            raise InvalidArgumentError(
                f"trajectory {trajectory.task_id!r} (episode {trajectory.episode}) has"
                f" {len(sample.completion_ids)} completion ids but {len(sample.loss_mask)}"
                " loss-mask entries; the record is corrupt: regenerate it")
        top = max(sample.prompt_ids + sample.completion_ids)
        if top >= vocabulary:
            raise InvalidArgumentError(
                f"trajectory {trajectory.task_id!r} (episode {trajectory.episode}) holds"
                f" token id {top}, outside this tokenizer's vocabulary ({vocabulary}): it"
                " was sampled with another tokenizer. Train the model that sampled it, or"
                " collect trajectories with this model's policy")
    return samples


def _windows(trajectory: Trajectory) -> list[tuple[list[dict[str, Any]], int]]:
    """A text-level trajectory's samples as ``(messages shown, first trained message)``:
    one per context window its turns were played in (``Trajectory.windows``), as the
    rollout loop splits a token-level episode; the whole conversation when it had none.
    A window of replies only shows none of the agent's turns: each is its own sample."""
    messages = trajectory.messages
    if not trajectory.windows:
        return [(messages, 0)]
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if trajectory.context_replies_only:
        shown = [[*visible(messages[:turn], start, replies_only=True), messages[turn]]
                 for start, turn in zip(trajectory.windows, turns, strict=False)]
        return [(window, len(window) - 1) for window in shown]
    samples = []
    played = list(zip(trajectory.windows, turns, strict=False))
    for start, group in itertools.groupby(played, key=lambda pair: pair[0]):
        indices = [index for _, index in group]
        shown = visible(messages[: indices[-1] + 1], start)
        samples.append((shown, len(shown) - (indices[-1] + 1 - indices[0])))
    return samples


def _calls_tools(messages: Sequence[dict[str, Any]]) -> bool:
    return any(m.get("tool_calls") for m in messages if m.get("role") == "assistant")


def build_config(config_class: type, output_dir: str | os.PathLike, args: dict | None,
                 defaults: dict[str, Any] | None = None) -> Any:
    """``config_class(output_dir=..., **defaults, **args)`` (a TRL config such as
    ``SFTConfig``), with CPU settings when no GPU is present: ``use_cpu``, no bf16/fp16,
    no gradient checkpointing (it only slows small models down). ``report_to`` defaults to
    ``"none"``.

    Raises:
        ValueError: ``args`` names a field the config does not have (the message names
            the closest fields), or sets ``output_dir`` (pass it as its own argument).
    """
    import torch

    args = dict(args or {})
    fields = {f.name for f in dataclasses.fields(config_class) if f.init}
    for name in args:
        if name == "output_dir":
            raise InvalidArgumentError(
                "output_dir is set by the stage's output directory; remove it from the"
                f" {config_class.__name__} arguments"
            )
        if name not in fields:
            close = difflib.get_close_matches(name, sorted(fields), n=3, cutoff=0.6)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise InvalidArgumentError(
                f"unknown {config_class.__name__} field {name!r}.{hint} See the fields of"
                f" trl.{config_class.__name__} (and transformers.TrainingArguments)"
            )
    settings: dict[str, Any] = {"report_to": "none"}
    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        settings.update(use_cpu=True, bf16=False, fp16=False)
    settings.update(checkpointing_setting(config_class, args, enabled=not on_cpu))
    settings.update(defaults or {})
    settings.update(args)
    return config_class(output_dir=str(output_dir), **settings)


def checkpointing_setting(config_class: type, args: dict[str, Any], enabled: bool
                          ) -> dict[str, bool]:
    """Activation (gradient) checkpointing for a TRL config, unless ``args`` set it:
    ``enabled`` (TRL's default, True, saves GPU memory; on a CPU it only slows small models
    down), under the field's current name. transformers 5 renamed ``gradient_checkpointing``
    to ``activation_checkpointing`` and warns whenever the old name alone is set, which
    TRL's configs do by default: setting the new name keeps every run quiet."""
    if {"gradient_checkpointing", "activation_checkpointing"} & set(args):
        return {}
    names = {f.name for f in dataclasses.fields(config_class)}
    name = ("activation_checkpointing" if "activation_checkpointing" in names
            else "gradient_checkpointing")
    return {name: enabled}


@functools.cache
def _trainer_class() -> type:
    from trl import SFTTrainer

    from agentgym.trainers.model_card import model_card
    from agentgym.trainers.trl_adapter import ModelCardHook

    class AgentSFTTrainer(ModelCardHook, SFTTrainer):
        """``SFTTrainer`` whose model card is agentgym's; ``kind`` (sft or rft) names the
        stage in it."""

        def __init__(self, *args: Any, kind: str = "sft", **kwargs: Any):
            self.kind = kind
            super().__init__(*args, **kwargs)

        def model_card(self) -> str:
            return model_card(kind=self.kind, base_model=self.model.config.name_or_path,
                              model_dir=Path(self.args.output_dir) / FINAL_DIR)

    return AgentSFTTrainer


@functools.cache
def _plain_loss_trainer_class() -> type:
    """The SFT trainer with :meth:`compute_loss` on the model's logits (see the module
    doc)."""
    import torch

    class PlainLossSFTTrainer(_trainer_class()):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            # Anything beyond a padded batch and the plain NLL (outputs, DFT, label smoothing,
            # packed or pre-shifted sequences, MoE aux loss) takes TRL's own path.
            if (return_outputs or self.args.loss_type != "nll" or self.label_smoother is not None
                    or "attention_mask" not in inputs or "shift_labels" in inputs
                    or getattr(self, "aux_loss_enabled", False)):
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            labels = inputs["labels"][:, 1:]
            forward = {k: v for k, v in inputs.items() if k != "labels"}
            if takes_logits_to_keep(model):
                # Logits only where some row's next token carries loss: the LM head is a
                # large share of a small model's step, and prompts carry none.
                keep = (labels != -100).any(0).nonzero().squeeze(-1)
                logits = model(**forward, use_cache=False, logits_to_keep=keep).logits.float()
                labels = labels[:, keep]
            else:
                logits = model(**forward, use_cache=False).logits[:, :-1].float()
            mask = labels != -100
            log_probs = torch.log_softmax(logits[mask], dim=-1)
            targets = labels[mask]
            token_log_probs = log_probs.gather(-1, targets[:, None]).squeeze(-1)
            count = mask.sum() if num_items_in_batch is None else num_items_in_batch
            loss = -token_log_probs.sum() / torch.as_tensor(count).clamp(min=1)
            with torch.no_grad():
                valid = max(int(mask.sum()), 1)
                entropy = -(log_probs.exp() * log_probs).sum(-1).sum() / valid
                correct = (log_probs.argmax(-1) == targets).sum() / valid
            metrics = self._metrics["train" if model.training else "eval"]
            metrics["entropy"].append(float(entropy))
            metrics["mean_token_accuracy"].append(float(correct))
            if model.training:
                self._total_train_tokens += int(inputs["attention_mask"].sum())
                metrics["num_tokens"] = [self._total_train_tokens]
            return loss

    return PlainLossSFTTrainer


def sft_trainer(model: Any, dataset: Any, *, output_dir: str | os.PathLike,
                args: dict | None = None, tokenizer: Any = None, callbacks: Sequence[Any] = (),
                kind: str = "sft", console: Any = None) -> Any:
    """The ``trl.SFTTrainer`` :func:`train_sft` runs, built but not yet trained: its logs
    are lines on ``console`` (:mod:`agentgym.trainers.console`), its model card agentgym's,
    naming the stage ``kind`` (sft, rft)."""
    from trl import SFTConfig

    from agentgym.trainers.console import StepLines
    from agentgym.trainers.trl_adapter import use_console_callback

    if (args or {}).get("completion_only_loss") is False:
        raise InvalidArgumentError(
            "completion_only_loss=False would train on environment tokens (tool results,"
            " prompts); SFT on trajectories trains the model's tokens only: remove it"
        )
    config = build_config(SFTConfig, output_dir, args, {"completion_only_loss": True})
    check_lengths(dataset, config.max_length, getattr(config, "truncation_mode", "keep_start"))
    if tokenizer is None:
        loaded_from = model if isinstance(model, (str, os.PathLike)) else source_folder(model)
        tokenizer = load_tokenizer(loaded_from)
    elif isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer)
    if isinstance(model, os.PathLike):
        model = str(model)
    import torch

    trainer_class = _trainer_class() if torch.cuda.is_available() else _plain_loss_trainer_class()
    trainer = trainer_class(model=model, args=config, train_dataset=dataset,
                            processing_class=tokenizer, callbacks=list(callbacks), kind=kind)
    use_console_callback(trainer, StepLines(kind, console))
    return trainer


def check_lengths(dataset: Any, max_length: int | None, truncation_mode: str = "keep_start"
                  ) -> None:
    """Say what ``max_length`` (``SFTConfig``'s: TRL cuts each row there, keeping its start
    or, with ``truncation_mode="keep_end"``, its end, and drops a row left with no model
    token) does to ``dataset``: an error when it leaves no row to train on, a warning naming
    how many rows it cuts."""
    import datasets
    import pyarrow.compute

    if (max_length is None or not isinstance(dataset, datasets.Dataset)
            or "completion_mask" not in dataset.column_names):
        return

    # Lengths from the Arrow column; only the rows that are cut are read into Python.
    lengths = pyarrow.compute.list_value_length(
        dataset.data.column("completion_mask")).to_pylist()
    long = [row for row, length in enumerate(lengths) if length > max_length]
    if not long:
        return
    kept = slice(-max_length, None) if truncation_mode == "keep_end" else slice(max_length)
    lost = sum(1 not in mask[kept] for mask in dataset.select(long)["completion_mask"])
    fix = (f"raise the stage's max_length to {max(lengths)} (the longest row; in `agentgym"
           " train` it defaults to rollout.max_total_tokens), or shorten the episodes")
    if lost == len(lengths):
        raise InvalidArgumentError(
            f"every one of the {len(lengths)} rows to train on has its model tokens past"
            f" max_length={max_length} tokens (its prompt alone is longer), so nothing would"
            f" be trained: {fix}")
    warnings.warn(f"{len(long)} of the {len(lengths)} rows to train on are longer than"
                  f" max_length={max_length} tokens and are cut there ({lost} of them keep no"
                  f" model token and are left out): {fix}", stacklevel=3)


def run_and_save(trainer: Any, resume: bool = False) -> Any:
    """Train ``trainer`` (from its last checkpoint when ``resume`` and one exists), then
    save the model and tokenizer to ``output_dir/final``. Returns the trainer."""
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(trainer.args.output_dir)
    checkpoint = None
    if resume and output_dir.is_dir():
        checkpoint = get_last_checkpoint(str(output_dir))
    if resume and checkpoint is None:
        logger.info("no checkpoint in %s to resume from: training from the start", output_dir)
    trainer.train(resume_from_checkpoint=checkpoint)
    final = output_dir / FINAL_DIR
    trainer.save_model(str(final))
    if trainer.processing_class is not None:
        trainer.processing_class.save_pretrained(str(final))
    (final / "README.md").write_text(trainer.model_card(), encoding="utf-8")
    return trainer


def train_sft(model: Any, dataset: Any, *, output_dir: str | os.PathLike,
              args: dict | None = None, tokenizer: Any = None, resume: bool = False,
              callbacks: Sequence[Any] = (), console: Any = None) -> Any:
    """Fine-tune ``model`` on the mask-1 tokens of ``dataset`` with TRL's ``SFTTrainer``.

    Args:
        model: a model folder (``save_pretrained`` output) or a loaded ``PreTrainedModel``
            (trained in place).
        dataset: rows of ``input_ids`` and ``completion_mask`` (:func:`trajectory_dataset`).
        output_dir: checkpoints go here; the final model and tokenizer go to
            ``output_dir/final``.
        args: ``trl.SFTConfig`` fields (``max_steps``, ``learning_rate``, ``save_steps``,
            ``report_to``, ...). Defaults: TRL's, plus ``completion_only_loss=True``,
            ``report_to="none"``, and on a machine without CUDA ``use_cpu=True``,
            ``bf16=False``, ``fp16=False``, no activation (gradient) checkpointing.
        tokenizer: tokenizer object or folder; default: loaded from the model's folder.
        resume: continue from the last ``checkpoint-N`` in ``output_dir`` (global step,
            optimizer and scheduler included) when there is one.
        callbacks: ``transformers.TrainerCallback`` objects (logging, progress).
        console: the rich Console each logged step is a line on (default: standard error).

    Returns:
        The trained ``trl.SFTTrainer``.

    Raises:
        ValueError: an unknown ``args`` field (the message names the closest ones).
    """
    trainer = sft_trainer(model, dataset, output_dir=output_dir, args=args,
                          tokenizer=tokenizer, callbacks=callbacks, console=console)
    return run_and_save(trainer, resume=resume)
