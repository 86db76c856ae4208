"""GRPO on any agentgym env: TRL's ``GRPOTrainer`` fed by the rollout pipeline.

TRL owns the optimisation (loss, clipping, advantages, logging, checkpoints); agentgym owns
the episodes. The training dataset's rows name tasks (``prompt`` is the task id). TRL calls
:class:`EnvRollout` (its ``rollout_func``) with each generation batch, every task already
repeated ``num_generations`` times; the rollout plays those multi-turn episodes through a
:class:`~agentgym.rollout.pipeline.RolloutPipeline` with the trainer's current weights
(transformers generation on the trainer's own model, or TRL's vLLM engine when
``use_vllm``) and returns, per episode, ``prompt_ids``, ``completion_ids`` (every turn and
every tool result after the prompt), ``logprobs`` and ``env_mask`` (1 for sampled tokens,
0 for what the environment wrote, so tool output gets no gradient). The env's reward
reaches TRL through the ``env_reward`` reward function.

DAPO options (the SWE RL recipe), with defaults set in :func:`grpo_config` and
:class:`GRPOOptions`:

* token-level loss ``loss_type="dapo"``; clip-higher ``epsilon_high=0.28``; no KL
  (``beta=0``); overlong masking ``mask_truncated_completions=True``.
* dynamic sampling: a group whose rewards are all equal has zero advantage and carries no
  signal. Within the same rollout call it is replaced by a group of another task (up to
  ``max_resample_rounds`` extra rounds); a group still flat after that is masked (its
  tokens leave the loss and its normaliser). The returned ``prompt_ids`` then differ from
  the ones TRL sent, the count stays the same.
* finish-reason masking: episodes that crashed, hit the context or time limit, or looped
  until the turn limit (``mask_finish_reasons``) carry no gradient and are left out of
  their group's baseline (their reward is reported as unscorable).

Prefetch: after a rollout call returns, the episodes of the next call are predicted from
the trainer's sampler and prepared in the background (envs reset, sandboxes started), so
setup cost hides behind the optimizer step as well as behind generation. A wrong
prediction costs nothing but the idle setup: the episodes are released.

Per step, besides TRL's own metrics, the trainer logs ``env/pass_rate``, ``env/turns``,
``env/tool_errors``, ``env/finish/<reason>`` (share of episodes), the wall seconds
``time/step_s`` (the whole step) and ``time/rollout_s`` (its rollout call), the per-stage
seconds ``time/{init,generate,tool,grade,queue}_s`` (summed over episodes;
``queue``: waiting for a slot), ``time/sandbox_s`` and ``time/idle_sandbox_s`` (envs held,
and held idle),
``dynamic_sampling/{replaced,masked}_groups``, ``masked/finish_reason``,
``prefetch/hits``, ``rollout/{episodes,sampled_tokens,tokens_per_s}`` (every episode
played in the call, replacement groups included, and the model tokens it sampled), and
``cost/{sandbox_s,generate_s}_per_useful_group`` (those episodes' sandbox and generation
seconds per group trained on that has reward variance). With agentgym's engine as the
policy (the default without vLLM), ``engine/{decode_steps,rows_per_decode,prefill_tokens,
reused_tokens}`` (since the last call: decode steps run, requests each ran on average,
prompt tokens prefilled and found in a slot's KV already), ``engine/busy_s`` and
``engine/busy_fraction`` (the seconds the engine spent in steps, and their share of the
wall time since the last call: on a GPU, what is not busy is the GPU idle for generation).

Asynchronous mode (``options.asynchronous``, ``async`` in a run config): episodes keep
playing while the trainer steps, each call takes the groups that are complete, and stale
tokens are corrected with truncated importance weights; see
:mod:`agentgym.trainers.async_grpo` (and its ``async/*`` and ``fairness/*`` metrics).

Learning health (see :mod:`agentgym.trainers.health`): the rollout measures, per call, the
shares of groups ``dynamic_sampling/flat_fraction`` (first-played groups without reward
variance among their scorable episodes, before any replacement), ``groups/with_variance``
(groups finally trained on that have it) and ``groups/identical`` (first-played groups
whose episodes all sampled the same tokens), and the count ``groups/count`` (groups
trained on); the
trainer adds ``episodes/in_loss``, ``episodes/mean_length``,
``advantage/{mean_abs,max,min}`` and ``kl/ref`` from the batch TRL scored, and warns when
no group carries signal, the policy looks collapsed, or it has drifted from its
starting model (``max_kl``) for ``warn_after_steps`` steps.

:func:`train_grpo` prints one line per logged step (:mod:`agentgym.trainers.console`) and
keeps ``log_rollouts`` groups of each rollout call in ``rollouts.jsonl`` in its
``output_dir`` (whole groups, as trained on; an episode's index over
:data:`EPISODES_PER_CALL` is the global step it was played at).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.loop_thread import LoopThread
from agentgym.core.policies import ClosablePolicy, Generation, Sampling
from agentgym.rollout.evaluate import STAGES
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.models import load_model_and_tokenizer
from agentgym.rollout.pipeline import Job, PipelineConfig, RolloutPipeline
from agentgym.rollout.policies.batching import BatchedPolicy
from agentgym.rollout.trajectory import Trajectory, TrajectoryWriter
from agentgym.trainers.async_grpo import (
    AsyncOptions,
    GroupProducer,
    TurnsTally,
    fairness,
    importance_weights,
    staleness_metrics,
)
from agentgym.trainers.console import StepLines
from agentgym.trainers.health import (
    LearningHealth,
    ReferenceKL,
    SkipNonFiniteSteps,
    batch_metrics,
)
from agentgym.trainers.layout import ROLLOUTS_FILE
from agentgym.trainers.model_card import model_card
from agentgym.trainers.sft import FINAL_DIR, checkpointing_setting
from agentgym.trainers.trl_adapter import (
    ExtraRow,
    ModelCardHook,
    PlainLogpsOffGPU,
    ScoredBatch,
    ScoredBatchHook,
    TrainSamplerHook,
    completion_logps,
    log_metrics,
    quiet_expected_warnings,
    repeat_sampler_layout,
    steps_per_generation_batch,
    stop_token_ids,
    use_console_callback,
    vllm_generate,
)

__all__ = ["EnvRollout", "GRPOOptions", "batch_advantages", "grpo_config", "train_grpo",
           "turn_advantages"]

logger = logging.getLogger(__name__)

#: Our defaults for TRL's GRPOConfig: DAPO, and a loop that reports every step.
GRPO_DEFAULTS: dict[str, Any] = {
    "loss_type": "dapo",
    "epsilon_high": 0.28,
    "beta": 0.0,
    "mask_truncated_completions": True,
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "logging_steps": 1,
    "save_steps": 50,
    "report_to": "none",
}

#: Asynchronous mode: the fairness of the groups trained on, written when the stage ends.
ASYNC_SUMMARY_FILE = "async_summary.json"

#: Episode indices of one rollout call live in their own block, so seeds never repeat:
#: an episode's index divided by it is the trainer's global step when it was played.
EPISODES_PER_CALL = 1_000_000


@dataclass
class GRPOOptions:
    """agentgym's options beside TRL's ``GRPOConfig`` fields.

    Args:
        dynamic_sampling: replace groups whose rewards are all equal by groups of other
            tasks within the same rollout call; mask the ones still flat.
        max_resample_rounds: extra rounds of replacement groups per rollout call.
        mask_finish_reasons: finish reasons whose episodes carry no gradient.
        prefetch: prepare the next call's episodes during the optimizer step.
        success_threshold: the reward that counts as a pass in ``env/pass_rate``.
        measure_kl: log ``kl/ref``, the KL from the stage's starting model, even with
            ``beta=0``. Costs a forward pass of the reference per step (and one of the
            policy unless TRL scored the batch, as it does with vLLM), and a copy of the
            weights in memory unless LoRA (adapters off) or ``beta != 0`` (TRL's reference).
        warn_after_steps: logged steps in a row without learning signal, or with a
            collapsed policy, before a warning (0: never warn).
        min_entropy: mean token entropy (nats, TRL's ``entropy``) below which the policy
            counts as collapsed.
        max_kl: ``kl/ref`` at or above which the policy counts as drifting from the
            stage's starting model (0: never warn of drift).
        log_rollouts: groups of each rollout call (one call per generation batch: every
            step with TRL's defaults) whose episodes are kept in ``rollouts.jsonl`` in the
            stage folder, for ``agentgym view``; the first groups trained on, whole (0:
            keep none).
        asynchronous: asynchronous GRPO (``async`` in a run config), an
            :class:`~agentgym.trainers.async_grpo.AsyncOptions` or its fields as a dict;
            None (the default): synchronous.
        turn_credit: each sample of an episode of several (context windows) is credited
            against the episodes of its group that reached the same state, not against
            the whole group (:func:`turn_advantages`). Needs ``scale_rewards: group``
            (TRL's default). An episode of one sample is trained exactly as without it.
        baseline: what an episode's reward is compared with. ``group`` (GRPO): the mean
            of its group's, TRL's advantage. ``batch``: the mean of the whole rollout
            call's scorable episodes, over their std (REINFORCE++'s global baseline; not
            with ``scale_rewards: none``), so a
            group that always passes is pushed up and one that always fails down, as
            rejection fine-tuning learns from every success; needs ``dynamic_sampling:
            false`` (no group is flat under it) and no ``turn_credit``.
        negative_scale: factor on every negative advantage (1: GRPO's; 0: successes
            alone, online rejection fine-tuning). Below 1, an update pushes up what
            passed more than it pushes down what failed, which keeps a low-entropy
            policy from spreading its mass onto tokens no episode sampled.
    """

    dynamic_sampling: bool = True
    max_resample_rounds: int = 2
    mask_finish_reasons: tuple[str, ...] = (
        "error", "sandbox_error", "context_limit", "wall_time", "max_turns")
    prefetch: bool = True
    success_threshold: float = 1.0
    measure_kl: bool = True
    warn_after_steps: int = 3
    min_entropy: float = 0.02
    max_kl: float = 0.2
    log_rollouts: int = 1
    asynchronous: AsyncOptions | None = None
    turn_credit: bool = False
    baseline: str = "group"
    negative_scale: float = 1.0

    @classmethod
    def from_config(cls, values: dict[str, Any]) -> GRPOOptions:
        """The options of a run config's ``grpo.options`` section (``async`` is
        :attr:`asynchronous`), unknown keys named with the closest valid one."""
        values = dict(values)
        if "async" in values:
            values["asynchronous"] = values.pop("async")
        check_fields(cls, values, "grpo.options")
        return cls(**values)

    def __post_init__(self) -> None:
        if isinstance(self.asynchronous, dict):
            check_fields(AsyncOptions, self.asynchronous, "grpo.options.async")
            self.asynchronous = AsyncOptions(**self.asynchronous)
        if self.max_resample_rounds < 0:
            raise InvalidArgumentError(
                f"max_resample_rounds must be >= 0, got {self.max_resample_rounds}")
        if self.warn_after_steps < 0:
            raise InvalidArgumentError(f"warn_after_steps must be >= 0 (0: never warn), got"
                                       f" {self.warn_after_steps}")
        if self.min_entropy < 0:
            raise InvalidArgumentError(f"min_entropy must be >= 0 (0: no entropy warning), got"
                                       f" {self.min_entropy}")
        if self.max_kl < 0:
            raise InvalidArgumentError(f"max_kl must be >= 0 (0: no drift warning), got"
                                       f" {self.max_kl}")
        if self.baseline not in ("group", "batch"):
            raise InvalidArgumentError(
                f"baseline must be 'group' or 'batch', got {self.baseline!r}")
        if self.baseline == "batch" and (self.dynamic_sampling or self.turn_credit):
            raise InvalidArgumentError(
                "baseline: batch gives every group signal (an always-passing group is pushed"
                " up), so it replaces neither dynamic_sampling nor turn_credit's own"
                " baselines: set dynamic_sampling: false and turn_credit: false")
        if not 0 <= self.negative_scale <= 1:
            raise InvalidArgumentError(
                f"negative_scale must be in [0, 1] (1: GRPO's advantages), got"
                f" {self.negative_scale}")
        if self.log_rollouts < 0:
            raise InvalidArgumentError(f"log_rollouts must be >= 0 groups per rollout call (0: keep"
                                       f" none), got {self.log_rollouts}")
        self.mask_finish_reasons = tuple(self.mask_finish_reasons)


def check_fields(cls: type, values: dict[str, Any], what: str) -> None:
    """Raise ValueError naming any key of ``values`` that is not a field of dataclass
    ``cls``, with the closest valid name."""
    names = [f.name for f in fields(cls)]
    for key in values:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidArgumentError(f"{what} has no field {key!r}{hint}")


def grpo_config(output_dir: str | Path, args: dict[str, Any] | None = None, *,
                rollout: RolloutConfig | None = None) -> Any:
    """TRL's ``GRPOConfig`` with agentgym's defaults (:data:`GRPO_DEFAULTS`) under ``args``.

    The sampling temperature and top-p come from ``rollout`` (TRL divides logits by its
    ``temperature`` to score the sampled tokens, so they must agree); on a machine without
    CUDA the trainer runs on the CPU in float32.
    """
    import torch
    from trl import GRPOConfig

    args = dict(args or {})
    check_fields(GRPOConfig, args, "GRPOConfig")
    sampling = (rollout or RolloutConfig()).sampling
    for name, ours in (("temperature", sampling.temperature), ("top_p", sampling.top_p)):
        if name in args and args[name] != ours:
            raise InvalidArgumentError(
                f"GRPO args set {name}={args[name]} but rollout sampling uses {ours}: TRL"
                f" scores sampled tokens at its {name}, so set it once, in the rollout settings"
            )
    if sampling.temperature == 0:
        raise InvalidArgumentError(
            "GRPO needs sampling: set the rollout temperature > 0 (e.g. 1.0)")
    merged = {**GRPO_DEFAULTS, "temperature": sampling.temperature, "top_p": sampling.top_p,
              "max_completion_length": sampling.max_tokens, **args}
    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        merged.update(use_cpu=True, bf16=False, fp16=False)
    merged.update(checkpointing_setting(GRPOConfig, args, enabled=not on_cpu))
    return GRPOConfig(output_dir=str(output_dir), **merged)


# ---- the rollout function --------------------------------------------------------------------


class VLLMTrainerPolicy(BatchedPolicy):
    """Token-level policy over a TRL trainer's vLLM engine (``trainer.vllm_generation``),
    which TRL keeps in sync with the trained weights. Per-turn budgets shorter than the
    engine's ``max_completion_length`` are cut here."""

    def __init__(self, trainer: Any):
        super().__init__(max_batch_size=1024, batch_wait_ms=5.0)
        self.trainer, self.tokenizer = trainer, trainer.processing_class
        self.stop_token_ids = stop_token_ids(trainer)

    def _decode_batch(self, requests: list[tuple[list[int], Sampling]]) -> list[Generation]:
        completions, logprobs = vllm_generate(self.trainer, [prompt for prompt, _ in requests])
        results = []
        for (_, sampling), ids, lps in zip(requests, completions, logprobs, strict=True):
            ids = ids[: sampling.max_tokens]
            token_logprobs = [float("nan") if lp is None else lp for lp in lps][: len(ids)]
            stopped = bool(ids) and ids[-1] in self.stop_token_ids
            results.append(Generation(ids, token_logprobs, "stop" if stopped else "length"))
        return results


def trainer_policy(trainer: Any, rollout: EnvRollout) -> Any:
    """The token-level policy that samples with ``trainer``'s current weights: TRL's vLLM,
    else the engine over the trainer's own model (shared, so each optimizer step's weights
    are the next turn's), with a slot per episode generating at once and room for an
    episode's whole token budget."""
    if trainer.args.use_vllm:
        if rollout.options.asynchronous is not None:
            raise InvalidArgumentError(
                "asynchronous GRPO samples with agentgym's engine for now, not TRL's vLLM:"
                " drop use_vllm from the GRPO args, or the async options")
        return VLLMTrainerPolicy(trainer)
    from agentgym.rollout.engine import Engine, transformers_policy

    model = trainer.accelerator.unwrap_model(trainer.model)
    if rollout.options.asynchronous is not None:
        # Asynchronous: the engine decodes while the trainer steps, so it samples from its
        # own copy, which takes the trained weights after each optimizer step
        # (_EngineWeights); a shared model would be read while the optimizer writes it.
        import torch

        args = trainer.args
        half = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else None
        model = inference_copy(model, half)  # sampled in the precision training computes in
    slots = (rollout.pipeline_config or PipelineConfig()).concurrency
    max_len = rollout.rollout.max_total_tokens + 1
    if rollout.options.asynchronous is not None:  # weight versions: the engine's alone
        return Engine(model, tokenizer=trainer.processing_class, slots=slots, max_len=max_len)
    return transformers_policy(model, tokenizer=trainer.processing_class, slots=slots,
                               max_len=max_len)


def inference_copy(model: Any, dtype: Any = None) -> Any:
    """A copy of ``model`` for sampling only, in ``dtype`` (default: the model's): eval
    mode, no gradients, no activation checkpointing (a checkpointed layer in train mode
    drops the KV cache it is given), and the class's own ``forward``. What training put on
    the instance stays behind: TRL's fused LM head replaces ``forward`` with a closure over
    the original model's bound ``forward``, which a deep copy keeps calling, so the copy
    ran the trainer's layers (seen with transformers 5.17: every asynchronous episode
    failed); accelerate's autocast wrapper goes too (``dtype`` is the precision instead)."""
    import copy

    model = copy.deepcopy(model)
    for module in model.modules():
        module.__dict__.pop("forward", None)
    if getattr(model, "supports_gradient_checkpointing", False):
        disable = (getattr(model, "activation_checkpointing_disable", None)
                   or model.gradient_checkpointing_disable)
        disable()
    if dtype is not None:
        model.to(dtype)
    return model.eval().requires_grad_(False)


class _EngineWeights(TrainerCallback):
    """Keeps the engine's weights and version those of the trainer: the version is the
    optimizer steps taken (the trainer's global step), set when training begins (a resumed
    run's step) and after each step; an engine with its own copy of the model (the
    asynchronous mode) takes the trained weights then too."""

    def __init__(self, trainer: Any, engine: Any, copied: bool):
        self.trainer, self.engine, self.copied = trainer, engine, copied

    def _sync(self, state: Any) -> None:
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.engine.update_weights(model if self.copied else None, version=state.global_step)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._sync(state)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._sync(state)


@dataclass
class _Episodes:
    """One rollout call's episodes, group by group, in TRL's order."""

    groups: list[list[Trajectory]]
    masked: set[int] = field(default_factory=set)  # groups masked by dynamic sampling
    flat_fraction: float = 0.0  # of the first-played groups, before replacement
    identical_fraction: float = 0.0  # likewise


class EnvRollout:
    """TRL's ``rollout_func``: plays the episodes of a generation batch (see the module
    docstring). Its envs live on its own event loop thread for the whole training run.

    The seam runs one way: the rollout is built with all it needs from the training
    configuration, the trainer hands it its policy (:meth:`use_policy`) and its sampler
    (:meth:`use_sampler`) and collects the metrics of each call (:meth:`take_metrics`);
    of the trainer TRL passes to each call, the rollout reads only the step counter.

    Args:
        env_id, env_kwargs: the env, as for ``agentgym.make``.
        group_size: episodes per GRPO group (TRL's ``num_generations``): TRL sends each
            task that many times in a row.
        tokenizer: the trained model's (its pad and eos tokens fill empty episodes).
        calls_apart: optimizer steps between two rollout calls
            (:func:`~agentgym.trainers.trl_adapter.steps_per_generation_batch`), to number
            the episodes prepared for the next call.
        task_ids: the tasks replacement groups are drawn from (default: the env's).
        options: DAPO and prefetch options; rollout, pipeline: episode settings.
        policy: the token-level policy to play (default: the trainer hands its own,
            sampling with the trained weights, through :meth:`use_policy`).
        rollouts_file: where to append the ``options.log_rollouts`` groups of each call
            (None: nowhere); episodes already in the file (a resumed run) are not added
            again.
        harness: an agent program (``agentgym list harnesses``) that plays every episode
            in the task's sandbox with the policy behind it
            (:mod:`agentgym.rollout.harness`), sampling as ``rollout`` says. An episode is
            row per captured sample, each with the episode's advantage: the last sample
            is the episode's row in TRL's group, the earlier ones (a program that rewrote
            its history) are added to the scored batch (:meth:`take_extra_rows`).
    """

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                 group_size: int, tokenizer: Any, calls_apart: int = 1,
                 task_ids: Sequence[str] | None = None, options: GRPOOptions | None = None,
                 rollout: RolloutConfig | None = None, pipeline: PipelineConfig | None = None,
                 policy: Any = None, rollouts_file: str | Path | None = None,
                 harness: str | None = None):
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.harness = harness
        self._harness_runner: Any = None  # started with the first policy
        self._extra_rows: list[ExtraRow] = []  # of the last call, until taken
        self._row_advantages: list[float | None] = []  # likewise (turn_credit)
        self.group_size, self.tokenizer, self.calls_apart = group_size, tokenizer, calls_apart
        self.options = options or GRPOOptions()
        self.rollout, self.pipeline_config = rollout or RolloutConfig(), pipeline
        self.policy = policy
        self.task_ids = list(task_ids) if task_ids is not None else None
        self.sampler: RecordingSampler | None = None
        self.last: list[Trajectory] = []  # the episodes of the last call (tests, logging)
        self.replaced = 0  # groups replaced by dynamic sampling in the current call
        self.played = self.sampled_tokens = 0  # in the current call, replacements included
        self.prefetch_hits = 0  # episodes of the current call found prepared
        self._metrics: dict[str, float] = {}  # of the last call, until taken
        self._loop = LoopThread("agentgym-grpo-rollout")
        self._pipeline: RolloutPipeline | None = None
        self._producer: GroupProducer | None = None  # asynchronous mode
        self._asked: dict[int, list[str]] = {}  # asynchronous: the tasks asked per step
        self._next_episode: dict[int, int] = {}  # asynchronous: per step's block
        self._rng = random.Random()  # asynchronous: replacements, seeded per call
        #: Asynchronous: per task, its last groups' common outcome and how many in a row
        #: (``skip_settled``); and the groups not played because their task was settled.
        self._streaks: dict[str, tuple[float | None, int]] = {}
        self._skipped_settled = 0
        self._turns = TurnsTally()  # asynchronous: trained against played episodes' turns
        self._all_played: list[Trajectory] = []  # this call's episodes, for the costs
        self._errors_said: set[str] = set()  # episode errors already logged
        self._engine_seen: tuple[float, dict[str, float]] | None = None  # at the last log
        self._async_metrics: dict[str, float] = {}
        self.final_fairness: dict[str, Any] = {}  # asynchronous: set when closed
        self._rollouts = (TrajectoryWriter(rollouts_file, resume=True)
                          if rollouts_file is not None and self.options.log_rollouts else None)

    def use_policy(self, policy: Any) -> None:
        """Play ``policy`` from now on (the trainer's, sampling with its current weights)."""
        self.policy = policy
        if self._pipeline is not None:
            self._pipeline.policy = policy
        if self._harness_runner is not None:
            self._harness_runner.use_policy(policy)

    def use_sampler(self, sampler: RecordingSampler) -> None:
        """Predict each next call's tasks from ``sampler`` (the trainer's), to prepare
        their episodes while the optimizer steps (``options.prefetch``)."""
        self.sampler = sampler

    def take_row_advantages(self) -> list[float | None] | None:
        """Per row of the last call's output, its own advantage (``turn_credit``: the
        episode's last sample, :func:`turn_advantages`; ``baseline: batch``:
        :func:`batch_advantages`), or None to keep TRL's; None when neither is on. Taken
        once."""
        rows, self._row_advantages = self._row_advantages, []
        own = self.options.turn_credit or self.options.baseline == "batch"
        return rows if own and rows else None

    def take_extra_rows(self) -> list[ExtraRow]:
        """The last call's further rows (episodes of several samples), once: for the
        trainer to add to the batch it scored
        (:func:`~agentgym.trainers.trl_adapter.append_rows`)."""
        rows, self._extra_rows = self._extra_rows, []
        return rows

    def take_metrics(self) -> dict[str, float]:
        """The metrics of the last call (see the module docstring), once: for the trainer
        to log with its own."""
        metrics, self._metrics = self._metrics, {}
        return metrics

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        started = time.perf_counter()
        if self.policy is None:
            raise TypeError("EnvRollout has no policy: AgentGRPOTrainer hands it the trainer's"
                            " (use_policy), or pass policy= when building it")
        size = self.group_size
        tasks = [_task_id(p) for p in prompts]
        if len(tasks) % size:
            raise InvalidArgumentError(f"{len(tasks)} prompts is not a multiple of the group size"
                                       f" (num_generations) {size}")
        step = trainer.state.global_step  # the one thing read from the trainer
        self._loop.run(self._ensure_harness())
        if self.options.asynchronous is not None:
            episodes = self._loop.run(self._take_call(tasks[::size], step))
        else:
            jobs = [(task, step * EPISODES_PER_CALL + i) for i, task in enumerate(tasks)]
            episodes = self._loop.run(self._play_call(jobs, size, step))
        self.last = [t for group in episodes.groups for t in group]
        output = self._output(episodes)
        self._log(episodes, time.perf_counter() - started)
        self._keep_sample(episodes)
        if self.options.prefetch and self.options.asynchronous is None:
            self._prefetch(tasks, step + self.calls_apart)
        return output

    def close(self) -> None:
        """Close every env (sandboxes included), stop the loop thread and close the
        rollouts file."""
        if self._producer is not None:
            self.final_fairness = self.fairness_summary()
            self._loop.run(self._producer.close())
            self._producer = None
        if self._pipeline is not None:
            self._loop.run(self._pipeline.close())
            self._pipeline = None
        if self._harness_runner is not None:
            self._harness_runner.close()
            self._harness_runner = None
        self._loop.stop()
        if self._rollouts is not None:
            self._rollouts.close()

    def _keep_sample(self, episodes: _Episodes) -> None:
        if self._rollouts is None:
            return
        for group in episodes.groups[:self.options.log_rollouts]:
            for trajectory in group:
                if trajectory.key not in self._rollouts.done:
                    self._rollouts.write(trajectory)

    # ---- playing ---------------------------------------------------------------------------

    def env_task_ids(self) -> list[str]:
        """The env's task ids (its first env is made now and kept for the episodes)."""
        pipeline = self._loop.run(self._ensure_pipeline())
        return self._loop.run(pipeline.task_ids())

    async def _ensure_pipeline(self) -> RolloutPipeline:
        if self._pipeline is None:
            import agentgym

            config = self.pipeline_config or PipelineConfig(mode="pipeline", concurrency=16)
            self._pipeline = RolloutPipeline(
                lambda: agentgym.make(self.env_id, **self.env_kwargs), self.policy,
                config=config, rollout=self.rollout, env_id=self.env_id, policy_name="trainer",
                attempt_of=self._attempt_of)
            if self.task_ids is None:
                self.task_ids = await self._pipeline.task_ids()
        return self._pipeline

    async def _ensure_harness(self) -> None:
        """With a harness: start its runner (installing the program the first time) with
        the policy now known, and hand it to the pipeline."""
        if self.harness is None or self._harness_runner is not None:
            return
        from agentgym.rollout.harness import HarnessRunner

        pipeline = await self._ensure_pipeline()
        runner = HarnessRunner(self.harness, self.policy, sampling=self.rollout.sampling)
        await asyncio.to_thread(runner.start)
        self._harness_runner = pipeline.harness = runner

    def _attempt_of(self, job: Job) -> tuple[int, int]:
        """A job's (group, attempt): a call's episodes come in groups of ``group_size``,
        numbered from the call's first episode (replacement groups included)."""
        return divmod(job[1] % EPISODES_PER_CALL, self.group_size)

    async def _play(self, jobs: list[Job]) -> list[Trajectory]:
        pipeline = await self._ensure_pipeline()
        done = {t.key: t for t in await pipeline.run(jobs)}
        self.prefetch_hits += pipeline.prepared_hits  # each run counts its own
        self._count_played(done.values())
        return [done[job] for job in jobs]

    def _count_played(self, played: Iterable[Trajectory]) -> None:
        for trajectory in played:
            self.played += 1
            self.sampled_tokens += sum(sum(s.loss_mask) for s in trajectory.samples())
            self._all_played.append(trajectory)

    # ---- asynchronous mode (agentgym.trainers.async_grpo) ---------------------------------

    async def _take_call(self, wanted: list[str], step: int) -> _Episodes:
        """The groups of an asynchronous call at trainer step ``step``: ``len(wanted)``
        complete groups, the longest-waiting first; ask for ``wanted`` (unless asked for
        ahead) and for the next calls' groups."""
        options = self.options.asynchronous
        assert options is not None
        pipeline = await self._ensure_pipeline()
        if self._producer is None:
            self._producer = GroupProducer(pipeline, self.group_size)
        producer = self._producer
        self._rng = random.Random(f"{self.rollout.seed}:{step}:async")
        if self._asked.get(step) != wanted:
            self._ask(wanted, step)
        if self.sampler is not None:
            upcoming = self.sampler.chunks_after(wanted, options.max_staleness)
            for k, chunk in enumerate(upcoming, 1):
                if step + k * self.calls_apart not in self._asked:
                    self._ask(chunk, step + k * self.calls_apart)
        taken: list[list[Trajectory]] = []
        groups = []
        looked = flat = identical = dropped = skipped = 0
        while len(taken) < len(wanted):
            group = await producer.next_group()
            looked += 1
            self._note_outcome(group.episodes)
            flat += not self._has_signal(group.episodes)
            identical += _identical(group.episodes)
            if options.stale == "drop" and group.staleness(step) > options.max_staleness:
                dropped += 1
            elif (self.options.dynamic_sampling and not self._has_signal(group.episodes)
                  and skipped < self.options.max_resample_rounds * len(wanted)):
                skipped += 1
            else:
                producer.mark_trained(group)
                groups.append(group)
                taken.append(group.episodes)
                self._turns.add(group.episodes, trained=True)
                continue
            self._turns.add(group.episodes, trained=False)
            self._ask([self._replacement()], step)  # keeps the supply
        self._count_played(producer.take_played())
        self.replaced = skipped
        episodes = _Episodes(taken, flat_fraction=flat / looked,
                             identical_fraction=identical / looked)
        if self.options.dynamic_sampling:
            episodes.masked = {i for i, g in enumerate(taken) if not self._has_signal(g)}
        share = fairness(producer.asked, producer.trained)
        self._async_metrics = {
            **staleness_metrics(groups, step),
            "async/stale_dropped_groups": float(dropped),
            "async/in_flight_groups": float(producer.in_flight),
            "async/ready_groups": float(producer.ready),
            "async/skipped_settled_groups": float(self._skipped_settled),  # this call
            "fairness/worst_task_ratio": share["worst_ratio"],
            "fairness/best_task_ratio": share["best_ratio"],
            "fairness/trained_turns_ratio": self._turns.ratio()}
        self._async_metrics = {k: v for k, v in self._async_metrics.items() if v is not None}
        self._skipped_settled = 0
        return episodes

    def _ask(self, tasks: list[str], step: int) -> None:
        """Ask the producer for a group of each of ``tasks`` (a settled one's replaced),
        numbered in ``step``'s block."""
        assert self._producer is not None
        self._asked.setdefault(step, list(tasks))
        played = []
        for task in tasks:
            if self._settled(task):
                self._skipped_settled += 1
                task = self._replacement()
            played.append(task)
        first = self._next_episode.get(step, step * EPISODES_PER_CALL)
        self._next_episode[step] = self._producer.ask(played, step, first)

    def _replacement(self) -> str:
        """A task for a group that replaces one left out: of the tasks not settled, one
        of those asked for least often (so far: one never asked for, on a large task set),
        which keeps the tasks' shares even."""
        assert self._producer is not None
        asked = self._producer.asked
        pool = [t for t in self.task_ids or [] if not self._settled(t)] or self.task_ids or []
        fewest = min((asked[t] for t in pool), default=0)
        choices = [t for t in pool if asked[t] == fewest]
        return choices[self._rng.randrange(len(choices))]

    def _note_outcome(self, group: list[Trajectory]) -> None:
        """Count ``group``'s task's groups in a row whose scorable episodes all got the same
        reward of 0 or 1 (solved, or failed, every time)."""
        rewards = {t.reward for t in group if not self._masked(t)}
        outcome = rewards.pop() if len(rewards) == 1 and rewards <= {0.0, 1.0} else None
        task = group[0].task_id
        last, count = self._streaks.get(task, (None, 0))
        self._streaks[task] = (outcome, count + 1 if outcome == last and outcome is not None
                               else int(outcome is not None))

    def _settled(self, task: str) -> bool:
        options = self.options.asynchronous
        window = options.skip_settled if options is not None else 0
        return bool(window) and self._streaks.get(task, (None, 0))[1] >= window

    def fairness_summary(self) -> dict[str, Any]:
        """Asynchronous mode: each task's share of trained groups against its share of the
        groups asked for (:func:`~agentgym.trainers.async_grpo.fairness`), with the
        counts; empty when synchronous."""
        if self._producer is None:
            return {}
        producer = self._producer
        return {**fairness(producer.asked, producer.trained),
                "trained_turns_ratio": self._turns.ratio(),
                "groups_asked": sum(producer.asked.values()),
                "groups_trained": sum(producer.trained.values())}

    async def _play_call(self, jobs: list[Job], size: int, step: int) -> _Episodes:
        played = await self._play(jobs)
        groups = [played[i:i + size] for i in range(0, len(played), size)]
        episodes = _Episodes(
            groups,
            flat_fraction=sum(not self._has_signal(g) for g in groups) / len(groups),
            identical_fraction=sum(_identical(g) for g in groups) / len(groups))
        if not self.options.dynamic_sampling:
            return episodes
        rng = random.Random(f"{self.rollout.seed}:{step}")
        next_episode = step * EPISODES_PER_CALL + len(jobs)
        for _ in range(self.options.max_resample_rounds):
            flat = [i for i, g in enumerate(episodes.groups) if not self._has_signal(g)]
            if not flat:
                break
            used = {g[0].task_id for g in episodes.groups}
            pool = [t for t in self.task_ids or [] if t not in used] or list(self.task_ids or [])
            if not pool:
                break
            picks = [pool[rng.randrange(len(pool))] for _ in flat]
            extra = [(task, next_episode + k * size + j)
                     for k, task in enumerate(picks) for j in range(size)]
            next_episode += len(extra)
            replays = await self._play(extra)
            for k, index in enumerate(flat):
                group = replays[k * size:(k + 1) * size]
                if self._has_signal(group):
                    episodes.groups[index] = group
                    self.replaced += 1
        episodes.masked = {i for i, g in enumerate(episodes.groups) if not self._has_signal(g)}
        return episodes

    def _masked(self, trajectory: Trajectory) -> bool:
        return trajectory.finish_reason in self.options.mask_finish_reasons or bool(
            trajectory.error)

    def _has_signal(self, group: list[Trajectory]) -> bool:
        rewards = {t.reward for t in group if not self._masked(t)}
        return len(rewards) > 1

    # ---- what TRL gets ---------------------------------------------------------------------

    def _output(self, episodes: _Episodes) -> dict[str, list]:
        tokenizer = self.tokenizer
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        eos = tokenizer.eos_token_id
        out: dict[str, list] = {k: [] for k in (
            "prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward",
            "finish_reason", "task_id")}
        self._extra_rows, self._row_advantages = [], []
        scorable = [[index not in episodes.masked and not self._masked(t) for t in group]
                    for index, group in enumerate(episodes.groups)]
        batch_credits = (batch_advantages(episodes.groups, scorable)
                         if self.options.baseline == "batch" else None)
        for index, group in enumerate(episodes.groups):
            credits: list[list[float] | None] = [None] * len(group)
            if batch_credits is not None:
                credits = batch_credits[index]
            elif self.options.turn_credit and index not in episodes.masked:
                credits = turn_advantages(group, scorable[index])
            for t, credit in zip(group, credits, strict=True):
                if not (self._masked(t) or index in episodes.masked):
                    self._extra_rows += _earlier_rows(t, len(out["prompt_ids"]), credit)
                self._row_advantages.append(credit[-1] if credit else None)
                prompt, completion = list(t.prompt_ids) or [pad], list(t.completion_ids)
                mask, logprobs = list(t.loss_mask), list(t.logprobs)
                if not completion:  # failed before its first turn: one inert token
                    completion, mask, logprobs = [eos], [0], [0.0]
                if len(logprobs) != len(completion):
                    logprobs = [0.0] * len(completion)
                masked = self._masked(t)
                if masked or index in episodes.masked:
                    mask = [0] * len(mask)
                out["prompt_ids"].append(prompt)
                out["completion_ids"].append(completion)
                out["logprobs"].append(logprobs)
                out["env_mask"].append(mask)
                # None: unscorable, so TRL keeps it out of the group's baseline.
                out["env_reward"].append(None if masked else float(t.reward))
                out["finish_reason"].append(t.finish_reason)
                out["task_id"].append(t.task_id)
        return out

    def _log(self, episodes: _Episodes, seconds: float) -> None:
        played = [t for g in episodes.groups for t in g]
        n = len(played)
        metrics: dict[str, float] = {
            "env/pass_rate": sum(t.reward >= self.options.success_threshold for t in played) / n,
            "env/turns": sum(t.turns for t in played) / n,
            "env/tool_errors": sum(t.tool_errors for t in played) / n,
            "time/rollout_s": seconds,
            # TRL's completion metrics leave masked episodes out; these count all the work.
            "rollout/episodes": float(self.played),
            "rollout/sampled_tokens": float(self.sampled_tokens),
            "rollout/tokens_per_s": self.sampled_tokens / max(seconds, 1e-9),
            "dynamic_sampling/replaced_groups": float(self.replaced),
            "dynamic_sampling/masked_groups": float(len(episodes.masked)),
            "dynamic_sampling/flat_fraction": episodes.flat_fraction,
            # Masked groups have no variance (that is why they are masked).
            "groups/with_variance": sum(self._has_signal(g) for g in episodes.groups)
            / len(episodes.groups),
            "groups/count": float(len(episodes.groups)),
            "groups/identical": episodes.identical_fraction,
            "masked/finish_reason": sum(self._masked(t) for t in played) / n,
            "prefetch/hits": float(self.prefetch_hits),
        }
        metrics.update(self._engine_metrics())
        if self.harness is not None:  # what the capture made of the program's calls
            for key in ("calls", "samples", "rewritten", "mismatches"):
                metrics[f"capture/{key}"] = sum(t.metrics.get(f"capture/{key}", 0)
                                                for t in played) / n
        # Rows beyond one per episode: the samples of context windows and rewritten
        # histories before each episode's last.
        metrics["rollout/extra_rows"] = float(len(self._extra_rows))
        for stage in STAGES:
            metrics[f"time/{stage}_s"] = sum(t.timings.get(stage, 0.0) for t in played)
        metrics["time/sandbox_s"] = sum(t.timings.get("sandbox", 0.0) for t in played)
        metrics["time/idle_sandbox_s"] = sum(t.idle_sandbox_s for t in played)
        reasons = Counter(t.finish_reason or "unknown" for t in played)
        for reason, count in reasons.items():
            metrics[f"env/finish/{reason}"] = count / n
        # An episode's error is what to fix first, and the metrics only count it: say each
        # new one once, with how many episodes of this call it ended.
        for error, count in Counter(t.error for t in played if t.error).items():
            if error not in self._errors_said and len(self._errors_said) < 20:
                self._errors_said.add(error)
                logger.warning(f"{count} of {n} episodes ended with an error: {error}")
        # What a useful gradient cost: every episode played for this call (replaced and
        # dropped groups too) per group trained on that carries signal.
        useful = sum(self._has_signal(g) for g in episodes.groups)
        for stage, key in (("sandbox", "sandbox_s"), ("generate", "generate_s")):
            spent = sum(t.timings.get(stage, 0.0) for t in self._all_played)
            metrics[f"cost/{key}_per_useful_group"] = spent / useful if useful else math.nan
        self._metrics = {**metrics, **self._async_metrics}
        self.replaced = self.played = self.sampled_tokens = self.prefetch_hits = 0
        self._all_played, self._async_metrics = [], {}

    def _engine_metrics(self) -> dict[str, float]:
        """What the engine did since the last call (see the module docstring); nothing
        when the policy is not agentgym's engine."""
        from agentgym.rollout.engine import Engine

        engine = self.policy
        if not isinstance(engine, Engine):
            return {}
        now = time.perf_counter()
        counts = {c: float(getattr(engine, c)) for c in (
            "steps_run", "decode_tokens", "busy_s", "prefill_tokens", "reused_tokens")}
        since, before = self._engine_seen or (None, dict.fromkeys(counts, 0.0))
        self._engine_seen = now, counts
        delta = {c: counts[c] - before[c] for c in counts}
        metrics = {
            "engine/decode_steps": delta["steps_run"],
            "engine/rows_per_decode": delta["decode_tokens"] / max(delta["steps_run"], 1.0),
            "engine/prefill_tokens": delta["prefill_tokens"],
            "engine/reused_tokens": delta["reused_tokens"],
            "engine/busy_s": delta["busy_s"],
        }
        if since is not None:  # the first call has no start to measure from
            metrics["engine/busy_fraction"] = delta["busy_s"] / max(now - since, 1e-9)
        return metrics

    # ---- prefetch --------------------------------------------------------------------------

    def _prefetch(self, tasks: list[str], step: int) -> None:
        """Prepare the episodes of the call after the one playing ``tasks``, the call the
        trainer makes at global step ``step``."""
        if self.sampler is None or self._pipeline is None:
            return
        upcoming = self.sampler.next_chunk(_unique(tasks))
        if upcoming is None:
            return
        size = self.group_size
        jobs = [(task, step * EPISODES_PER_CALL + i)
                for i, task in enumerate(t for t in upcoming for _ in range(size))]
        pipeline = self._pipeline

        async def prepare() -> None:
            pipeline.prepare(jobs)

        self._loop.submit(prepare())


def _earlier_rows(trajectory: Trajectory, source: int,
                  credit: list[float] | None = None) -> list[ExtraRow]:
    """The rows of ``trajectory``'s samples before its last (context windows, rewritten
    histories: :attr:`Trajectory.earlier_samples`), each sharing row ``source``'s
    advantage, or taking its own from ``credit`` (one per sample: :func:`turn_advantages`)."""
    samples = trajectory.samples()[:len(trajectory.earlier_samples)]
    return [ExtraRow(source, sample.prompt_ids or [0], sample.completion_ids,
                     sample.loss_mask, sample.logprobs,
                     advantage=None if credit is None else credit[i])
            for i, sample in enumerate(samples)]


def turn_advantages(group: Sequence[Trajectory], scorable: Sequence[bool]
                    ) -> list[list[float] | None]:
    """Per episode of ``group``, the advantage of each of its samples (``samples()``, in
    order; None for an episode that is not ``scorable`` or has no sample): the episode's
    reward minus the mean reward of the group's scorable episodes that reached the same
    state, over the std of the group's scorable rewards + 1e-4 (TRL's group scale).

    A sample's state is its prompt tokens. Episodes of one task start from the same state,
    so a first sample's advantage is TRL's; where episodes part, each later state has its
    own baseline. So a turn that did right after an earlier wrong turn (an answer read
    correctly from a wrong note) is no longer pushed down with the episode: among the
    episodes that reached its state, it did as well as they did. A state only one episode
    reached gets 0. Episodes of one sample each are plain GRPO.
    """
    rewards = [t.reward for t, ok in zip(group, scorable, strict=True) if ok]
    if len(rewards) < 2:
        return [None] * len(group)
    scale = _reward_scale(rewards)
    reached: dict[tuple[int, ...], list[float]] = {}
    for t, ok in zip(group, scorable, strict=True):
        for state in {tuple(s.prompt_ids) for s in t.samples()} if ok else ():
            reached.setdefault(state, []).append(t.reward)

    def baseline(sample: Any) -> float:
        rewards = reached[tuple(sample.prompt_ids)]
        return sum(rewards) / len(rewards)

    return [[(t.reward - baseline(s)) / scale for s in t.samples()] or None if ok else None
            for t, ok in zip(group, scorable, strict=True)]


def batch_advantages(groups: Sequence[Sequence[Trajectory]], scorable: Sequence[Sequence[bool]]
                     ) -> list[list[list[float] | None]]:
    """Per group, per episode, the advantage of each of its samples under a batch baseline
    (``baseline: batch``): the episode's reward minus the mean reward of every scorable
    episode of ``groups``, over their std + 1e-4; None for an episode that is not
    scorable or has no sample. Every sample of an episode shares its advantage."""
    rewards = [t.reward for group, oks in zip(groups, scorable, strict=True)
               for t, ok in zip(group, oks, strict=True) if ok]
    if len(rewards) < 2:
        return [[None] * len(group) for group in groups]
    mean, scale = sum(rewards) / len(rewards), _reward_scale(rewards)
    return [[[(t.reward - mean) / scale] * len(t.samples()) or None if ok else None
             for t, ok in zip(group, oks, strict=True)]
            for group, oks in zip(groups, scorable, strict=True)]


def _reward_scale(rewards: Sequence[float]) -> float:
    """What TRL divides advantages by: the rewards' std (unbiased, as TRL's) + 1e-4."""
    import torch
    from trl.trainer.utils import nanstd

    return float(nanstd(torch.tensor(rewards, dtype=torch.float32))) + 1e-4


def _task_id(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    raise TypeError(
        f"EnvRollout expects dataset prompts that are task ids (strings), got"
        f" {type(prompt).__name__}: build the dataset with agentgym.trainers.grpo.task_dataset")


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _identical(group: list[Trajectory]) -> bool:
    """Whether every episode of ``group`` sampled the same, nonempty, tokens (what the env
    wrote between turns is left out: a stochastic env does not hide a collapsed policy)."""
    sampled = {tuple(token for token, own in zip(t.completion_ids, t.loss_mask, strict=False)
                     if own) for t in group}
    return len(sampled) == 1 and sampled != {()}


class RecordingSampler:
    """Wraps TRL's ``RepeatSampler`` and remembers, per generation batch, which tasks it
    will yield, so the rollout can prepare the next batch's episodes ahead."""

    def __init__(self, inner: Any, dataset: Any):
        self.inner, self.dataset = inner, dataset
        self.chunks: list[list[str]] = []
        self._cursor = 0

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[int]:
        indices = list(iter(self.inner))
        width, repeat, reuse = repeat_sampler_layout(self.inner)
        block = width * repeat * reuse
        for start in range(0, len(indices), block):
            unique = indices[start:start + width * repeat:repeat]
            self.chunks.append([self.dataset[i]["prompt"] for i in unique])
        return iter(indices)

    def next_chunk(self, current: list[str]) -> list[str] | None:
        """The tasks of the generation batch after the one holding ``current``."""
        upcoming = self.chunks_after(current, 1)
        return upcoming[0] if upcoming else None

    def chunks_after(self, current: list[str], count: int) -> list[list[str]]:
        """The tasks of the (up to) ``count`` generation batches after the one holding
        ``current`` (none when ``current`` is not a batch of this sampler's)."""
        for position in range(self._cursor, len(self.chunks)):
            if self.chunks[position] == current:
                self._cursor = position + 1
                return self.chunks[position + 1:position + 1 + count]
        return []


def env_reward(completions: list[Any], env_reward: list[float | None], **_: Any) -> list:
    """The env's reward, as TRL's reward function (None: unscorable, masked episode)."""
    return list(env_reward)


def task_dataset(task_ids: Iterable[str]) -> Any:
    """The training dataset: one row per task, whose prompt is the task id."""
    from datasets import Dataset

    ids = list(task_ids)
    return Dataset.from_dict({"prompt": ids, "task_id": ids})


# ---- the trainer -----------------------------------------------------------------------------


@functools.cache
def _trainer_class() -> type:
    from trl import GRPOTrainer

    class AgentGRPOTrainer(ModelCardHook, ScoredBatchHook, TrainSamplerHook, PlainLogpsOffGPU,
                           GRPOTrainer):
        """``GRPOTrainer`` whose episodes an :class:`EnvRollout` plays (``rollout``, TRL's
        ``rollout_func``): the trainer hands it its policy and its sampler (prefetch),
        logs its metrics with each scored batch, and closes its envs when training
        ends; it logs each step's wall time and watches learning health
        (:mod:`agentgym.trainers.health`) per the rollout's options, and its model card
        is agentgym's."""

        def __init__(self, *args: Any, rollout: EnvRollout, **kwargs: Any):
            super().__init__(*args, rollout_func=rollout, **kwargs)
            self.env_rollout = rollout
            self._own_policy = None  # the policy this trainer made, closed after training
            if rollout.policy is None:
                self._own_policy = trainer_policy(self, rollout)
                rollout.use_policy(self._own_policy)
                from agentgym.rollout.engine import Engine

                if isinstance(self._own_policy, Engine):
                    self.add_callback(_EngineWeights(
                        self, self._own_policy, rollout.options.asynchronous is not None))
            self.reference_kl: ReferenceKL | None = None
            options = rollout.options
            if options.measure_kl:  # before any update (and before resume loads weights)
                self.reference_kl = ReferenceKL(self)
            self.add_callback(LearningHealth(options.warn_after_steps, options.min_entropy,
                                             options.dynamic_sampling, options.max_kl))
            self.add_callback(SkipNonFiniteSteps(self))
            self.add_callback(_StepTimer(self))

        def model_card(self) -> str:
            return model_card(kind="grpo", base_model=self.model.config.name_or_path,
                              model_dir=Path(self.args.output_dir) / FINAL_DIR,
                              env_id=self.env_rollout.env_id)

        def extra_rows(self) -> list[ExtraRow]:
            return self.env_rollout.take_extra_rows()

        def row_advantages(self) -> list[float | None] | None:
            return self.env_rollout.take_row_advantages()

        def shape_advantages(self, advantages: Any) -> Any:
            scale = self.env_rollout.options.negative_scale
            return advantages if scale == 1 else advantages.where(
                advantages >= 0, advantages * scale)

        def on_scored_batch(self, batch: ScoredBatch) -> None:
            log_metrics(self, {**self.env_rollout.take_metrics(),
                               **batch_metrics(self, batch, self.reference_kl)})

        def token_weights(self, batch: ScoredBatch) -> Any:
            """Asynchronous mode: each sampled token's truncated importance weight, the
            trained weights' probability of it over the sampling weights' (TIS)."""
            options = self.env_rollout.options.asynchronous
            if options is None or batch.sampling_logps is None:
                return None
            import torch

            policy = batch.policy_logps
            if policy is None:
                policy = completion_logps(self, batch, torch.arange(len(batch.input_ids)))
            weights, stats = importance_weights(policy, batch.sampling_logps,
                                                batch.loss_mask, options.is_cap)
            log_metrics(self, {f"async/is_ratio_{k}": v for k, v in stats.items()})
            return weights

        def wrap_train_sampler(self, sampler: Any, dataset: Any) -> Any:
            recording = RecordingSampler(sampler, dataset)
            self.env_rollout.use_sampler(recording)
            return recording

        def train(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return super().train(*args, **kwargs)
            finally:
                self.env_rollout.close()
                if isinstance(self._own_policy, ClosablePolicy):
                    self._own_policy.close()

    return AgentGRPOTrainer


class _StepTimer(TrainerCallback):
    """Logs ``time/step_s``, the wall time of each optimizer step (rollout and update)."""

    def __init__(self, trainer: Any):
        self.trainer, self._began = trainer, 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._began = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Before the step's log, so the step's own line holds it.
        log_metrics(self.trainer, {"time/step_s": time.perf_counter() - self._began})


def __getattr__(name: str) -> Any:  # the trainer class imports trl only when asked for
    if name == "AgentGRPOTrainer":
        return _trainer_class()
    raise AttributeError(name)


def train_grpo(model: Any, env_id: str, *, env_kwargs: dict[str, Any] | None = None,
               output_dir: str | Path, tasks: int | None = None, first_task: int = 0,
               args: dict[str, Any] | None = None,
               options: GRPOOptions | None = None, rollout: RolloutConfig | None = None,
               pipeline: PipelineConfig | None = None, tokenizer: Any = None,
               lora: dict[str, Any] | None = None, resume: bool = False,
               callbacks: Sequence[Any] = (), policy: Any = None, console: Any = None,
               harness: str | None = None) -> Any:
    """Train ``model`` (a folder or a loaded causal LM) with GRPO on ``env_id``'s tasks.

    ``args`` are TRL ``GRPOConfig`` fields over :data:`GRPO_DEFAULTS`; ``lora`` (peft
    ``LoraConfig`` fields) trains adapters instead of all weights; ``resume`` continues
    from the last checkpoint in ``output_dir``. Each logged step is one line on ``console``
    (a rich Console; default: standard error; :mod:`agentgym.trainers.console`), and
    ``options.log_rollouts`` groups of each rollout call go to ``output_dir/rollouts.jsonl``.
    ``harness``: an agent program plays the episodes (:class:`EnvRollout`). The groups
    are drawn from ``tasks`` of the env's tasks in order from its ``first_task``-th
    (``tasks=None``: every task from there on), e.g. past those the demonstrations showed.
    Saves the final model, its tokenizer and model card to ``output_dir/final`` and returns
    the trainer.
    """
    quiet_expected_warnings()
    from transformers.trainer_utils import get_last_checkpoint

    output_dir = Path(output_dir)
    rollout = rollout or RolloutConfig()
    config = grpo_config(output_dir, args, rollout=rollout)
    model, tokenizer = load_model_and_tokenizer(model, tokenizer, padding_side="left")
    env_rollout = EnvRollout(env_id, env_kwargs, group_size=config.num_generations,
                             tokenizer=tokenizer, calls_apart=steps_per_generation_batch(config),
                             options=options, rollout=rollout, pipeline=pipeline, policy=policy,
                             rollouts_file=output_dir / ROLLOUTS_FILE, harness=harness)
    if env_rollout.options.turn_credit and config.scale_rewards != "group":
        env_rollout.close()
        raise InvalidArgumentError(
            f"turn_credit scales advantages as TRL's scale_rewards='group' does, but the GRPO"
            f" args set scale_rewards={config.scale_rewards!r}: drop one of the two")
    if env_rollout.options.baseline == "batch" and config.scale_rewards == "none":
        env_rollout.close()
        raise InvalidArgumentError(
            "baseline: batch divides advantages by the batch's reward std, but the GRPO args"
            " set scale_rewards='none': drop one of the two")
    all_tasks = env_rollout.env_task_ids()
    task_ids = all_tasks[first_task:None if tasks is None else first_task + tasks]
    if tasks is not None and len(task_ids) < tasks:
        env_rollout.close()
        raise InvalidArgumentError(
            f"GRPO was given tasks={tasks} from first_task={first_task}, but {env_id} has"
            f" {len(all_tasks)} tasks: lower tasks or first_task, or add tasks (env kwargs)")
    if len(task_ids) * config.num_generations < config.generation_batch_size:
        env_rollout.close()
        needed = math.ceil(config.generation_batch_size / config.num_generations)
        raise InvalidArgumentError(
            f"GRPO draws from {len(task_ids)} of {env_id}'s tasks (first_task={first_task},"
            f" tasks={tasks}) but a generation batch needs {needed} different ones: add tasks"
            " (the stage's tasks, or env kwargs) or lower per_device_train_batch_size")
    peft_config = None
    if lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(**{"task_type": "CAUSAL_LM", **lora})
    trainer = _trainer_class()(
        model=model, reward_funcs=[env_reward], args=config,
        train_dataset=task_dataset(task_ids), processing_class=tokenizer,
        callbacks=list(callbacks), peft_config=peft_config, rollout=env_rollout)
    use_console_callback(trainer, StepLines("grpo", console))
    checkpoint = get_last_checkpoint(str(output_dir)) if resume and output_dir.is_dir() else None
    trainer.train(resume_from_checkpoint=checkpoint)
    if env_rollout.final_fairness:  # asynchronous: what each task got, for the record
        (output_dir / ASYNC_SUMMARY_FILE).write_text(
            json.dumps(env_rollout.final_fairness, indent=2) + "\n", encoding="utf-8")
    final = output_dir / FINAL_DIR
    trained = trainer.model
    if peft_config is not None:  # the next stage and evaluation load a whole model
        trained = trainer.accelerator.unwrap_model(trained).merge_and_unload()
    trained.save_pretrained(str(final))
    tokenizer.save_pretrained(str(final))
    (final / "README.md").write_text(trainer.model_card(), encoding="utf-8")
    return trainer
