"""Rejection fine-tuning: attempt each task N times, keep the successes, SFT on them.

The warm-up the SWE RL recipe runs before RL. :func:`collect` plays ``attempts`` episodes
of each of ``tasks`` tasks with a policy (by default the model being trained, through
:class:`~agentgym.rollout.engine.Engine`, sampling at the rollout config's
temperature) and writes every attempt, failed ones included, to a trajectory file;
:func:`successful` keeps the episodes that reached the reward threshold without an error;
:func:`train_rft` fine-tunes on those with :func:`~agentgym.trainers.sft.train_sft`, on the
model's own sampled tokens only (the loss mask). Failed attempts never reach the dataset.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agentgym.core.errors import AgentGymError
from agentgym.rollout.evaluate import rollout as run_rollout
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.models import load_model_and_tokenizer
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.rollout.trajectory import Trajectory, TrajectoryWriter, read_trajectories
from agentgym.trainers.sft import run_and_save, sft_trainer, trajectory_dataset

__all__ = ["ATTEMPTS_FILE", "NoSuccessError", "collect", "successful", "train_rft"]

logger = logging.getLogger(__name__)

#: The file in ``output_dir`` where :func:`train_rft` writes every attempt.
ATTEMPTS_FILE = "attempts.jsonl"


class NoSuccessError(AgentGymError):
    """Rejection fine-tuning found no successful attempt to train on."""


def successful(trajectories: Iterable[Trajectory], threshold: float = 1.0) -> list[Trajectory]:
    """The trajectories with ``reward >= threshold`` that ended without an error."""
    return [t for t in trajectories if t.error is None and t.reward >= threshold]


async def collect(env_id: str, policy: Any, *, env_kwargs: dict[str, Any] | None = None,
                  tasks: int, attempts: int, out: str | os.PathLike,
                  rollout: RolloutConfig | None = None, pipeline: PipelineConfig | None = None,
                  resume: bool = False, policy_name: str = "", first_task: int = 0,
                  on_stage: Callable[[Counter], None] | None = None,
                  on_done: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
    """Play ``attempts`` episodes of each of ``tasks`` of the env's tasks, in order from its
    ``first_task``-th, and write every one to ``out`` (JSONL,
    :class:`~agentgym.rollout.trajectory.TrajectoryWriter`).

    Args:
        resume: keep what ``out`` holds and play only the attempts it lacks; without it an
            existing non-empty ``out`` is an error.
        on_done: also called with each finished trajectory (progress bars).

    Returns:
        Every attempt in ``out``: those of earlier runs (resume) and this one's.
    """
    with TrajectoryWriter(out, resume=resume) as writer:
        def done(trajectory: Trajectory) -> None:
            writer.write(trajectory)
            if on_done is not None:
                on_done(trajectory)

        await run_rollout(env_id, policy, tasks, k=attempts, env_kwargs=env_kwargs,
                          policy_name=policy_name, pipeline=pipeline, config=rollout,
                          skip=set(writer.done), on_done=done, on_stage=on_stage,
                          first_task=first_task)
    return read_trajectories(out)


def train_rft(model: Any, env_id: str, *, env_kwargs: dict[str, Any] | None = None,
              output_dir: str | os.PathLike, tasks: int, attempts: int,
              first_task: int = 0, threshold: float = 1.0, rollout: RolloutConfig | None = None,
              pipeline: PipelineConfig | None = None, sft_args: dict | None = None,
              resume: bool = False, callbacks: Sequence[Any] = (), tokenizer: Any = None,
              policy: Any = None, console: Any = None, train_from: Any = None,
              also: Sequence[Trajectory] = (), tool_schemas: bool = True,
              parser: Any = None) -> Any:
    """Rejection fine-tuning of ``model`` on ``env_id``.

    Collects ``attempts`` attempts at each of ``tasks`` tasks into
    ``output_dir/attempts.jsonl``, keeps :func:`successful` ones, logs how many were kept
    (``rft/attempts``, ``rft/kept``, ``rft/success_rate``, ``rft/tasks``,
    ``rft/first_task``, ``rft/also``: the earlier trajectories trained on too, through
    the trainer's logging, so callbacks see them), and trains on them with
    :func:`~agentgym.trainers.sft.train_sft` (final model in ``output_dir/final``).

    Args:
        model: a model folder or a loaded ``PreTrainedModel`` (trained in place).
        env_kwargs: keyword arguments for the env, as in ``agentgym.make(env_id, **kw)``.
        tasks: how many of the env's tasks to attempt (in order, cycling).
        attempts: attempts per task; sampling needs a temperature above 0 for them to
            differ (``rollout.sampling.temperature``, default 1.0).
        first_task: the index of the first of them. Start after the tasks the model's
            demonstrations came from: a model already solves those, so their successes
            teach it nothing new (the ``agentgym train`` default).
        threshold: the reward an attempt needs to be kept.
        rollout: per-episode settings (sampling, token and time limits).
        pipeline: how episodes are scheduled.
        sft_args: ``trl.SFTConfig`` fields for the fine-tuning (see ``train_sft``).
        resume: continue an interrupted run: attempts already in the file are kept and
            only the missing ones are played, then training resumes from the last
            checkpoint.
        callbacks: ``transformers.TrainerCallback`` objects.
        tokenizer: tokenizer object or folder; default: the model's.
        policy: the token-level policy that makes the attempts; default:
            the engine over ``model``, i.e. its current weights.
        console: the rich Console each logged step is a line on (default: standard error).
        train_from: a model folder to fine-tune instead of ``model``, which still makes the
            attempts (``rft`` stages with ``restart``: the run's base model).
        also: trajectories trained on with the kept attempts (earlier stages' kept
            demonstrations and attempts); text-level ones are rendered as ``sft`` renders
            them, with ``tool_schemas`` and ``parser`` (see
            :func:`~agentgym.trainers.sft.trajectory_dataset`).

    Returns:
        The trained ``trl.SFTTrainer``.

    Raises:
        NoSuccessError: no attempt reached ``threshold``.
    """
    model, tokenizer = load_model_and_tokenizer(model, tokenizer)
    made = policy is None
    if policy is None:
        import torch

        from agentgym.rollout.engine import transformers_policy

        device = "cuda" if torch.cuda.is_available() else None
        rollout_config = rollout or RolloutConfig()
        policy = transformers_policy(model, tokenizer=tokenizer, device=device,
                                     slots=(pipeline or PipelineConfig()).concurrency,
                                     max_len=rollout_config.max_total_tokens + 1)
    out = Path(output_dir) / ATTEMPTS_FILE
    try:
        tried = asyncio.run(collect(env_id, policy, env_kwargs=env_kwargs, tasks=tasks,
                                    attempts=attempts, out=out, rollout=rollout,
                                    pipeline=pipeline, resume=resume, policy_name="rft",
                                    first_task=first_task))
    finally:
        if made:
            policy.close()
    kept = successful(tried, threshold)
    logger.info("rejection fine-tuning: kept %d of %d attempts (reward >= %s) on %s, tasks"
                " %d-%d", len(kept), len(tried), threshold, env_id, first_task,
                first_task + tasks - 1)
    if not kept:
        rewards = Counter(round(t.reward, 3) for t in tried)
        errors = sum(t.error is not None for t in tried)
        temperature = (rollout or RolloutConfig()).sampling.temperature
        raise NoSuccessError(
            f"none of the {len(tried)} attempts on {env_id!r} reached reward >= {threshold}"
            f" (rewards seen: {dict(rewards)}, errors: {errors}; all attempts are in {out}),"
            " so there is nothing to fine-tune on. Fix: warm the model up first with an sft"
            f" stage on demonstrations (agentgym rollout {env_id} --policy oracle -n N --out"
            f" FILE.jsonl), raise attempts (now {attempts}), or raise the sampling temperature"
            f" (now {temperature})"
        )
    if train_from is not None:
        del model  # the attempts' model; the one fine-tuned starts from train_from
        model, tokenizer = load_model_and_tokenizer(train_from, None)
    dataset = trajectory_dataset([*also, *kept], tokenizer, tool_schemas=tool_schemas,
                                 parser=parser)
    trainer = sft_trainer(model, dataset, output_dir=output_dir, args=sft_args,
                          tokenizer=tokenizer, callbacks=callbacks, kind="rft", console=console)
    trainer.log({"rft/attempts": float(len(tried)), "rft/kept": float(len(kept)),
                 "rft/also": float(len(also)),
                 "rft/success_rate": len(kept) / len(tried), "rft/tasks": float(tasks),
                 "rft/first_task": float(first_task)})
    return run_and_save(trainer, resume=resume)
