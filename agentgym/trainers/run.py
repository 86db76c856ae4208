"""``agentgym train``: run a config's stages in order, evaluating after each.

:func:`train` takes a :class:`~agentgym.trainers.config.TrainConfig` (or the path of its
YAML file) and, in ``output_dir``:

* checks what depends on the machine and on TRL's cross-field rules (the stages' TRL
  configs are built, ``report_to`` integrations must be installed) before any model
  loads, raising :class:`~agentgym.trainers.config.ConfigError`;
* records the run in ``run.json``; an ``output_dir`` that already holds one is refused
  unless ``resume`` (:class:`RunExistsError`);
* builds the tiny model into ``base-model/`` when ``model`` is ``{tiny: ...}``;
* evaluates the base model on held-out tasks (``eval``; greedy unless set);
* runs stage ``i`` into ``<i:02d>-<kind>/``, from the previous stage's final model
  (``<stage dir>/final``); a finished stage writes ``stage.json`` last. An ``sft`` stage
  with ``demonstrations`` first collects them into ``demonstrations.jsonl`` there (a
  mixture: ``demonstrations-N.jsonl``, one per policy);
* evaluates the model after every stage (but those set ``eval: false``) on the same tasks
  with the same settings, and prints a table of the pass rate by stage with each stage's
  change. Each evaluation's episodes stay in ``eval/<stage>/`` (``eval/base/``,
  ``eval/00-sft/``, ...), an eval report folder (``report.html``, ``summary.json``,
  ``trajectories.jsonl``);
* a ``grpo`` stage keeps a sample of its training episodes in ``<stage dir>/rollouts.jsonl``
  (``options.log_rollouts`` groups per rollout call), so ``agentgym view RUN_DIR`` shows
  demonstrations, training rollouts and eval episodes, and ``agentgym compare
  RUN_DIR[:STAGE] ...`` compares the evaluations.

``eval.json`` is rewritten after each evaluation: ``{"env", "episodes", "stages": [{"stage":
"base", "kind": "base", ...summary}, {"stage": "00-sft", "kind": "sft", ...}, ...],
"before": <the base entry>, "after": <the last entry>, "change": <after - before pass
rate>}``, each summary holding ``model``, ``pass_rate``, ``mean_reward``, ``mean_turns``,
``finish_reasons``, the rest of ``agentgym eval --json``'s keys, and ``trajectories`` (the
path of its episodes).

Every log of every trainer is appended to ``metrics.jsonl`` as one flushed JSON line
``{"stage": "01-grpo", "kind": "grpo", "step": N, ...TRL's and agentgym's keys}``
(:mod:`agentgym.trainers.metrics`), and ``reward_curve.png`` (a panel column per stage, on
its own steps, and the held-out pass rate by stage: :mod:`agentgym.trainers.plots`) is
rewritten after each stage and when the run ends, however it ends (``SIGTERM`` included):
an interrupted run leaves complete files.

``resume=True`` skips finished stages, resumes the first unfinished one from its last
checkpoint, reuses the eval-before result and the demonstrations already collected, and
drops the metrics lines logged after that checkpoint (they are logged again).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import re
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from agentgym.core.errors import AgentGymError
from agentgym.core.policies import build_policy
from agentgym.trainers.config import (
    ConfigError,
    Demonstrations,
    GRPOStage,
    RFTStage,
    SFTStage,
    TinyModel,
    TrainConfig,
    load_config,
)
from agentgym.trainers.layout import (
    BASE_MODEL_DIR,
    CURVE_FILE,
    DEMONSTRATIONS_FILE,
    EVAL_FILE,
    EVALS_DIR,
    METRICS_FILE,
    RUN_FILE,
    STAGE_FILE,
)
from agentgym.trainers.metrics import MetricsCallback, MetricsLog, json_safe
from agentgym.trainers.plots import plot_curves
from agentgym.trainers.rundir import RunExistsError, check_output_dir
from agentgym.trainers.sft import FINAL_DIR

__all__ = ["RunExistsError", "check_runtime", "train"]



# ---- up-front checks -------------------------------------------------------------------------


def _stage_args(config: TrainConfig, args: dict[str, Any]) -> dict[str, Any]:
    """A stage's TRL args with the run's ``report_to`` and ``seed`` unless it sets them."""
    return {"report_to": config.report_to, "seed": config.seed, **args}


def check_runtime(config: TrainConfig) -> None:
    """What :func:`~agentgym.trainers.config.load_config` cannot check without the machine:
    each stage's TRL config is built as the stage will build it (TRL's cross-field rules,
    bf16 without a GPU, temperature agreement), GRPO options are constructed, and the
    ``report_to`` integrations are importable. Raises ConfigError; loads no model."""
    issues: list[tuple[str, str]] = []
    rollout = config.rollout.rollout_config(seed=config.seed)
    for i, stage in enumerate(config.stages):
        path = f"stages[{i}].{stage.kind}"
        args = _stage_args(config, stage.args)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the stage itself warns once, if need be
                if isinstance(stage, GRPOStage):
                    from agentgym.trainers.grpo import GRPOOptions, grpo_config

                    grpo_config(config.stage_dir(i), args, rollout=rollout)
                    try:
                        GRPOOptions.from_config(stage.options)
                    except ValueError as e:  # under its own section
                        issues.append((f"{path}.options", str(e)))
                else:
                    from trl import SFTConfig

                    from agentgym.trainers.sft import build_config

                    build_config(SFTConfig, config.stage_dir(i), args,
                                 {"completion_only_loss": True})
        except (ValueError, TypeError) as e:
            issues.append((f"{path}.args", str(e)))
        report_to = args.get("report_to")
        for integration in [report_to] if isinstance(report_to, str) else report_to or []:
            missing = _missing_integration(integration)
            if missing:
                where = f"{path}.args.report_to" if "report_to" in stage.args else "report_to"
                issues.append((where, missing))
    if issues:
        raise ConfigError(list(dict.fromkeys(issues)), "the config")


def _missing_integration(name: str) -> str | None:
    modules = {"wandb": ("wandb",), "tensorboard": ("tensorboard", "tensorboardX")}
    needed = modules.get(name)
    if needed and not any(importlib.util.find_spec(m) for m in needed):
        return f"report_to {name!r} needs the {needed[0]} package: pip install {needed[0]}"
    return None


# ---- the run ---------------------------------------------------------------------------------


def _prepare_output(config: TrainConfig, resume: bool, console: Console) -> dict[str, Any]:
    """Refuse to overwrite a run; record this one in run.json."""
    out = config.output_dir
    run_file = out / RUN_FILE
    record = check_output_dir(out, resume, [s.kind for s in config.stages], config.seed)
    if run_file.exists():
        console.print(f"[bold]resuming[/] the run in {out}")
    elif resume:
        console.print(f"no run in {out} to resume: starting one")
    out.mkdir(parents=True, exist_ok=True)
    record.setdefault("started", time.time())
    if run_file.exists():
        record.setdefault("resumed", []).append(time.time())
    record["config"] = config.to_dict()
    _write_json(run_file, record)
    return record


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(json_safe(data), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _stage_complete(stage_dir: Path) -> bool:
    return (stage_dir / STAGE_FILE).is_file() and (stage_dir / FINAL_DIR).is_dir()


def _last_checkpoint_step(stage_dir: Path) -> int:
    steps = [int(m.group(1)) for p in stage_dir.glob("checkpoint-*")
             if (m := re.fullmatch(r"checkpoint-(\d+)", p.name)) and p.is_dir()]
    return max(steps, default=0)


def _base_model(config: TrainConfig, console: Console) -> str:
    if not isinstance(config.model, TinyModel):
        return config.model
    from agentgym.rollout.tiny_model import build_tiny_model

    tiny = config.model
    copy = f", {tiny.copy_steps} steps of copy pretraining" if tiny.copy_steps else ""
    console.print(f"building the tiny model (hidden {tiny.hidden_size}, {tiny.num_layers}"
                  f" layers{copy}) into {config.output_dir / BASE_MODEL_DIR}")
    columns = [TextColumn("[bold]copy pretraining"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn()]
    started = time.perf_counter()
    with Progress(*columns, console=console, transient=True,
                  disable=not (console.is_terminal and tiny.copy_steps)) as progress:
        bar = progress.add_task("copy", total=tiny.copy_steps, loss=0.0)
        losses: list[float] = []

        def step(done: int, loss: float) -> None:
            losses.append(loss)
            progress.update(bar, completed=done, loss=loss)

        folder = build_tiny_model(
            config.output_dir / BASE_MODEL_DIR, seed=tiny.seed, hidden_size=tiny.hidden_size,
            num_layers=tiny.num_layers, init_std=tiny.init_std, corpus_envs=tiny.corpus_envs,
            vocab_size=tiny.vocab_size, corpus_episodes=tiny.corpus_episodes,
            copy_steps=tiny.copy_steps, progress=step)
    if losses:  # built now, not found complete
        tail = losses[-50:]
        console.print(f"copy pretraining: {len(losses)} steps in"
                      f" {time.perf_counter() - started:.0f}s, loss {losses[0]:.2f} ->"
                      f" {sum(tail) / len(tail):.2f} (mean of the last {len(tail)})")
    return str(folder)


@contextlib.contextmanager
def _progress(console: Console, description: str, total: int) -> Iterator[Any]:
    """A progress bar; yields ``advance(trajectory)``."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("mean reward {task.fields[mean]:.3f}"), TimeElapsedColumn()]
    rewards: list[float] = []
    with Progress(*columns, console=console, disable=not console.is_terminal,
                  transient=True) as progress:
        bar = progress.add_task(description, total=total, mean=0.0)

        def advance(trajectory: Any) -> None:
            rewards.append(trajectory.reward)
            progress.update(bar, advance=1, mean=sum(rewards) / len(rewards))

        yield advance


