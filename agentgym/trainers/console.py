"""What a trainer prints while it trains: one line per logged step.

transformers' own console logging writes each log as a Python dict (fifty keys for a
GRPO step) under a progress bar. :class:`StepLines` replaces it
(:func:`~agentgym.trainers.trl_adapter.use_console_callback`): each log becomes one line
of the few numbers that say how training goes; every key still reaches ``metrics.jsonl``
(:mod:`agentgym.trainers.metrics`) and ``report_to``. A GRPO line reads::

  grpo step 3/20  reward 0.412  pass 38%  groups with variance 5/8  loss 0.012  kl 0.002  9.8 s/step

* ``reward``: TRL's mean reward of the step's episodes (``reward``; none when every
  episode was masked by its finish reason);
* ``pass``: the share of episodes scoring the success threshold (``env/pass_rate``);
* ``groups with variance``: groups whose rewards differ, the ones that carry a gradient,
  of all the groups trained on (``groups/with_variance`` times ``groups/count``);
* ``loss``; ``kl``: the KL from the stage's starting model (``kl/ref``, else TRL's ``kl``);
* seconds per step: the wall time of a step (rollout and update; the mean of the steps
  since the last line when ``logging_steps`` > 1).

SFT and RFT lines show ``loss`` and the learning rate (RFT's first line, how many attempts
it kept). A field whose key a log lacks is
left out (a step that generated nothing has no reward). The log TRL writes when training
ends becomes ``grpo done: 20 steps in 214.0 s``, and for GRPO also says how many groups
carried a gradient over the whole stage (``38 of 80 groups had reward variance``): the
tasks GRPO actually learned from, the first thing to read when it did not help.
"""

from __future__ import annotations

import math
import time
from typing import Any

from rich.console import Console
from transformers import TrainerCallback

__all__ = ["StepLines", "step_line"]


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def step_line(kind: str, step: int, total: int, logs: dict[str, Any],
              seconds_per_step: float | None = None) -> str:
    """The line for one log of a ``kind`` (grpo, sft, rft) trainer at ``step`` of
    ``total`` (see the module docstring)."""
    if _number(logs.get("rft/attempts")) and _number(logs.get("rft/kept")):
        line = f"{kind}: kept {logs['rft/kept']:.0f} of {logs['rft/attempts']:.0f} attempts"
        if _number(logs.get("rft/first_task")) and _number(logs.get("rft/tasks")):
            first = logs["rft/first_task"]
            line += f" at tasks {first:.0f}-{first + logs['rft/tasks'] - 1:.0f}"
        return line
    parts = [f"{kind} step {step}/{total}"]

    def add(key: str, text: str) -> None:
        if _number(logs.get(key)):
            parts.append(text.format(logs[key]))

    if kind == "grpo":
        add("reward", "reward {:.3f}")
        if "reward" in logs and logs["reward"] is None:  # TRL's mean of no scorable reward
            parts.append("reward none (every episode masked)")
        add("env/pass_rate", "pass {:.0%}")
        share, count = logs.get("groups/with_variance"), logs.get("groups/count")
        if _number(share) and _number(count):
            parts.append(f"groups with variance {round(share * count)}/{round(count)}")
        elif _number(share):
            parts.append(f"groups with variance {share:.0%}")
        add("loss", "loss {:.4g}")
        add("kl/ref" if _number(logs.get("kl/ref")) else "kl", "kl {:.2g}")
    else:
        add("loss", "loss {:.4g}")
        add("learning_rate", "lr {:.2e}")
    if _number(seconds_per_step):
        parts.append(f"{seconds_per_step:.1f} s/step")
    return "  ".join(parts)


class StepLines(TrainerCallback):
    """Prints :func:`step_line` for each log of a ``kind`` trainer on ``console`` (default:
    standard error), and one line when training ends."""

    def __init__(self, kind: str, console: Console | None = None):
        self.kind = kind
        self.console = console or Console(stderr=True)
        self._began = 0.0
        self._spent, self._steps = 0.0, 0  # since the last line
        self._varied, self._groups = 0.0, 0.0  # over the stage, from the GRPO lines

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._began = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._spent += time.perf_counter() - self._began
        self._steps += 1

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
               **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        if "train_runtime" in logs:  # transformers' summary when training ends
            text = (f"{self.kind} done: {state.global_step} steps in"
                    f" {logs['train_runtime']:.1f} s")
            if self._groups:
                text += (f"; {round(self._varied)} of {round(self._groups)} groups had"
                         " reward variance")
        else:
            share, count = logs.get("groups/with_variance"), logs.get("groups/count")
            if _number(share) and _number(count):  # a line's log averages its steps
                steps = max(1, self._steps)
                self._varied += share * count * steps
                self._groups += count * steps
            per_step = self._spent / self._steps if self._steps else None
            self._spent, self._steps = 0.0, 0
            text = step_line(self.kind, state.global_step, state.max_steps, logs, per_step)
        # soft_wrap: a line longer than the terminal (or than 80 columns in a file) stays one
        self.console.print(text, highlight=False, soft_wrap=True)
