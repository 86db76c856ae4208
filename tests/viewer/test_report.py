"""Eval reports and run comparisons: the numbers per task, and the pages in real Chromium
(no console errors, every plot drawn)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentgym.cli import main
from agentgym.rollout.trajectory import TrajectoryWriter
from agentgym.viewer.report import compare_runs, histogram, load_run, task_rows, write_report
from tests.viewer.test_viewer import ARTIFACTS, trajectory


def test_task_rows_and_histograms():
    runs = [trajectory(i) for i in range(6)]
    for t in runs[3:]:
        t.env, t.task_id = runs[t.episode - 3].env, runs[t.episode - 3].task_id  # 2nd tries
    runs[4].reward = 0.0  # task 1: solved once in two attempts
    rows = task_rows(runs, k=2)
    assert [r["task_id"] for r in rows] == ["task-0", "task-1", "task-2"]
    first = rows[0]  # attempts: task 0 (unsolved) and task 3 (unsolved: 3 % 3 == 0)
    assert first["attempts"] == 2 and first["pass@1"] == 0.0 and first["pass@2"] == 0.0
    assert rows[1]["pass@1"] == 0.5 and rows[1]["pass@2"] == 1.0  # tasks 1 and 4
    assert rows[1]["generate_s"] == (2.0 + 5.0) / 2
    assert histogram([0.0, 0.05, 0.5, 1.0, 1.0], [0.0, 0.5, 1.0]) == [2, 3]


def test_eval_report_and_compare_from_the_command_line(tmp_path):
    runner = CliRunner()
    for name, policy in (("a", "oracle"), ("b", "wrong")):
        done = runner.invoke(main, ["eval", "calculator", "--policy", policy, "-n", "12",
                                    "--k", "2", "--report", str(tmp_path / name), "--json"])
        assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["pass@2"] == 1.0 and summary["n"] == 24
    assert len(load_run(tmp_path / "a").trajectories) == 24
    done = runner.invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                "--out", str(tmp_path / "compare.html"), "--json"])
    assert done.exit_code == 0, done.output
    comparison = json.loads(done.output.strip().splitlines()[-1])
    assert comparison["counts"] == {"a_only": 12, "b_only": 0, "both": 0, "neither": 0,
                                    "not_in_b": 0, "not_in_a": 0}
    assert comparison["shared_tasks"] == 12 and comparison["warning"] is None
    assert compare_runs(load_run(tmp_path / "b"), load_run(tmp_path / "a"))["counts"][
        "b_only"] == 12
    done = runner.invoke(main, ["compare", str(tmp_path / "a"), str(tmp_path)])
    assert done.exit_code != 0 and "trajectories.jsonl" in done.output
    render_in_chromium([tmp_path / "a" / "report.html", tmp_path / "compare.html"])


def render_in_chromium(pages):
    from tests.plugins.web.conftest import chromium_missing

    if chromium_missing():
        pytest.skip(f"real-browser test: {chromium_missing()}")
    from agentgym.plugins.web.browser import sync_chromium

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_chromium() as browser:
        for path in pages:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: m.type == "error" and
                    errors.append(m.text))
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(path.as_uri())
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 1280, f"{path.name} is {width} px wide: wider than the window"
            figures = page.locator("figure svg")
            assert figures.count() >= 1, path
            for i in range(figures.count()):  # every plot has drawn bars
                heights = figures.nth(i).locator("rect").evaluate_all(
                    "rects => rects.map(r => r.getBBox().height)")
                assert heights and max(heights) > 0, (path, i, heights)
            page.screenshot(path=ARTIFACTS / f"{path.stem}.png", full_page=True)
            assert not errors, (path, errors)


def test_the_report_tables_read_as_numbers_and_fit_a_page(tmp_path):
    from agentgym.viewer.report import number, write_report

    runs = [trajectory(i) for i in range(3)]
    for t in runs:
        t.env = "calculator"
        t.timings = {"init": 2.53e-05, "generate": 1234.5, "tool": 0.0, "grade": 0.25}
        t.metrics = {"checks": 3, "score": 0.5}
    page = write_report(tmp_path / "r", runs[0].env, "oracle", runs).read_text()
    tables = "".join(re.findall(r"<table>.*?</table>", page))
    assert "e-05" not in tables and "<0.001" in html.unescape(tables)
    assert "e-05" not in page  # nor in the charts' labels
    assert "init &lt;0.001<br>generate 1,234.500" in page  # a stage per line, not a row
    assert "checks: total 9, per_episode 3.000" in page  # counts apart from scores
    results = page.split("<h2>Results</h2>")[1].split("</table>")[0]
    assert results.count("<th>") == 2  # the summary reads down: a field per row
    assert [number(v) for v in (0, 0.5, 12, 2.53e-05, 1e6, 3.0)] == [
        "0", "0.500", "12", "<0.001", "1,000,000", "3.000"]


# ---- compare: which tasks the runs share, and training run folders -------------------------


def episodes(tasks: range, solved: bool = True) -> list:
    rows = []
    for i in tasks:
        t = trajectory(i)
        t.env, t.reward = "calculator", 1.0 if solved else 0.0
        rows.append(t)
    return rows


def write_episodes(path: Path, rows: list) -> Path:
    with TrajectoryWriter(path) as writer:
        for t in rows:
            writer.write(t)
    return path


def compare(*args: str):
    return CliRunner().invoke(main, ["compare", *args])


def test_compare_warns_when_the_runs_share_no_task(tmp_path: Path):
    a = write_episodes(tmp_path / "a.jsonl", episodes(range(0, 4)))
    b = write_episodes(tmp_path / "b.jsonl", episodes(range(10, 16), solved=False))
    comparison = compare_runs(load_run(a), load_run(b))
    assert comparison["shared_tasks"] == 0
    # A task only one run ran is not "solved by A only".
    assert comparison["counts"] == {"a_only": 0, "b_only": 0, "both": 0, "neither": 0,
                                    "not_in_b": 4, "not_in_a": 6}
    assert comparison["warning"].startswith("the runs share no task: A ran 4 tasks and B 6,")
    done = compare(str(a), str(b), "--out", str(tmp_path / "c.html"))
    assert done.exit_code == 0, done.output
    assert "warning: the runs share no task" in done.stderr
    assert "0 tasks in common (A ran 4, B ran 6)" in done.stdout
    page = (tmp_path / "c.html").read_text()
    assert 'class="warning">warning: the runs share no task' in page

    # Overlapping runs: no warning, and how many tasks they share.
    c = write_episodes(tmp_path / "c.jsonl", episodes(range(2, 8), solved=False))
    done = compare(str(a), str(c), "--out", str(tmp_path / "c.html"), "--json")
    assert done.exit_code == 0 and "warning" not in done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["shared_tasks"] == 2 and comparison["warning"] is None
    assert comparison["counts"]["a_only"] == 2 and comparison["counts"]["not_in_a"] == 4


def training_run(folder: Path, solved: dict[str, range]) -> Path:
    """A run folder as `agentgym train` leaves it: run.json, eval.json and eval/<stage>/."""
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"config": {}}))
    stages = []
    for stage, tasks in solved.items():
        rows = [*episodes(tasks), *episodes(range(tasks.stop, 8), solved=False)]
        write_report(folder / "eval" / stage, "calculator", f"hf:{stage}", rows)
        stages.append({"stage": stage, "kind": stage.partition("-")[2] or "base"})
    (folder / "eval.json").write_text(json.dumps({"stages": stages}))
    return folder


def test_compare_reads_training_runs_and_their_stages(tmp_path: Path):
    run = training_run(tmp_path / "run", {"base": range(0), "00-sft": range(2),
                                          "01-grpo": range(6)})
    final = load_run(run)  # the last stage's evaluation: the final model
    assert final.name == f"{run}:01-grpo" and final.summary["pass_rate"] == 6 / 8
    assert load_run(f"{run}:base").summary["pass_rate"] == 0.0
    assert load_run(f"{run}:sft").name == f"{run}:00-sft"  # a kind one stage has
    with pytest.raises(ValueError, match=r"no evaluation of stage 'rft'; it has: base,"
                                         r" 00-sft, 01-grpo"):
        load_run(f"{run}:rft")

    done = compare(f"{run}:base", str(run), "--out", str(tmp_path / "c.html"), "--json")
    assert done.exit_code == 0, done.output
    comparison = json.loads(done.stdout)
    assert (comparison["a"]["name"], comparison["b"]["name"]) == (f"{run}:base",
                                                                  f"{run}:01-grpo")
    assert comparison["counts"]["b_only"] == 6 and comparison["shared_tasks"] == 8

    other = training_run(tmp_path / "other", {"base": range(0), "00-grpo": range(3)})
    done = compare(str(run), str(other), "--out", str(tmp_path / "c.html"))
    assert done.exit_code == 0, done.output
    assert "8 tasks in common" in done.stdout and "by A only 3" in done.stdout

    # A run that kept no evaluation, and a stage of a folder that is no run.
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "run.json").write_text("{}")
    done = compare(str(bare), str(run))
    assert done.exit_code == 2 and "kept no evaluation" in done.output
    done = compare(f"{tmp_path}:base", str(run))
    assert done.exit_code == 2 and "is not an agentgym train run folder" in done.output