def _evaluate(config: TrainConfig, model: str, label: str, console: Console) -> dict[str, Any]:
    """Pass rate of ``model`` on the eval tasks (the engine, greedy unless set); its
    episodes are kept in ``<output_dir>/eval/<label>/`` as an eval report (``report.html``,
    ``summary.json``, ``trajectories.jsonl``: what ``agentgym compare`` and ``agentgym
    view`` read)."""
    from agentgym.rollout.engine import transformers_policy
    from agentgym.rollout.evaluate import evaluate
    from agentgym.viewer.report import TRAJECTORIES_FILE, write_report

    section = config.eval
    assert section is not None
    started = time.perf_counter()
    policy = transformers_policy(model, slots=config.rollout.pipeline.concurrency,
                                 max_len=config.rollout.episodes.max_total_tokens + 1)
    kwargs = {**config.env.kwargs, **section.kwargs}
    try:
        with _progress(console, f"eval {label}", section.episodes) as advance:
            report = asyncio.run(evaluate(
                config.env.id, policy, section.episodes, env_kwargs=kwargs,
                policy_name=f"hf:{model}", pipeline=config.rollout.pipeline,
                config=config.rollout.rollout_config(seed=config.seed,
                                                     temperature=section.temperature),
                on_done=advance, harness=config.env.harness))
    finally:
        policy.close()
        del policy
        _free_memory()
    folder = config.output_dir / EVALS_DIR / label
    # A resumed run evaluates this model again: its episodes replace any kept before.
    write_report(folder, report.env, report.policy, report.trajectories, overwrite=True)
    summary = {"model": model, "env_kwargs": kwargs, "temperature": section.temperature,
               **report.summary(), "seconds": time.perf_counter() - started,
               "trajectories": str(folder / TRAJECTORIES_FILE)}
    console.print(f"eval {label}: pass rate [bold]{report.pass_rate:.3f}[/] over"
                  f" {report.n} episodes (mean reward {report.mean_reward:.3f})")
    return summary


