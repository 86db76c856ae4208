"""Eval reports and run comparisons: the numbers per task, and the pages in real Chromium
(no console errors, every plot drawn)."""

from __future__ import annotations

import html
import json
import re

import pytest
from click.testing import CliRunner

from agentgym.cli import main
from agentgym.viewer.report import compare_runs, histogram, load_run, task_rows
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
    assert comparison["counts"] == {"a_only": 12, "b_only": 0, "both": 0, "neither": 0}
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
