"""Learning health of a GRPO run: per step, whether the policy is still learning.

:class:`~agentgym.trainers.grpo.AgentGRPOTrainer` measures, on every generation batch TRL
has scored (:func:`batch_metrics`, logged with TRL's metrics):

* ``episodes/in_loss``: the share of the batch's episodes with tokens in the loss (the
  rest were masked: dynamic sampling, finish reason, truncation).
* ``episodes/mean_length``: the mean number of model tokens in the loss of those episodes
  (null when there are none; TRL's ``completions/mean_length`` counts a masked episode as
  0 tokens long).
* ``advantage/mean_abs``, ``advantage/max``, ``advantage/min``: TRL's own advantages of
  those episodes, read from the batch TRL trains on rather than recomputed (with TRL's
  default ``scale_rewards="group"``, which agentgym keeps: reward minus the group's mean,
  over the group's std + 1e-4).
* ``kl/ref`` (:class:`ReferenceKL`): how far the policy has moved from the stage's
  starting model, measured whatever ``beta`` is.

A gradient that is not finite (NaN or inf) never reaches the weights
(:class:`SkipNonFiniteSteps`): its optimizer step is skipped, counted
(``health/skipped_steps``, over the stage) and warned of. Clipping would scale every
gradient by a NaN norm, the weights would all turn NaN, and every later episode would be
sampled from them (seen once in the first four asynchronous GRPO runs of SmolLM2 on an
H200: the engine's sampling then failed on NaN probabilities and ended the run).

The rollout logs the group shares (``dynamic_sampling/flat_fraction``,
``groups/with_variance``, ``groups/identical``; see :mod:`agentgym.trainers.grpo`), TRL its
``entropy`` and ``clip_ratio/*``. :class:`LearningHealth` reads each log and warns, on the
``agentgym.trainers.health`` logger, when no group has carried a learning signal, the
policy looks collapsed, or it has drifted far from its starting model, for several logged
steps in a row. Steps without these keys (no
generation in them) leave the counts as they are.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import TrainerCallback

from agentgym.trainers.trl_adapter import (
    ScoredBatch,
    adapters_disabled,
    completion_logps,
    frozen_copy,
    is_peft_trainer,
    log_metrics,
)

__all__ = ["LearningHealth", "ReferenceKL", "SkipNonFiniteSteps", "batch_metrics", "k3_kl"]

logger = logging.getLogger(__name__)

#: Rows of a batch :class:`ReferenceKL` scores when it needs a forward pass of its own.
KL_SAMPLE_ROWS = 64


def k3_kl(logps: Any, reference_logps: Any, mask: Any) -> float:
    """Mean over the tokens where ``mask`` is 1 of Schulman's k3 estimate of
    KL(policy || reference): ``exp(r) - r - 1`` with ``r = reference_logp - logp``, for
    tokens sampled from the policy."""
    ratio = (reference_logps.double() - logps.double())
    per_token = ratio.exp() - ratio - 1
    mask = mask.double()
    return float((per_token * mask).sum() / mask.sum().clamp(min=1))


class ReferenceKL:
    """``kl/ref``: the KL divergence of the policy from the stage's starting model (the SFT
    model when GRPO follows SFT), on the sampled model tokens of the episodes in the loss.

    The reference, cheapest first: TRL's own reference log-probs when it computes them
    (``beta != 0``); for LoRA, the trained model with its adapters disabled; otherwise a
    frozen copy of the weights, taken here, when the trainer is built: before any update,
    and before ``--resume`` loads a checkpoint's weights, so it is the stage's start then
    too. Under DeepSpeed or FSDP without ``beta`` nothing is measured (a warning says so).

    The estimate is k3 (:func:`k3_kl`) rather than k1 (``logp - logp_ref``): both are
    unbiased, but k3 is never negative per token and has far lower variance, so a batch of a
    few hundred tokens gives a usable number (a k1 mean is often negative); it is also what
    TRL's ``kl`` uses when ``beta != 0``, so the two agree. Both log-probs are scored the way
    TRL scores its loss (at its ``temperature``, which agentgym ties to the sampling
    temperature, so the sampled tokens are draws from the distribution measured). The
    policy's are TRL's when it computed them (with vLLM, for importance sampling), otherwise
    one forward pass here: the rollout's own logprobs come from the sampler (vLLM, whose
    numerics differ from the trainer's by about as much as an early-training KL, or a
    scripted policy), not from the trained model.

    Forward passes here score at most :data:`KL_SAMPLE_ROWS` rows of the batch, drawn at
    random: the mean over a few thousand tokens is as good a health reading as over all of
    them, and scoring every row took a quarter of each step of a memory-env GRPO run (265
    rows of up to 700 tokens on 2 CPU cores).
    """

    def __init__(self, trainer: Any):
        self.copy: Any = None
        self.reason: str | None = None
        if trainer.args.beta == 0.0 and not is_peft_trainer(trainer):
            self.copy = frozen_copy(trainer)
            if self.copy is None:
                self.reason = ("kl/ref is not measured: training is sharded (DeepSpeed/FSDP)"
                               " and a plain copy of the model would copy shards; set"
                               " beta > 0 to have TRL keep a reference model (its `kl` and"
                               " kl/ref are then logged), or measure_kl: false")
                logger.warning(self.reason)

    def measure(self, trainer: Any, batch: ScoredBatch, rows: Any) -> float | None:
        """``kl/ref`` over the episodes ``rows`` of ``batch`` (None: not measured)."""
        if self.reason is not None:
            return None
        needs_forward = batch.policy_logps is None or batch.reference_logps is None
        rows = torch.as_tensor(rows)
        if rows.dtype == torch.bool:
            rows = rows.nonzero().flatten()
        if needs_forward and len(rows) > KL_SAMPLE_ROWS:
            generator = torch.Generator().manual_seed(trainer.state.global_step)
            chosen = torch.randperm(len(rows), generator=generator)[:KL_SAMPLE_ROWS]
            rows = rows[chosen.sort().values.to(rows.device)]
        if batch.policy_logps is not None:
            logps = batch.policy_logps[rows]
        else:
            logps = completion_logps(trainer, batch, rows)
        if batch.reference_logps is not None:
            reference = batch.reference_logps[rows]
        elif self.copy is not None:
            reference = completion_logps(trainer, batch, rows, model=self.copy)
        else:
            with adapters_disabled(trainer):
                reference = completion_logps(trainer, batch, rows)
        return k3_kl(logps, reference, batch.loss_mask[rows])


def batch_metrics(trainer: Any, batch: ScoredBatch,
                  kl: ReferenceKL | None = None) -> dict[str, float]:
    """``episodes/in_loss``, ``episodes/mean_length`` and, when any episode is in the loss,
    ``advantage/*`` and (with ``kl``) ``kl/ref`` of one scored generation batch."""
    lengths = batch.loss_mask.sum(dim=1)
    rows = lengths > 0
    metrics = {"episodes/in_loss": float(rows.float().mean()),
               # NaN, logged as null: no episode trained, no length (not a length of 0)
               "episodes/mean_length": float(lengths[rows].float().mean()) if bool(rows.any())
               else float("nan")}
    if not bool(rows.any()):
        return metrics
    advantages = batch.advantages[rows].float()
    metrics.update({"advantage/mean_abs": float(advantages.abs().mean()),
                    "advantage/max": float(advantages.max()),
                    "advantage/min": float(advantages.min())})
    if kl is not None:
        value = kl.measure(trainer, batch, rows)
        if value is not None:
            metrics["kl/ref"] = value
    return metrics


class LearningHealth(TrainerCallback):
    """Warns when a GRPO run stops learning, from the metrics of each log.

    * No signal: ``groups/with_variance`` is 0 (every group's rewards were equal, so every
      advantage is 0) for ``after_steps`` logged steps in a row.
    * Collapse: ``groups/identical`` is 1 (every group's episodes were the same tokens), or
      TRL's ``entropy`` is below ``min_entropy`` on a step that trained some tokens while
      under a quarter of its groups had reward variance, for ``after_steps`` logged steps
      in a row. (Low entropy alone is no collapse: a small model sure of its format
      samples at 0.01-0.03 nats a token, and its groups still vary where it is unsure.)
    * Drift: ``kl/ref`` is at least ``max_kl`` for ``after_steps`` logged steps in a row.
      A run that learns moves its policy a little (``kl/ref`` up to 0.06 in the recipes'
      GRPO stages); the runs that drifted to 0.25 and beyond lost on held-out tasks, their
      tool calls breaking more often as they went (docs/results.md). Steps that log no
      ``kl/ref`` (no generation in them) leave the count as it is.

    Each warning repeats every ``after_steps`` steps while the condition lasts;
    ``after_steps=0`` turns them off. ``dynamic_sampling`` tailors the advice.
    """

    #: Below this share of groups with reward variance, low entropy counts as collapse.
    COLLAPSED_VARIANCE = 0.25

    def __init__(self, after_steps: int = 3, min_entropy: float = 0.02,
                 dynamic_sampling: bool = True, max_kl: float = 0.2):
        self.after_steps, self.min_entropy = after_steps, min_entropy
        self.dynamic_sampling, self.max_kl = dynamic_sampling, max_kl
        self.flat_steps = self.collapsed_steps = self.drift_steps = 0
        self.first: dict[str, float] = {}  # the stage's first logged pass rate, tool errors

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kwargs: Any) -> None:
        logs = logs or {}
        with_variance = _number(logs.get("groups/with_variance"))
        if with_variance is None or self.after_steps <= 0:
            return
        step = state.global_step
        self.flat_steps = self.flat_steps + 1 if with_variance == 0 else 0
        if self.flat_steps and self.flat_steps % self.after_steps == 0:
            logger.warning(self._no_signal(step, logs))
        reasons = []
        if _number(logs.get("groups/identical")) == 1:
            reasons.append("every group's episodes were identical")
        entropy = _number(logs.get("entropy"))
        if entropy is not None and (_number(logs.get("episodes/in_loss")) or 0) > 0 \
                and entropy < self.min_entropy and with_variance < self.COLLAPSED_VARIANCE:
            reasons.append(f"mean token entropy {entropy:.3g} < min_entropy {self.min_entropy},"
                           f" {with_variance:.0%} of the groups with reward variance")
        self.collapsed_steps = self.collapsed_steps + 1 if reasons else 0
        if self.collapsed_steps and self.collapsed_steps % self.after_steps == 0:
            logger.warning(
                f"GRPO step {step}: the policy looks collapsed for {self.collapsed_steps}"
                f" steps ({'; '.join(reasons)}): it samples one answer per task, so its groups"
                " carry no signal. Raise rollout.temperature, lower learning_rate, keep"
                " clip-higher (epsilon_high) on, or set beta > 0 to hold the policy near its"
                " starting model (kl/ref shows how far it has moved).")
        self._check_drift(step, logs)

    def _check_drift(self, step: int, logs: dict) -> None:
        for key in ("env/pass_rate", "env/tool_errors"):
            value = _number(logs.get(key))
            if value is not None:
                self.first.setdefault(key, value)
        kl = _number(logs.get("kl/ref"))
        if kl is None or self.max_kl <= 0:
            return
        self.drift_steps = self.drift_steps + 1 if kl >= self.max_kl else 0
        if not self.drift_steps or self.drift_steps % self.after_steps:
            return
        trend = "; ".join(
            f"{name} {_number(logs.get(key)):.2f} (first step {self.first[key]:.2f})"
            for key, name in (("env/pass_rate", "training pass rate"),
                              ("env/tool_errors", "tool errors per episode"))
            if key in self.first and _number(logs.get(key)) is not None)
        logger.warning(
            f"GRPO step {step}: the policy has drifted from the stage's starting model for"
            f" {self.drift_steps} steps (kl/ref {kl:.3g} >= max_kl {self.max_kl}"
            + (f"; {trend}" if trend else "") + "). Runs that moved this far lost on"
            " held-out tasks unless their training reward rose with it: the updates follow"
            " the noise of few groups. Lower learning_rate, set beta > 0 (a KL penalty toward"
            " the starting model), train fewer steps, or keep checkpoints (save_steps) to"
            " evaluate one from before the drift.")

    def _no_signal(self, step: int, logs: dict) -> str:
        message = (f"GRPO step {step}: no learning signal for {self.flat_steps} steps: in every"
                   " group all episodes got the same reward (or were masked), so every"
                   " advantage is 0.")
        pass_rate = _number(logs.get("env/pass_rate"))
        finishes = {key.removeprefix("env/finish/"): _number(value) or 0.0
                    for key, value in logs.items() if key.startswith("env/finish/")}
        if _number(logs.get("masked/finish_reason")) == 1 and finishes:
            reason = max(finishes, key=finishes.__getitem__)
            message += (f" Every episode was masked by its finish reason (mostly {reason!r}):"
                        " give episodes room (rollout.max_total_tokens, max_tokens, the env's"
                        " turn limit), or teach the env's tool format with an sft stage first.")
        elif pass_rate == 0:
            message += (" Every episode failed: use easier tasks, or warm the model up with an"
                        " sft or rft stage first.")
        elif pass_rate == 1:
            message += " Every episode passed: use harder tasks."
        message += (" Sample more diversely (raise rollout.temperature), play more attempts"
                    " per task (num_generations)")
        if self.dynamic_sampling:
            return message + (", or draw more replacement groups (options.max_resample_rounds).")
        return message + (", or turn on options.dynamic_sampling (flat groups are replaced by"
                          " groups of other tasks).")


class SkipNonFiniteSteps(TrainerCallback):
    """Skips an optimizer step whose gradient is not finite: just before the step (after
    clipping), if any gradient holds a NaN or an inf, every gradient is dropped, so the
    optimizer leaves the weights (and its moments) as they were. Each skip is warned of,
    and the step's log gets ``health/skipped_steps`` (the stage's skips so far)."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self.skipped = 0

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any
                              ) -> None:
        import torch

        model = self.trainer.model
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        # One read-back for the whole model: the sum of every gradient's sum is finite
        # exactly when each of them is (clipped gradients cannot overflow it). The sums are
        # gathered on one device: a model split over several GPUs has gradients on each.
        device = grads[0].device if grads else None
        if not grads or bool(torch.isfinite(
                torch.stack([g.float().sum().to(device) for g in grads]).sum())):
            return
        for parameter in model.parameters():
            parameter.grad = None
        self.skipped += 1
        log_metrics(self.trainer, {"health/skipped_steps": float(self.skipped)})
        logger.warning(
            f"GRPO step {state.global_step + 1}: the gradient was not finite (NaN or inf), so"
            " this optimizer step was skipped and the weights kept (skipped so far:"
            f" {self.skipped}). If it recurs, lower learning_rate and keep max_grad_norm on.")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
