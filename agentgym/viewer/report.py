"""Eval reports and run comparisons as self-contained HTML pages (plots are inline SVG).

* :func:`write_report` (``agentgym eval ... --report DIR``): ``DIR/report.html`` with the
  results per env and per task (pass@1, pass@k, mean reward, turns, tokens, time per stage)
  and three plots (reward distribution, turns histogram, mean time per stage), next to
  ``summary.json`` and ``trajectories.jsonl``, which :func:`load_run` reads back.
* :func:`compare_runs` (``agentgym compare RUN_A RUN_B``): two runs side by side, per task:
  solved by A only, by B only, by both, by neither (of the tasks both ran; a task only one
  ran is counted apart), the mean rewards, and a warning when they share no task. A run
  is a report folder, a trajectories file, or an evaluation an ``agentgym train`` run kept
  (:func:`load_run`: ``RUN_DIR`` or ``RUN_DIR:STAGE``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.core.errors import InvalidArgumentError
from agentgym.rollout.evaluate import STAGES, EvalReport, pass_at_k
from agentgym.rollout.trajectory import Trajectory, TrajectoryWriter, read_trajectories
from agentgym.trainers.layout import EVAL_FILE, EVALS_DIR, is_run

SUMMARY_FILE, TRAJECTORIES_FILE, REPORT_FILE = "summary.json", "trajectories.jsonl", "report.html"

_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #1d2330; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e3e6eb; text-align: left; }
th { background: #eef0f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td { vertical-align: top; overflow-wrap: anywhere; } td.num { white-space: nowrap; }
.plots { display: flex; gap: 24px; flex-wrap: wrap; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
.only-a { background: #e8f1ff; } .only-b { background: #fff4e0; }
.warning { background: #fff0f0; border-left: 4px solid #d33; padding: 6px 10px; }
"""


# ---- per-task results --------------------------------------------------------------------


