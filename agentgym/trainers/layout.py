"""The files of an ``agentgym train`` run folder (its ``output_dir``), named in one place
for the trainers that write them and the commands that read them (``agentgym plot``,
``view``, ``compare``); it imports nothing of agentgym (so every side may import it) and
loads no training library. What an ``eval/<stage>/`` report folder holds is the viewer's
(:mod:`agentgym.viewer.report`), which also finds a run's evaluations.

::

    RUN_DIR/
      run.json              the config and when the run started (and resumed)
      metrics.jsonl         every trainer log, one JSON line each
      reward_curve.png      the curves of every stage and the held-out pass rate
      eval.json             the held-out result of the base model and after each stage
      eval/<stage>/         each evaluation's episodes: an eval report folder
                            (report.html, summary.json, trajectories.jsonl); <stage> is
                            base, 00-sft, 01-grpo, ...
      base-model/           the tiny model, when the config builds one
      00-sft/               a stage: checkpoint-N/, final/ (the model, with its README.md
                            model card), stage.json once finished, and per kind
                            demonstrations.jsonl (sft), attempts.jsonl (rft),
                            rollouts.jsonl (grpo: a sample of the training episodes)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BASE_MODEL_DIR", "CURVE_FILE", "DEMONSTRATIONS_FILE", "EVALS_DIR", "EVAL_FILE",
           "METRICS_FILE", "ROLLOUTS_FILE", "RUN_FILE", "STAGE_FILE", "is_run"]

RUN_FILE = "run.json"
STAGE_FILE = "stage.json"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "reward_curve.png"
EVAL_FILE = "eval.json"
EVALS_DIR = "eval"
BASE_MODEL_DIR = "base-model"
DEMONSTRATIONS_FILE = "demonstrations.jsonl"
ROLLOUTS_FILE = "rollouts.jsonl"


def is_run(folder: str | Path) -> bool:
    """Whether ``folder`` is an ``agentgym train`` run folder (it holds ``run.json``)."""
    return (Path(folder) / RUN_FILE).is_file()
