"""``reward_curve.png``: a training run's curves, one panel column per stage, and the
held-out pass rate after each stage.

The figure (:func:`build_figure`) has one column per stage, each on its own step axis (a
20-step GRPO stage is as wide as an 800-step SFT stage), four rows high:

* ``sft`` and ``rft`` stages: the training loss (top three rows) and the learning rate;
* ``grpo`` stages: the mean reward per step (TRL's ``reward``) and its rolling mean, the
  trailing mean over the last :data:`ROLLING_WINDOW` steps (fewer at the stage's start);
  the share of groups whose rewards vary, the groups that carry a gradient
  (``groups/with_variance``, else ``1 - frac_reward_zero_std``); the mean length in model
  tokens of the episodes in the loss (``episodes/mean_length``; in older runs TRL's
  ``completions/mean_length``, which counts masked episodes as 0 tokens, so it is left
  out on steps that trained no episode) and, dashed on the right axis, the mean turns per
  episode (``env/turns``); the wall time of each step (``time/step_s``: rollout and
  update) and of its rollout (``time/rollout_s``) in seconds and, dotted on the right
  axis, the sampled tokens per second (``rollout/tokens_per_s``);
* a last column, when ``eval.json`` holds any: the held-out pass rate of the base model
  and after each stage, one point per stage, its value written beside it.

Several runs overlay on the same panels, one colour per run, with the run names in the
legend; the stage columns are the union of the runs' stage names, in name order, and a
run without a stage leaves that column empty. A stage's kind is the ``kind`` of its
``metrics.jsonl`` records (else its name's suffix: ``01-grpo``).

Points sit at the steps the records carry (``logging_steps: 25`` draws steps 25, 50, ...).
A value logged as null (nothing to average: a step whose every episode was masked) is a
gap in its line, never a 0; a key a record lacks is simply not drawn there.

:func:`plot_curves` is what ``agentgym train`` calls after each stage and when the run
ends; :func:`plot_runs` is ``agentgym plot`` (:func:`load_run` reads a run folder). Both
write the PNG atomically (:func:`save_figure`: a reader never sees half an image).
matplotlib (the ``train`` extra) is imported when a figure is built; no display is needed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.core.errors import InvalidArgumentError, MissingFileError

__all__ = ["ROLLING_WINDOW", "CurveFigure", "RunCurves", "build_figure", "load_run",
           "pass_rates", "plot_curves", "plot_runs", "rolling_mean", "save_figure"]

ROLLING_WINDOW = 5
"""Steps averaged by the GRPO reward's rolling mean (the step and the four before it)."""

COMPARISON_FILE = "reward_curves.png"
"""Where ``agentgym plot`` draws several runs without ``--out``: the current directory."""

DPI = 100
COLUMN_WIDTH = 4.2  # inches per stage column
FIGURE_HEIGHT = 9.8
#: The wall times drawn in a GRPO column's bottom panel: (label, key, line style).
WALL_TIMES = (("step", "time/step_s", "-"), ("rollout", "time/rollout_s", "-."))


@dataclass
class RunCurves:
    """One run: ``name`` (the legend's), its ``metrics.jsonl`` records and its ``eval.json``
    (None: the run has none)."""

    name: str
    records: list[dict[str, Any]]
    evals: dict[str, Any] | None = None

    def stages(self) -> dict[str, list[dict[str, Any]]]:
        """Each stage's records that carry a step, by stage name in the order logged."""
        stages: dict[str, list[dict[str, Any]]] = {}
        for record in self.records:
            if _number(record.get("step")):
                stages.setdefault(str(record.get("stage", "?")), []).append(record)
        return stages


@dataclass
class CurveFigure:
    """A built figure and where its panels are: ``stages`` maps each stage name to its
    axes, top to bottom; ``twins`` maps a GRPO stage to its length panel's right axis
    (turns) and ``speeds`` to its rollout panel's right axis (tokens per second);
    ``pass_rate`` is the held-out pass rate panel (None when no run has an eval)."""

    figure: Any
    stages: dict[str, list[Any]] = field(default_factory=dict)
    twins: dict[str, Any] = field(default_factory=dict)
    speeds: dict[str, Any] = field(default_factory=dict)
    pass_rate: Any = None