def task_rows(trajectories: Sequence[Trajectory], k: int = 1) -> list[dict[str, Any]]:
    """One row per (env, task): attempts, pass@1, pass@k, mean reward, turns, tokens and
    time per stage, in task order of first appearance."""
    groups: dict[tuple[str, str], list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault((t.env, t.task_id), []).append(t)
    rows = []
    for (env, task_id), runs in groups.items():
        solved = sum(t.reward >= 1.0 for t in runs)
        row = {"env": env, "task_id": task_id, "attempts": len(runs),
               "pass@1": solved / len(runs),
               "mean_reward": _mean([t.reward for t in runs]),
               "turns": _mean([t.turns for t in runs]),
               "tokens": _mean([len(t.prompt_ids) + len(t.completion_ids) for t in runs])}
        if k > 1:
            row[f"pass@{k}"] = pass_at_k(len(runs), solved, k) if len(runs) >= k else None
        row.update({f"{s}_s": _mean([t.timings.get(s, 0.0) for t in runs]) for s in STAGES})
        rows.append(row)
    return rows


def env_rows(trajectories: Sequence[Trajectory], policy: str, k: int) -> list[dict[str, Any]]:
    """The eval summary of each env in ``trajectories``."""
    by_env: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_env.setdefault(t.env, []).append(t)
    return [EvalReport(env, policy, runs, k=k).summary() for env, runs in by_env.items()]


# ---- plots (inline SVG) ------------------------------------------------------------------


def bar_chart(labels: Sequence[str], values: Sequence[float], *, unit: str = "",
              width: int = 360, height: int = 200) -> str:
    """A vertical bar chart as an SVG element (bars labelled below, values above)."""
    top = max([*values, 1e-9])
    left, bottom, gap = 8, 30, 4
    bar = (width - 2 * left) / max(1, len(values))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
             f' role="img">']
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = (height - bottom - 20) * value / top
        x, y = left + i * bar, height - bottom - h
        parts.append(f'<rect x="{x + gap / 2:.1f}" y="{y:.1f}" width="{bar - gap:.1f}"'
                     f' height="{h:.1f}" fill="#3b7ddd"><title>{html.escape(label)}:'
                     f' {html.escape(number(value))}{unit}</title></rect>')
        parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - bottom + 14}" font-size="10"'
                     f' text-anchor="middle">{html.escape(label)}</text>')
        if value:
            parts.append(f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" font-size="10"'
                         f' text-anchor="middle">{html.escape(number(value))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: Sequence[float], bins: Sequence[float]) -> list[int]:
    """Counts of ``values`` in ``[bins[i], bins[i+1])`` (the last bin closed)."""
    counts = [0] * (len(bins) - 1)
    for value in values:
        for i in range(len(counts)):
            if bins[i] <= value < bins[i + 1] or (i == len(counts) - 1 and value == bins[-1]):
                counts[i] += 1
                break
    return counts


def plots(trajectories: Sequence[Trajectory]) -> dict[str, str]:
    """The report's plots: reward distribution, turns histogram, mean time per stage."""
    # Tenths of [0, 1), and 1.0 on its own: a solved episode is its own bar.
    reward_counts = [0] * 11
    for t in trajectories:
        reward_counts[min(10, max(0, int(t.reward * 10)))] += 1
    most = max([t.turns for t in trajectories] + [1])
    step = max(1, -(-most // 12))
    turn_edges = list(range(0, most + step + 1, step))
    turn_counts = histogram([t.turns for t in trajectories], turn_edges)
    turn_labels = [str(a) if step == 1 else f"{a}-{a + step - 1}" for a in turn_edges[:-1]]
    stage_means = [_mean([t.timings.get(s, 0.0) for t in trajectories]) for s in STAGES]
    return {
        "reward distribution (episodes)": bar_chart(
            [f"{i / 10:.1f}" for i in range(11)], reward_counts),
        "turns (episodes)": bar_chart(turn_labels, turn_counts),
        "mean time per stage (s)": bar_chart(list(STAGES), stage_means, unit=" s"),
    }


# ---- the report --------------------------------------------------------------------------


def check_report_folder(folder: str | Path, overwrite: bool = False) -> None:
    """Refuse ``folder`` when it already holds a report's files, unless ``overwrite``
    (FileExistsError naming the folder, the files and the fix); call it before the work
    the report is for."""
    folder = Path(folder)
    held = [name for name in (REPORT_FILE, SUMMARY_FILE, TRAJECTORIES_FILE)
            if (folder / name).exists()]
    if held and not overwrite:
        raise FileExistsError(
            f"{str(folder)!r} already holds a report ({', '.join(held)}); choose another"
            " folder, remove it, or pass --force to overwrite it")


def write_report(folder: str | Path, env: str, policy: str,
                 trajectories: Sequence[Trajectory], k: int = 1,
                 overwrite: bool = False) -> Path:
    """Write ``report.html``, ``summary.json`` and ``trajectories.jsonl`` into ``folder``;
    return the report's path. A folder that already holds a report is refused
    (:func:`check_report_folder`) unless ``overwrite``."""
    folder = Path(folder)
    check_report_folder(folder, overwrite)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / TRAJECTORIES_FILE).unlink(missing_ok=True)  # the writer refuses a full one
    summary = EvalReport(env, policy, list(trajectories), k=k).summary()
    (folder / SUMMARY_FILE).write_text(json.dumps({**summary, "k": k}, indent=2))
    with TrajectoryWriter(folder / TRAJECTORIES_FILE) as writer:
        for trajectory in trajectories:
            writer.write(trajectory)
    tasks = task_rows(trajectories, k)
    body = [f"<h1>eval {html.escape(env)} --policy {html.escape(policy)}</h1>",
            "<h2>Results</h2>", _table(_columns(env_rows(trajectories, policy, k), "env")),
            '<h2>Plots</h2><div class="plots">',
            *(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>"
              for title, svg in plots(trajectories).items()),
            "</div>", f"<h2>Tasks ({len(tasks)})</h2>", _table(tasks)]
    path = folder / REPORT_FILE
    path.write_text(_page(f"eval {env}", body))
    return path


@dataclass
class Run:
    """An eval run read back: its name, summary and trajectories."""

    name: str
    summary: dict[str, Any]
    trajectories: list[Trajectory]


def load_run(target: str | Path) -> Run:
    """One run of episodes:

    * a report folder (``summary.json`` and ``trajectories.jsonl``: ``agentgym eval
      --report``);
    * a trajectories JSONL file (its summary computed);
    * an ``agentgym train`` run folder: ``RUN_DIR``, the evaluation after its last stage
      (the final model), or ``RUN_DIR:STAGE``, the evaluation after that stage (``base``:
      before training; a stage's name such as ``01-grpo``, or its kind when one stage has
      it). The run is named ``RUN_DIR:STAGE`` either way.

    Raises FileNotFoundError saying what was expected, and ValueError for a stage the run
    has not evaluated (listing those it has).
    """
    folder, stage = Path(target), None
    if not folder.exists() and ":" in str(target):  # RUN_DIR:STAGE (paths may hold colons)
        run, _, stage = str(target).rpartition(":")
        folder = Path(run)
        if not is_run(folder):
            raise FileNotFoundError(f"{run} is not an agentgym train run folder (it has no"
                                    f" run.json), so it has no stage {stage!r} to compare")
    name = str(target)
    if is_run(folder) and not (folder / TRAJECTORIES_FILE).is_file():
        stage, evaluated = _run_stage(folder, stage)
        name = f"{folder}:{stage}"
        folder = evaluated
    if folder.is_dir():
        path = folder / TRAJECTORIES_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{folder} has no {TRAJECTORIES_FILE}: give a folder"
                                    " written by agentgym eval --report, an agentgym train"
                                    " run folder, or a JSONL file")
        trajectories = read_trajectories(path)
        summary_path = folder / SUMMARY_FILE
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    elif folder.is_file():
        trajectories = read_trajectories(folder)
        summary = {}
    else:
        raise FileNotFoundError(f"{folder} does not exist")
    if not summary and trajectories:
        first = trajectories[0]
        summary = EvalReport(first.env, first.policy, trajectories).summary()
    return Run(name, summary, trajectories)


def run_evals(folder: str | Path) -> dict[str, Path]:
    """The evaluations training run ``folder`` kept, stage name to its report folder, in
    the run's order (``eval.json``'s, else ``base`` then the stages by name); only folders
    that hold episodes."""
    folder = Path(folder)
    kept = {p.name: p for p in (folder / EVALS_DIR).glob("*")
            if (p / TRAJECTORIES_FILE).is_file()}
    try:
        order = [str(e.get("stage")) for e in
                 json.loads((folder / EVAL_FILE).read_text(encoding="utf-8")).get("stages", [])]
    except (OSError, ValueError, AttributeError):
        order = []
    ranked = sorted(kept, key=lambda s: (s not in order, order.index(s) if s in order else 0,
                                         s != "base", s))
    return {stage: kept[stage] for stage in ranked}


def _run_stage(run: Path, stage: str | None) -> tuple[str, Path]:
    """``(stage, its eval report folder)`` of training run ``run``: ``stage`` (a name, or
    a kind that one stage has), or the last one evaluated."""
    evals = run_evals(run)
    if not evals:
        raise FileNotFoundError(
            f"{run} is a training run that kept no evaluation (eval/<stage>/): its config has"
            " no eval section, or it was trained before agentgym kept eval episodes; evaluate"
            " a stage's model with `agentgym eval ENV_ID --policy hf:RUN_DIR/NN-KIND/final"
            " --report DIR` and compare DIR")
    if stage is None:
        stage = list(evals)[-1]
    elif stage not in evals:
        by_kind = [name for name in evals if name.partition("-")[2] == stage]
        if len(by_kind) != 1:
            raise InvalidArgumentError(f"{run} has no evaluation of stage {stage!r}; it has:"
                                       f" {', '.join(evals)} (give {run}:STAGE with one of them)")
        stage = by_kind[0]
    return stage, evals[stage]


def compare_runs(a: Run, b: Run) -> dict[str, Any]:
    """Per task both runs ran: solved by A only, by B only, both, neither (solved: any
    attempt scored 1.0); a task only one ran is ``not_in_b`` / ``not_in_a``. Returns each
    run's summary, ``counts`` of each outcome, ``tasks`` (one row per task with the mean
    rewards), ``shared_tasks`` and ``warning``: a sentence when the runs share no task
    (else None)."""
    def solved(run: Run) -> dict[str, tuple[bool, float]]:
        by_task: dict[str, list[float]] = {}
        for t in run.trajectories:
            by_task.setdefault(t.task_id, []).append(t.reward)
        return {task: (max(r) >= 1.0, _mean(r)) for task, r in by_task.items()}

    left, right = solved(a), solved(b)
    rows = []
    counts = {"a_only": 0, "b_only": 0, "both": 0, "neither": 0, "not_in_b": 0, "not_in_a": 0}
    for task in [*left, *(t for t in right if t not in left)]:
        in_a, in_b = left.get(task), right.get(task)
        if in_a is None or in_b is None:
            kind = "not_in_a" if in_a is None else "not_in_b"
        else:
            kind = ("both" if in_a[0] and in_b[0] else "a_only" if in_a[0] else
                    "b_only" if in_b[0] else "neither")
        counts[kind] += 1
        rows.append({"task_id": task, "outcome": kind,
                     "reward_a": in_a[1] if in_a else None,
                     "reward_b": in_b[1] if in_b else None})
    shared = len(left.keys() & right.keys())
    warning = None
    if not shared and (left or right):
        env_a, env_b = a.summary.get("env"), b.summary.get("env")
        on = f" (A on {env_a}, B on {env_b})" if env_a != env_b else ""
        warning = (f"the runs share no task: A ran {len(left)} tasks and B {len(right)}{on},"
                   " none the same, so no task is compared. Compare runs of the same tasks:"
                   " the same env and env kwargs (e.g. split, num_tasks)")
    return {"a": {"name": a.name, **_brief(a.summary)},
            "b": {"name": b.name, **_brief(b.summary)}, "counts": counts, "tasks": rows,
            "shared_tasks": shared, "warning": warning}


def write_compare(path: str | Path, comparison: dict[str, Any]) -> Path:
    """The comparison as an HTML page at ``path``."""
    a, b, counts = comparison["a"], comparison["b"], comparison["counts"]
    runs = [{"run": label, **{k: v for k, v in side.items()}}
            for label, side in (("A", a), ("B", b))]
    changed = [r for r in comparison["tasks"] if r["outcome"] in ("a_only", "b_only")]
    warning = comparison.get("warning")
    body = ["<h1>compare</h1>", _table(runs),
            f'<p class="warning">warning: {html.escape(warning)}</p>' if warning else "",
            "<h2>Tasks</h2>", f"<p>{html.escape(shared_line(comparison))}</p>",
            f"<p>solved by A only: {counts['a_only']}, by B only: {counts['b_only']},"
            f" by both: {counts['both']}, by neither: {counts['neither']}</p>",
            '<div class="plots"><figure><figcaption>tasks by outcome</figcaption>',
            bar_chart(["A only", "B only", "both", "neither"],
                      [counts["a_only"], counts["b_only"], counts["both"], counts["neither"]]),
            "</figure></div>", f"<h2>Solved by one run only ({len(changed)})</h2>",
            _table(changed, row_class=lambda r: r["outcome"].replace("_", "-")),
            "<h2>Every task</h2>", _table(comparison["tasks"])]
    path = Path(path)
    path.write_text(_page("compare", body))
    return path


def shared_line(comparison: dict[str, Any]) -> str:
    """How many tasks the runs of ``comparison`` have in common, and how many each ran."""
    counts = comparison["counts"]
    shared = comparison["shared_tasks"]
    ran_a = shared + counts["not_in_b"]
    ran_b = shared + counts["not_in_a"]
    return f"{shared} tasks in common (A ran {ran_a}, B ran {ran_b})"


# ---- internals ---------------------------------------------------------------------------


def _brief(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("env", "policy", "n", "mean_reward", "pass_rate", "mean_turns")
    return {k: summary.get(k) for k in keys}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def number(value: float) -> str:
    """A number as a person reads it in a table: whole numbers as they are, others to
    three places (``0.500``, ``12.340``), thousands grouped; a magnitude that three places
    would show as zero is ``<0.001``, never ``2.53e-05``."""
    if isinstance(value, int) or (value.is_integer() and abs(value) >= 1000):
        return f"{value:,.0f}"
    if value and abs(value) < 0.0005:
        return "<0.001" if value > 0 else ">-0.001"
    return f"{value:,.3f}"


def _cell(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f'<td class="num">{number(value)}</td>'
    if isinstance(value, dict):  # one "key value" a line: a stage-time dict stays narrow
        return "<td>" + "<br>".join(html.escape(_pair(k, v)) for k, v in value.items()) + "</td>"
    return f"<td>{html.escape('' if value is None else str(value))}</td>"


def _pair(key: str, value: Any) -> str:
    if isinstance(value, dict):  # per-type scores, a count's total and mean
        return f"{key}: " + ", ".join(_pair(k, v) for k, v in value.items())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{key} {number(value)}"
    return f"{key} {value}"


def _columns(rows: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """``rows`` turned on their side, one row per field and a column per row (named by
    its ``key`` field): a summary of many fields reads down a page, not off its edge."""
    return [{"": field, **{str(row.get(key)): row.get(field) for row in rows}}
            for field in dict.fromkeys(f for row in rows for f in row) if field != key]


def _table(rows: Sequence[dict[str, Any]], row_class=None) -> str:
    if not rows:
        return "<p>none</p>"
    columns = list(dict.fromkeys(key for row in rows for key in row))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        f'<tr class="{row_class(row) if row_class else ""}">'
        + "".join(_cell(row.get(c)) for c in columns) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, body: list[str]) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<link rel="icon" href="data:,"><title>{html.escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body>{''.join(body)}</body></html>")