def _free_memory() -> None:
    gc.collect()
    with contextlib.suppress(Exception):
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _demonstrations(config: TrainConfig, stage: SFTStage, stage_dir: Path,
                    console: Console) -> list[Any]:
    """Collect (or, on resume, complete) the stage's demonstrations; the kept ones, of every
    policy of the mixture."""
    mixture = stage.demonstrations
    assert mixture
    kept = []
    for i, demo in enumerate(mixture):
        kept += _collect_demonstrations(config, demo, _demonstrations_file(stage_dir, i, mixture),
                                        console)
    return kept


def _demonstrations_file(stage_dir: Path, index: int, mixture: list[Demonstrations]) -> Path:
    """Where policy ``index`` of an sft stage's mixture keeps its demonstrations: one file
    per policy of a mixture, so resuming continues each where it stopped."""
    return stage_dir / (DEMONSTRATIONS_FILE if len(mixture) == 1
                        else f"demonstrations-{index}.jsonl")


def _collect_demonstrations(config: TrainConfig, demo: Demonstrations, path: Path,
                            console: Console) -> list[Any]:
    from agentgym.rollout.evaluate import rollout
    from agentgym.rollout.trajectory import TrajectoryWriter, read_trajectories

    # Appending is safe: a fresh run's stage folder is new, and a resumed one continues.
    with TrajectoryWriter(path, resume=True) as writer:
        todo = demo.episodes - len(writer.done)
        if todo > 0:
            with _progress(console, f"demonstrations ({demo.policy})", todo) as advance:

                def done(trajectory: Any) -> None:
                    writer.write(trajectory)
                    advance(trajectory)

                asyncio.run(rollout(
                    config.env.id, build_policy(demo.policy), demo.episodes,
                    env_kwargs={**config.env.kwargs, **demo.kwargs}, policy_name=demo.policy,
                    pipeline=config.rollout.pipeline,
                    config=config.rollout.rollout_config(seed=config.seed),
                    skip=set(writer.done), on_done=done))
    trajectories = read_trajectories(path)
    kept = _kept_demonstrations(demo, trajectories)
    kept_by = ("every one that ended without an error" if demo.threshold is None
               else f"reward >= {demo.threshold}")
    console.print(f"demonstrations: kept {len(kept)} of {len(trajectories)} episodes of"
                  f" {demo.policy} ({kept_by}) from {path}")
    if not kept:
        raise AgentGymError(
            f"no demonstration of {demo.policy!r} was kept ({kept_by}) in {path}:"
            " check the policy with `agentgym eval`, or lower demonstrations.threshold")
    return kept