def rolling_mean(values: Sequence[float], window: int = ROLLING_WINDOW) -> list[float]:
    """The trailing mean: entry ``i`` averages ``values[i - window + 1 : i + 1]`` (fewer at
    the start), so it never looks ahead of the step it is drawn at. NaN values (gaps) are
    left out of the mean; a window of nothing but gaps is a gap."""
    out = []
    for i in range(len(values)):
        recent = [v for v in values[max(0, i - window + 1): i + 1] if not math.isnan(v)]
        out.append(sum(recent) / len(recent) if recent else math.nan)
    return out


def pass_rates(evals: dict[str, Any] | None, last_stage: str | None = None
               ) -> list[tuple[str, float]]:
    """``(stage, held-out pass rate)`` in order: the entries of ``eval.json``'s ``stages``
    list (``base`` first). A file from before that list held only ``before`` (given as
    ``base``) and ``after``, the final model, which is ``last_stage``'s."""
    if not evals:
        return []
    if isinstance(evals.get("stages"), list):
        entries = [(e.get("stage"), e.get("pass_rate")) for e in evals["stages"]
                   if isinstance(e, dict)]
    else:
        entries = [("base", (evals.get("before") or {}).get("pass_rate")),
                   (last_stage or "after", (evals.get("after") or {}).get("pass_rate"))]
    return [(str(stage), float(rate)) for stage, rate in entries
            if stage is not None and _number(rate)]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: What a series' reader returns for a record that does not log its value.
ABSENT = object()


def _series(rows: Iterable[dict[str, Any]], value: str | Callable[[dict[str, Any]], Any]
            ) -> tuple[list[float], list[float]]:
    """(steps, values) of the rows that log ``value`` (a key, or a function of the row
    returning :data:`ABSENT` for rows without it): a null value is NaN, a gap in the line."""
    read = value if callable(value) else (lambda row: row.get(value, ABSENT))
    points = [(row["step"], read(row)) for row in rows]
    points = [(step, v if _number(v) else math.nan) for step, v in points if v is not ABSENT]
    return [step for step, _ in points], [v for _, v in points]


def _groups_with_variance(row: dict[str, Any]) -> Any:
    """The share of groups whose rewards vary: agentgym's ``groups/with_variance``, else
    one minus TRL's ``frac_reward_zero_std``."""
    if "groups/with_variance" in row:
        return row["groups/with_variance"]
    zero_std = row.get("frac_reward_zero_std", ABSENT)
    return 1 - zero_std if _number(zero_std) else zero_std


def _episode_length(row: dict[str, Any]) -> Any:
    """The mean length in model tokens of the step's episodes in the loss: agentgym's
    ``episodes/mean_length``, else TRL's ``completions/mean_length`` (which counts a masked
    episode as 0 tokens) on steps that trained some episode."""
    if "episodes/mean_length" in row:
        return row["episodes/mean_length"]
    if row.get("episodes/in_loss") == 0:
        return None
    return row.get("completions/mean_length", ABSENT)


def _kind(stage: str, runs: Sequence[RunCurves]) -> str:
    for run in runs:
        for record in run.stages().get(stage, []):
            if record.get("kind"):
                return str(record["kind"])
    return stage.rpartition("-")[2]


