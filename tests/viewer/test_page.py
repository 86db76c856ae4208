"""The episode page and the list in real Chromium, on the shapes of data real runs write:
a SWE-style episode (a grader's hundreds of test statuses and its log, a patch sent as a
heredoc), several files open side by side, and calculator episodes graded by the real
grader. Screenshots are saved under build/test-artifacts/viewer/."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgym.core.serving import LocalServer
from agentgym.rollout.trajectory import Trajectory
from agentgym.viewer.index import EpisodeIndex
from agentgym.viewer.server import viewer_app
from tests.viewer.test_viewer import ARTIFACTS, trajectory

PATCH_COMMAND = """cat > fix.patch <<'EOF'
diff --git a/calc.py b/calc.py
--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
EOF
git apply fix.patch && python -m pytest -q tests/test_calc.py"""

FAILING = {"tests/test_calc.py::test_add_negative": "FAILED",
           "tests/test_calc.py::test_add_floats": "FAILED",
           "tests/test_calc.py::test_add_big": "MISSING"}


def swe_episode() -> Trajectory:
    """An episode as the SWE env writes it (``agentgym/plugins/swe/env.py``'s grade): 190
    test statuses, the log's last lines, the patch applied through a heredoc."""
    tests = {f"tests/test_calc.py::test_case_{i}": "PASSED" for i in range(186)}
    tests["tests/test_calc.py::test_slow"] = "SKIPPED"
    tests.update(FAILING)
    log = "\n".join([f"tests/test_calc.py::test_case_{i} PASSED" for i in range(60)]
                    + ["FAILED tests/test_calc.py::test_add_negative - assert -1 == 1",
                       "=== 2 failed, 186 passed, 1 skipped in 3.21s ==="])
    calls = [("bash", {"command": "grep -n 'def add' calc.py"}, "1:def add(a, b):"),
             ("bash", {"command": PATCH_COMMAND, "timeout": 120}, "2 failed, 186 passed")]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are fixing a repository."},
        {"role": "user", "content": "add() subtracts. Make the tests pass."}]
    for n, (name, arguments, output) in enumerate(calls):
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": f"call_{n}", "name": name, "content": output}]
    metrics = {"resolved": False, "f2p_passed": 1, "f2p_total": 3, "p2p_passed": 186,
               "p2p_total": 187, "applied": True, "dropped_files": [], "dropped_reasons": {},
               "tests": tests, "reason": "2/3 FAIL_TO_PASS and 1/187 PASS_TO_PASS tests"
               " did not pass", "outcomes_from": "report", "tampered": [], "diff_chars": 180,
               "missing": {"tests/test_calc.py::test_add_big": "not collected"},
               "test_command": "python -m pytest -rA tests/test_calc.py", "exit_code": 1,
               "log_tail": log}
    return Trajectory(env="swe-lite", task_id="calc__calc-1", episode=0, policy="oracle",
                      reward=0.0, finish_reason="submitted", turns=3, messages=messages,
                      metrics=metrics)


@contextlib.contextmanager
def serve(paths: list[Path]) -> Iterator[LocalServer]:
    server = LocalServer(viewer_app(EpisodeIndex(paths))).start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def browser():
    from tests.plugins.web.conftest import chromium_missing

    if chromium_missing():
        pytest.skip(f"real-browser test: {chromium_missing()}")
    from agentgym.plugins.web.browser import sync_chromium

    with sync_chromium() as chromium:
        yield chromium


def open_page(browser: Any, url: str, errors: list[str]) -> Any:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return page


def test_a_swe_episode_reads_conversation_first(tmp_path, browser):
    """The grading is a short summary (reward, counts by status, the tests not passing by
    name) with its full detail folded, so the conversation starts on the first screen;
    the log is text, a patch sent in a heredoc is coloured as a diff and the command
    around it is not. Screenshots: swe-episode.png and swe-grading.png under
    build/test-artifacts/viewer/."""
    path = tmp_path / "swe.jsonl"
    episode = swe_episode()
    path.write_text(episode.to_json() + "\n")
    errors: list[str] = []
    with serve([path]) as server:
        page = open_page(browser, server.url + "/#swe.jsonl/0", errors)
        page.wait_for_selector("#messages")
        assert page.locator("#messages").bounding_box()["y"] < 450  # not 5,000 px down
        summary = page.locator("#grading")
        assert summary.locator(".counts").inner_text() == (
            "tests: 190, 186 PASSED, 1 SKIPPED, 2 FAILED, 1 MISSING")
        assert summary.locator(".failing code").all_inner_texts() == list(FAILING)
        assert summary.locator("[data-fact='f2p passed'] b").inner_text() == "1"
        assert summary.locator("[data-fact='reward'] b").inner_text() == "0"
        assert "2/3 FAIL_TO_PASS" in summary.inner_text()
        assert page.locator("#metrics").get_attribute("open") is None  # folded
        assert not page.locator("#metrics .tests").is_visible()

        patch_call = page.locator(".call").nth(1)
        assert patch_call.locator(".arg-name").all_inner_texts() == ["command", "timeout"]
        assert patch_call.locator(".arg code").inner_text() == "120"
        lines = patch_call.locator(".arg pre > div")
        texts = lines.all_inner_texts()
        assert texts == PATCH_COMMAND.split("\n")  # the command as written, line by line
        colours = dict(zip(texts, [c or "" for c in lines.evaluate_all(
            "divs => divs.map(d => d.className)")], strict=True))
        assert colours["-    return a - b"] == "del" and colours["+    return a + b"] == "add"
        assert colours["@@ -1,2 +1,2 @@"] == "hunk" and colours["--- a/calc.py"] == "file"
        # The heredoc's opening and terminator, and the command after it, are not the diff.
        assert colours["cat > fix.patch <<'EOF'"] == colours["EOF"] == ""
        assert colours["git apply fix.patch && python -m pytest -q tests/test_calc.py"] == ""
        page.screenshot(path=ARTIFACTS / "swe-episode.png")

        page.click("#metrics summary")
        assert page.locator("#metrics .tests tr").count() == 190
        failed = page.locator("#metrics .tests td.status-fail")
        assert failed.count() == 3
        log = page.locator("#metrics [data-key='log_tail'] pre")
        assert log.inner_text() == episode.metrics["log_tail"]  # text, not an escaped string
        assert "\\n" not in log.inner_text()
        assert page.locator("#metrics [data-key='missing'] pre").inner_text() == json.dumps(
            episode.metrics["missing"], indent=2)
        page.screenshot(path=ARTIFACTS / "swe-grading.png", full_page=True)
    assert not errors, errors