def _kept_demonstrations(demo: Demonstrations, trajectories: list[Any]) -> list[Any]:
    return [t for t in trajectories if t.error is None
            and (demo.threshold is None or t.reward >= demo.threshold)]


def _trained_on(config: TrainConfig, index: int) -> list[Any]:
    """What the ``sft`` and ``rft`` stages before stage ``index`` trained on, read back from
    their folders: kept demonstrations (or the ``trajectories`` file) and kept attempts."""
    from agentgym.rollout.trajectory import read_trajectories
    from agentgym.trainers.rft import ATTEMPTS_FILE, successful

    trained: list[Any] = []
    for i, stage in enumerate(config.stages[:index]):
        folder = config.stage_dir(i)
        if isinstance(stage, SFTStage) and stage.trajectories is not None:
            trained += read_trajectories(stage.trajectories)
        elif isinstance(stage, SFTStage):
            mixture = stage.demonstrations or []
            for j, demo in enumerate(mixture):
                trained += _kept_demonstrations(
                    demo, read_trajectories(_demonstrations_file(folder, j, mixture)))
        elif isinstance(stage, RFTStage):
            trained += successful(read_trajectories(folder / ATTEMPTS_FILE), stage.threshold)
    return trained


def _run_stage(config: TrainConfig, index: int, model: str, resume: bool,
               callbacks: list[Any], console: Console, base: str | None = None) -> None:
    stage = config.stages[index]
    stage_dir = config.stage_dir(index)
    stage_dir.mkdir(parents=True, exist_ok=True)
    args = _stage_args(config, stage.args)
    if not isinstance(stage, GRPOStage):  # TRL cuts rows at 1,024 tokens by default
        args.setdefault("max_length", config.rollout.episodes.max_total_tokens)
    rollout = config.rollout.rollout_config(seed=config.seed)
    pipeline = config.rollout.pipeline
    if isinstance(stage, SFTStage):
        from agentgym.rollout.models import load_tokenizer
        from agentgym.rollout.trajectory import read_trajectories
        from agentgym.trainers.sft import train_sft, trajectory_dataset

        if stage.trajectories is not None:
            trajectories = read_trajectories(stage.trajectories)
        else:
            trajectories = _demonstrations(config, stage, stage_dir, console)
        tokenizer = load_tokenizer(model)
        dataset = trajectory_dataset(trajectories, tokenizer,
                                     tool_schemas=config.rollout.episodes.tool_schemas,
                                     parser=config.env.kwargs.get("parser"))
        train_sft(model, dataset, output_dir=stage_dir, args=args, tokenizer=tokenizer,
                  resume=resume, callbacks=callbacks, console=console)
    elif isinstance(stage, RFTStage):
        from agentgym.trainers.rft import train_rft

        also = _trained_on(config, index) if stage.restart else []
        if stage.restart:
            console.print(f"rft: restarting from {base}, on {len(also)} trajectories of the"
                          " earlier stages and this stage's kept attempts")
        train_rft(model, config.env.id, env_kwargs=dict(config.env.kwargs),
                  output_dir=stage_dir, tasks=stage.tasks, attempts=stage.attempts,
                  first_task=config.first_task(index), threshold=stage.threshold,
                  rollout=rollout, pipeline=pipeline, sft_args=args, resume=resume,
                  callbacks=callbacks, console=console,
                  train_from=base if stage.restart else None, also=also,
                  tool_schemas=config.rollout.episodes.tool_schemas,
                  parser=config.env.kwargs.get("parser"))
    else:
        from agentgym.trainers.grpo import GRPOOptions, train_grpo

        train_grpo(model, config.env.id, env_kwargs=dict(config.env.kwargs),
                   output_dir=stage_dir, tasks=stage.tasks, first_task=config.first_task(index),
                   args=args, options=GRPOOptions.from_config(stage.options),
                   rollout=rollout, pipeline=pipeline, lora=stage.lora, resume=resume,
                   callbacks=callbacks, console=console, harness=config.env.harness)


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM (``kill``, a scheduler's preemption) unwinds like Ctrl-C, so the ``finally``
    blocks still write complete files."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _library_progress_off() -> Iterator[None]:
    """transformers' and datasets' own progress bars off (loading and writing weights,
    preparing a dataset: a bar per file, gone in a blink): the run shows its own progress,
    one line per training step and a bar per eval."""
    import datasets
    from transformers.utils import logging as transformers_logging

    restore = [enable for enabled, enable in (
        (transformers_logging.is_progress_bar_enabled(), transformers_logging.enable_progress_bar),
        (datasets.is_progress_bar_enabled(), datasets.enable_progress_bars)) if enabled]
    transformers_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        for enable in restore:
            enable()


def _print_eval(entries: list[dict[str, Any]], console: Console) -> None:
    """The held-out results by stage, each with its change over the one before."""
    table = Table(title="held-out eval by stage", title_justify="left")
    for column in ("stage", "pass rate", "change", "mean reward", "mean turns"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    previous = None
    for entry in entries:
        rate = entry.get("pass_rate", 0.0)
        change = ""
        if previous is not None:
            delta = rate - previous
            colour = "green" if delta > 0 else "red" if delta < 0 else ""
            change = f"[{colour}]{delta:+.3f}[/]" if colour else f"{delta:+.3f}"
        table.add_row(entry["stage"], f"{rate:.3f}", change,
                      f"{entry.get('mean_reward', 0.0):.3f}",
                      f"{entry.get('mean_turns', 0.0):.2f}")
        previous = rate
    console.print(table)


class _Evals:
    """``eval.json``: the held-out result of the base model and of each stage, in order."""

    def __init__(self, path: Path, env: str, episodes: int, resume: bool):
        self.path = path
        old = _read_json(path) if resume else {}
        self.entries: list[dict[str, Any]] = list(old.get("stages") or [])
        if not self.entries and "before" in old:  # a run from before per-stage evals
            self.entries = [{"stage": "base", "kind": "base", **old["before"]}]
        self.data: dict[str, Any] = {"env": env, "episodes": episodes}

    def get(self, stage: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["stage"] == stage), None)

    def record(self, stage: str, kind: str, summary: dict[str, Any], order: list[str]) -> None:
        """Keep ``summary`` for ``stage`` (replacing an older one), entries in ``order``."""
        self.entries = [e for e in self.entries if e["stage"] != stage]
        self.entries.append({"stage": stage, "kind": kind, **summary})
        self.entries.sort(key=lambda e: order.index(e["stage"]) if e["stage"] in order
                          else len(order))
        self.write()

    def to_dict(self) -> dict[str, Any]:
        """What eval.json holds (see the module docstring)."""
        data = {**self.data, "stages": self.entries}
        if self.entries:
            before, after = self.entries[0], self.entries[-1]
            data.update(before=before, after=after,
                        change=after.get("pass_rate", 0.0) - before.get("pass_rate", 0.0))
        return data

    def write(self) -> None:
        _write_json(self.path, self.to_dict())

    @property
    def before(self) -> dict[str, Any] | None:
        return self.entries[0] if self.entries else None

    @property
    def after(self) -> dict[str, Any] | None:
        return self.entries[-1] if len(self.entries) > 1 else None


def train(config: TrainConfig | str | os.PathLike, resume: bool = False,
          console: Console | None = None) -> dict[str, Any]:
    """Run every stage of ``config`` (a TrainConfig or a YAML path), see the module
    docstring. Returns a summary: ``output_dir``, ``base_model``, ``final_model``,
    ``stages`` (``index``, ``kind``, ``dir``, ``final``, ``skipped``, ``seconds``, and
    ``pass_rate`` after it when ``eval`` is set), ``pass_rate_before`` /
    ``pass_rate_after`` / ``pass_rate_change`` (None without ``eval``), and the paths of
    ``eval`` (eval.json), ``metrics`` and ``reward_curve``.

    Raises:
        ConfigError: the config (or the machine) cannot run it; nothing was loaded.
        RunExistsError: ``output_dir`` holds a run and ``resume`` is False.
    """
    if not isinstance(config, TrainConfig):
        config = load_config(config)
    console = console or Console(stderr=True)
    started = time.perf_counter()
    check_runtime(config)
    _prepare_output(config, resume, console)
    try:
        with _terminate_as_exit(), _library_progress_off():
            summary = _run(config, resume, console)
    except (KeyboardInterrupt, SystemExit):
        console.print(f"[yellow]interrupted[/]: continue with `agentgym train CONFIG"
                      f" --output-dir {config.output_dir} --resume`", highlight=False)
        raise
    summary["seconds"] = time.perf_counter() - started
    return summary


def _run(config: TrainConfig, resume: bool, console: Console) -> dict[str, Any]:
    """The run itself, once the config is checked and run.json written."""
    out = config.output_dir
    eval_path = out / EVAL_FILE
    names = [config.stage_dir(i).name for i in range(len(config.stages))]
    evals = _Evals(eval_path, config.env.id, config.eval.episodes if config.eval else 0,
                   resume)
    pending = [i for i in range(len(config.stages)) if not _stage_complete(config.stage_dir(i))]
    metrics = MetricsLog(out / METRICS_FILE)
    if resume and pending:
        # Lines logged after the checkpoint the first pending stage resumes from come again.
        first, step = pending[0], _last_checkpoint_step(config.stage_dir(pending[0]))
        later = set(names[first + 1:])
        metrics.keep(lambda r: r.get("stage") not in later
                     and (r.get("stage") != names[first] or r.get("step", 0) <= step))
    stages: list[dict[str, Any]] = []
    order = ["base", *names]

    def curve() -> None:
        plot_curves(metrics.read(), out / CURVE_FILE, evals=evals.to_dict())

    def evaluate(stage: str, kind: str, model: str, trained: bool) -> dict[str, Any] | None:
        """The held-out result of ``model`` after ``stage``: kept from an earlier attempt of
        the run unless this attempt ``trained`` the model."""
        if config.eval is None:
            return None
        kept = evals.get(stage)
        if kept is not None and not trained:
            console.print(f"eval {stage}: pass rate {kept['pass_rate']:.3f} (kept from"
                          f" {eval_path})")
            return kept
        evals.record(stage, kind, _evaluate(config, model, stage, console), order)
        return evals.get(stage)

    try:
        model = _base_model(config, console)
        base = model
        evaluate("base", "base", model, trained=False)
        for i, stage in enumerate(config.stages):
            stage_dir = config.stage_dir(i)
            final = str(stage_dir / FINAL_DIR)
            title = f"stage {i + 1}/{len(config.stages)}: {stage.kind} -> {stage_dir}"
            entry: dict[str, Any] = {"index": i, "kind": stage.kind, "dir": str(stage_dir),
                                     "final": final}
            if i not in pending:
                console.rule(f"{title} (done, skipped)")
                seconds = _read_json(stage_dir / STAGE_FILE).get("seconds", 0.0)
                entry.update(skipped=True, seconds=seconds)
            else:
                resuming = resume and i == pending[0]
                console.rule(title + (" (resuming)" if resuming else ""))
                stage_started = time.perf_counter()
                callback = MetricsCallback(metrics, names[i], stage.kind)
                _run_stage(config, i, model, resuming, [callback], console, base)
                _free_memory()
                seconds = time.perf_counter() - stage_started
                _write_json(stage_dir / STAGE_FILE, {"kind": stage.kind, "model": model,
                                                     "final": final, "seconds": seconds})
                entry.update(skipped=False, seconds=seconds)
            model = final
            result = evaluate(names[i], stage.kind, model, trained=i in pending) \
                if stage.eval else None
            if result is not None:
                entry["pass_rate"] = result["pass_rate"]
            stages.append(entry)
            curve()
        if config.eval is not None:
            _print_eval(evals.entries, console)
    finally:
        try:
            curve()
        finally:
            metrics.close()
    before, after = evals.before, evals.after
    return {
        "output_dir": str(out),
        "base_model": base,
        "final_model": model,
        "stages": stages,
        "pass_rate_before": before["pass_rate"] if before else None,
        "pass_rate_after": after["pass_rate"] if after else None,
        "pass_rate_change": after["pass_rate"] - before["pass_rate"] if before and after
        else None,
        "eval": str(eval_path) if config.eval is not None else None,
        "metrics": str(out / METRICS_FILE),
        "reward_curve": str(out / CURVE_FILE),
    }