def build_figure(runs: Sequence[RunCurves], title: str = "") -> CurveFigure:
    """The figure of ``runs`` (see the module's docstring). ``title`` defaults to the run's
    name and its pass rate from base to last stage (one run); several runs are titled by
    their legend, which ``title`` heads."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    per_run = [run.stages() for run in runs]
    stage_names = sorted({name for stages in per_run for name in stages})
    rates = [pass_rates(run.evals, next(reversed(stages), None))
             for run, stages in zip(runs, per_run, strict=True)]
    rate_labels = sorted({stage for r in rates for stage, _ in r},
                         key=lambda s: (s != "base", s == "after", s))  # as the columns

    widths = [1.0] * len(stage_names)
    if rate_labels:
        widths.append(max(0.55, 0.16 * len(rate_labels)))
    if not widths:
        widths = [1.0]
    figure = Figure(figsize=(COLUMN_WIDTH * sum(widths) + 0.6, FIGURE_HEIGHT),
                    layout="constrained")
    grid = figure.add_gridspec(4, len(widths), width_ratios=widths)
    colours = [f"C{i % 10}" for i in range(len(runs))]
    built = CurveFigure(figure)
    single = len(runs) == 1

    for column, stage in enumerate(stage_names):
        grpo = _kind(stage, runs) == "grpo"
        top = figure.add_subplot(grid[0, column] if grpo else grid[0:3, column])
        rows = [top]
        if grpo:
            rows += [figure.add_subplot(grid[row, column], sharex=top) for row in (1, 2)]
        rows.append(figure.add_subplot(grid[3, column], sharex=top))
        built.stages[stage] = rows
        twin = rows[2].twinx() if grpo else None
        speed = rows[3].twinx() if grpo else None
        if twin is not None:
            built.twins[stage], built.speeds[stage] = twin, speed
        steps: list[float] = []
        for run, stages, colour in zip(runs, per_run, colours, strict=True):
            records = stages.get(stage, [])
            steps += [r["step"] for r in records]
            if grpo:
                _draw_grpo(run.name, records, rows, twin, colour)
                _draw_rollout(run.name, records, rows[3], speed, colour)
            else:
                _draw_loss(run.name, records, rows, colour)
        low, high = (min(steps), max(steps)) if steps else (0, 1)
        pad = max((high - low) * 0.02, 0.5)
        top.set_xlim(low - pad, high + pad)
        rows[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
        rows[-1].set_xlabel(f"{stage} step")
        for axes in rows[:-1]:
            axes.tick_params(labelbottom=False)
        heading = f"{stage}  ({_kind(stage, runs)}, {len(set(steps))} logged steps)"
        after = dict(rates[0]).get(stage) if single else None
        if after is not None:
            heading += f"\nheld-out pass rate after: {after:.2f}"
        top.set_title(heading, fontsize=11)
        if grpo:
            top.set_ylabel("mean reward per step")
            top.legend(handles=[
                Line2D([], [], color="0.3", alpha=0.4, marker="o", markersize=3,
                       label="per step"),
                Line2D([], [], color="0.3", linewidth=2.2,
                       label=f"rolling mean ({ROLLING_WINDOW} steps)")],
                fontsize="small", loc="best")
            rows[1].set_ylabel("groups with reward variance")
            rows[1].set_ylim(-0.03, 1.03)
            rows[1].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
            rows[2].set_ylabel("episode length (tokens)")
            twin.set_ylabel("turns per episode (dashed)")
            twin.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
            rows[2].legend(handles=[
                Line2D([], [], color="0.3", label="length (left)"),
                Line2D([], [], color="0.3", linestyle="--", label="turns (right)")],
                fontsize="small", loc="best")
            rows[3].set_ylabel("wall seconds per step")
            speed.set_ylabel("sampled tokens/s (dotted)")
            rows[3].legend(handles=[
                *(Line2D([], [], color="0.3", linestyle=style, label=label)
                  for label, _, style in WALL_TIMES),
                Line2D([], [], color="0.3", linestyle=":", label="tokens/s (right)")],
                fontsize="x-small", loc="best")
        else:
            top.set_ylabel("training loss")
            rows[-1].set_ylabel("learning rate")
            rows[-1].ticklabel_format(axis="y", style="sci", scilimits=(-2, 3), useOffset=False)
        logged = {key for stages in per_run for r in stages.get(stage, []) for key in r}
        for axes in rows:
            axes.grid(alpha=0.3)
            # TRL logs a null reward for a step whose every episode was masked.
            null = grpo and axes is top and "reward" in logged
            _note_if_empty(axes, {id(rows[-1]): speed, id(rows[2]): twin}.get(id(axes))
                           if grpo else None,
                           "reward logged as null at every step\n(every episode masked)"
                           if null else "not logged")

    if rate_labels:
        axes = figure.add_subplot(grid[:, len(stage_names)])
        built.pass_rate = axes
        _draw_pass_rates(axes, runs, rates, rate_labels, colours)
    if not stage_names and not rate_labels:
        axes = figure.add_subplot(grid[:, 0])
        axes.set_axis_off()
        axes.text(0.5, 0.5, "nothing logged yet", ha="center", va="center", color="grey")

    if single:
        figure.suptitle(title or _default_title(runs[0], rates[0]), fontsize=13)
    else:  # the legend of runs is the title (a suptitle would sit on top of it)
        figure.legend(handles=[Line2D([], [], color=c, linewidth=2.2, label=run.name)
                               for run, c in zip(runs, colours, strict=True)],
                      loc="outside upper center", ncols=min(len(runs), 4), fontsize="medium",
                      title=title or None, title_fontsize=13)
    return built


def _line(axes: Any, xs: Sequence[float], ys: Sequence[float], gid: str, **style: Any) -> None:
    if any(not math.isnan(y) for y in ys):  # a line of nothing but gaps is not drawn
        if len(xs) <= 60 and "marker" not in style:
            style.update(marker="o", markersize=3)
        (line,) = axes.plot(xs, ys, **style)
        line.set_gid(gid)  # run/series: how tests and readers find a line


def _draw_loss(run: str, records: list[dict[str, Any]], rows: list[Any], colour: str) -> None:
    _line(rows[0], *_series(records, "loss"), f"{run}/loss", color=colour, linewidth=1.4)
    _line(rows[-1], *_series(records, "learning_rate"), f"{run}/learning_rate",
          color=colour, linewidth=1.4)


def _draw_grpo(run: str, records: list[dict[str, Any]], rows: list[Any], twin: Any,
               colour: str) -> None:
    steps, rewards = _series(records, "reward")
    _line(rows[0], steps, rewards, f"{run}/reward", color=colour, alpha=0.35, linewidth=1)
    _line(rows[0], steps, rolling_mean(rewards), f"{run}/reward_rolling_mean", color=colour,
          linewidth=2.2, marker=None)
    _line(rows[1], *_series(records, _groups_with_variance),
          f"{run}/groups_with_variance", color=colour, linewidth=1.6)
    _line(rows[2], *_series(records, _episode_length), f"{run}/mean_length",
          color=colour, linewidth=1.6)
    _line(twin, *_series(records, "env/turns"), f"{run}/turns", color=colour,
          linewidth=1.2, linestyle="--")
    known = [r for r in rewards if not math.isnan(r)]
    if known and min(known) >= 0 and max(known) <= 1:
        rows[0].set_ylim(-0.03, 1.03)  # a 0-1 reward reads on its whole scale


def _draw_rollout(run: str, records: list[dict[str, Any]], axes: Any, speed: Any,
                  colour: str) -> None:
    for label, key, style in WALL_TIMES:
        _line(axes, *_series(records, key), f"{run}/time/{label}", color=colour,
              linewidth=1.3, linestyle=style)
    _line(speed, *_series(records, "rollout/tokens_per_s"), f"{run}/tokens_per_s",
          color=colour, linewidth=1.2, linestyle=":")


def _note_if_empty(axes: Any, twin: Any, note: str) -> None:
    if not axes.get_lines() and not (twin and twin.get_lines()):
        axes.text(0.5, 0.5, note, ha="center", va="center", color="grey",
                  transform=axes.transAxes)


def _draw_pass_rates(axes: Any, runs: Sequence[RunCurves], rates: list[list[tuple[str, float]]],
                     labels: list[str], colours: list[str]) -> None:
    position = {label: i for i, label in enumerate(labels)}
    for index, (run, run_rates, colour) in enumerate(zip(runs, rates, colours, strict=True)):
        if not run_rates:
            continue
        xs = [position[stage] for stage, _ in run_rates]
        ys = [rate for _, rate in run_rates]
        _line(axes, xs, ys, f"{run.name}/pass_rate", color=colour, linewidth=1.2,
              marker="o", markersize=7)
        if len(runs) <= 2:  # more runs' numbers would overlap; the grid reads them
            side = -1 if index == 0 and len(runs) == 2 else 1  # two runs: left, right
            for x, y in zip(xs, ys, strict=True):
                axes.annotate(f"{y:.2f}", (x, y), xytext=(9 * side, 0),
                              textcoords="offset points", va="center", color=colour,
                              ha="right" if side < 0 else "left", fontsize=10)
    axes.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 3 else 0,
                    ha="right" if len(labels) > 3 else "center")
    axes.set_xlim(-0.5, len(labels) - 0.5)
    axes.set_ylim(-0.05, 1.08)
    axes.set_xlabel("model after stage")
    axes.set_ylabel("held-out pass rate")
    axes.set_title("held-out pass rate\nby stage", fontsize=11)
    axes.grid(alpha=0.3)


def _default_title(run: RunCurves, rates: list[tuple[str, float]]) -> str:
    if len(rates) < 2:
        return run.name
    (first, before), (last, after) = rates[0], rates[-1]
    return f"{run.name}: held-out pass rate {before:.2f} ({first}) \u2192 {after:.2f} ({last})"


def save_figure(curves: CurveFigure, path: str | os.PathLike) -> Path:
    """Write the figure as a PNG at ``path``, atomically (a temporary file, then a rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    curves.figure.savefig(tmp, format="png", dpi=DPI)
    os.replace(tmp, path)
    return path


def plot_curves(records: list[dict[str, Any]], path: str | os.PathLike, title: str = "",
                evals: dict[str, Any] | None = None, name: str = "") -> Path:
    """Draw one run's figure from its ``metrics.jsonl`` records and its ``eval.json``
    (``evals``) and write the PNG at ``path`` atomically; ``name`` is the run's (its
    folder's name by default)."""
    run = RunCurves(name or Path(path).parent.name, records, evals)
    return save_figure(build_figure([run], title), path)


def load_run(run_dir: str | os.PathLike) -> RunCurves:
    """The run in ``run_dir`` (an ``agentgym train`` output_dir), named for the folder: its
    ``metrics.jsonl`` records, which must exist and hold a line, and its ``eval.json``
    (None if it has none). Raises :class:`~agentgym.core.errors.MissingFileError` or
    :class:`~agentgym.core.errors.InvalidArgumentError` naming the folder."""
    from agentgym.trainers.layout import EVAL_FILE, METRICS_FILE
    from agentgym.trainers.metrics import read_metrics

    run_dir = Path(run_dir)
    fix = "name the output_dir of an `agentgym train` run"
    if not run_dir.is_dir():
        raise MissingFileError(f"{str(run_dir)!r} is not a folder", f"{fix.capitalize()}.")
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        raise MissingFileError(f"{str(run_dir)!r} holds no {METRICS_FILE}",
                               f"{fix.capitalize()} that has trained at least one step.")
    try:
        records = read_metrics(metrics)
        evals_path = run_dir / EVAL_FILE
        evals = json.loads(evals_path.read_text()) if evals_path.is_file() else None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"{str(run_dir)!r}: a file there is not JSON ({e});"
                                   f" {fix} whose files are intact") from None
    if not records:
        raise InvalidArgumentError(f"{str(metrics)!r} is empty: the run in {str(run_dir)!r}"
                                   " has logged no training step yet; plot it once it has")
    return RunCurves(run_dir.name, records, evals if isinstance(evals, dict) else None)


def plot_runs(run_dirs: Sequence[str | os.PathLike], out: str | os.PathLike | None = None
              ) -> Path:
    """``agentgym plot``: draw the runs in ``run_dirs`` on one figure and write it to
    ``out``; by default ``RUN_DIR/reward_curve.png`` for one run, and
    :data:`COMPARISON_FILE` in the current directory for several. Runs whose folders share
    a name are named by their paths."""
    from agentgym.trainers.layout import CURVE_FILE

    runs = [load_run(run_dir) for run_dir in run_dirs]
    if len({run.name for run in runs}) < len(runs):
        for run, run_dir in zip(runs, run_dirs, strict=True):
            run.name = str(run_dir)
    if out is None:
        out = Path(run_dirs[0]) / CURVE_FILE if len(runs) == 1 else Path(COMPARISON_FILE)
    return save_figure(build_figure(runs), out)