def test_several_files_get_a_column_a_filter_and_their_own_links(tmp_path, browser):
    """Two runs' files with the same name: each row says which it came from, the file and
    policy filters narrow the list and its figures, and a link names the file. Screenshot:
    build/test-artifacts/viewer/files.png."""
    paths = []
    for name, policy, rows in (("a", "oracle", range(0, 6)), ("b", "hf:tiny", range(6, 10))):
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "run.jsonl")
        with paths[-1].open("w") as handle:
            for i in rows:
                played = trajectory(i)
                played.policy = policy
                handle.write(played.to_json() + "\n")
    errors: list[str] = []
    count_is = "document.querySelector('#count').textContent === '{} episodes'"
    with serve(paths) as server:
        page = open_page(browser, server.url, errors)
        page.wait_for_function(count_is.format(10))
        assert page.locator("th.col-file").is_visible()
        assert page.locator("th.col-policy").is_visible()
        assert page.locator("#rows td.col-file").all_inner_texts() == (
            ["a/run.jsonl"] * 6 + ["b/run.jsonl"] * 4)
        page.select_option("#file", label="b/run.jsonl")
        page.wait_for_function(count_is.format(4))
        rewards = [trajectory(i).reward for i in range(6, 10)]  # 6 and 9 unsolved
        assert page.locator("#mean-reward").inner_text() == f"{sum(rewards) / 4:.3f}"
        assert page.locator("#pass-rate").inner_text() == "50.0%"
        page.select_option("#file", "")
        page.select_option("#policy", "oracle")
        page.wait_for_function(count_is.format(6))
        assert set(page.locator("#rows td.col-policy").all_inner_texts()) == {"oracle"}
        page.screenshot(path=ARTIFACTS / "files.png")

        page.goto(server.url + "/#b/run.jsonl/2")
        page.wait_for_selector("#episode:not([hidden]) h2")
        assert page.locator("#episode h2").inner_text() == "#8 task-8"  # b's third
        page.click("#back")
        page.click("#rows tr[data-index='3']")
        page.wait_for_selector("#episode:not([hidden]) h2")
        assert page.url.endswith("#a/run.jsonl/3")
    assert not errors, errors


@pytest.fixture
def calculator_episodes(tmp_path) -> tuple[Path, str]:
    """Task 0 of the calculator played right (oracle) and as a near miss (the answer plus
    one): their file and the task's answer. Played before the browser starts, whose
    event loop would be running in this thread."""
    from agentgym.core import OraclePolicy
    from agentgym.core.policies import build_policy
    from agentgym.plugins.calculator.env import make_task, task_id
    from agentgym.rollout.evaluate import rollout

    right = asyncio.run(rollout("calculator", OraclePolicy(), 1))
    near_miss = asyncio.run(rollout("calculator", build_policy("wrong:2"), 1))
    assert right[0].task_id == near_miss[0].task_id == task_id(0)
    path = tmp_path / "calc.jsonl"
    path.write_text("".join(t.to_json() + "\n" for t in [*right, *near_miss]))
    return path, make_task(0).metadata["answer"]


def test_the_calculator_grading_shows_the_expected_answer(calculator_episodes, browser):
    """Real calculator episodes graded by the real grader: a right answer and a near miss
    each show the answer the grader expected beside the one given. Screenshot:
    build/test-artifacts/viewer/calculator.png."""
    path, answer = calculator_episodes
    errors: list[str] = []
    with serve([path]) as server:
        page = open_page(browser, server.url + "/#calc.jsonl/0", errors)
        page.wait_for_selector("#expected")
        assert page.locator("#expected b").inner_text() == answer
        assert page.locator("[data-fact='answer given'] b").inner_text() == answer
        page.goto(server.url + "/#calc.jsonl/1")
        page.wait_for_function("document.querySelector('#episode h2')?.textContent"
                               " .startsWith('#1 ')")
        assert page.locator("#expected b").inner_text() == answer
        assert page.locator("[data-fact='answer given'] b").inner_text() == str(
            int(answer) + 1)
        assert page.locator("[data-fact='reward'] b").inner_text() == "0"
        page.screenshot(path=ARTIFACTS / "calculator.png")
    assert not errors, errors
