"""agentgym view: the index over trajectory files, its HTTP API, and the page in real
Chromium (the list loads, filters narrow it as one types, the figures above it follow, a
link opens an episode, an episode shows its tool calls and its loss mask, training runs
are drawn per stage). Screenshots of each view are saved under
build/test-artifacts/viewer/."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentgym.core.serving import LocalServer
from agentgym.rollout.trajectory import Trajectory
from agentgym.viewer.index import EpisodeIndex
from agentgym.viewer.server import MAX_PAGE, viewer_app

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "viewer"
DIFF = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-old = 1\n+new = 2\n"


def trajectory(i: int) -> Trajectory:
    solved = i % 3 != 0
    messages = [
        {"role": "system", "content": "Fix the bug."},
        {"role": "user", "content": f"Task {i}: make the tests pass."},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "run", "arguments": json.dumps({"command": "pytest -q"})}}]},
        {"role": "tool", "tool_call_id": f"call_{i}", "name": "run",
         "content": "1 failed" if i != 7 else DIFF},
        {"role": "assistant", "content": "Done." + (" needle-in-episode-5" if i == 5 else "")}]
    return Trajectory(env="swe-lite" if i % 2 else "calculator", task_id=f"task-{i}",
                      episode=i, policy="oracle", prompt_ids=[1, 2, 3],
                      completion_ids=[10, 11, 12, 13, 14], loss_mask=[1, 1, 0, 0, 1],
                      logprobs=[0.0] * 5, reward=1.0 if solved else 0.0,
                      finish_reason="submitted" if solved else "max_turns", turns=2,
                      timings={"init": 0.5, "generate": 1.0 + i, "tool": 0.25, "grade": 0.1},
                      messages=messages, metrics={"passed": solved},
                      # Episode 8: an agent program's, whose history was rewritten once.
                      earlier_samples=[{"token_ids": [1, 2, 20, 21, 22],
                                        "loss_mask": [0, 0, 1, 1, 0], "logprobs": [0.0] * 5,
                                        "versions": [-1] * 5, "calls": 1}] if i == 8 else [])


def write(path: Path, rows: range) -> None:
    with path.open("a") as handle:
        for i in rows:
            handle.write(trajectory(i).to_json() + "\n")


def test_the_index_reads_rows_and_then_only_what_is_appended(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, range(10))
    index = EpisodeIndex([path])
    assert len(index.rows) == 10 and index.rows[3].tokens == 8
    assert index.episode(7)["messages"][3]["content"] == DIFF
    with path.open("a") as handle:  # a line still being written waits for its newline
        handle.write(trajectory(10).to_json()[:50])
    assert index.refresh() == 0
    with path.open("a") as handle:
        handle.write(trajectory(10).to_json()[50:] + "\n" + "not json\n")
    assert index.refresh() == 1 and index.bad_lines == 1
    assert index.episode(10)["task_id"] == "task-10"
    page = index.query(finish_reason="max_turns")
    assert page.total == 4 and {r.task_id for r in page.rows} == {"task-0", "task-3",
                                                                  "task-6", "task-9"}
    assert (page.mean_reward, page.pass_rate) == (0.0, 0.0)
    page = index.query(sort="time_s", descending=True, limit=2)
    assert page.total == 11 and [r.task_id for r in page.rows] == ["task-10", "task-9"]
    # The figures are of every matching episode, not of the page shown: 7 of 11 solved.
    assert page.mean_reward == page.pass_rate == 7 / 11
    assert index.query(text="NEEDLE-in-episode").total == 1
    assert index.query(env="calculator", min_reward=1.0).total == 4  # tasks 2, 4, 8 and 10
    assert index.query(policy="oracle").total == 11 and index.query(policy="hf").total == 0
    with pytest.raises(ValueError, match="sort='nope'"):
        index.query(sort="nope")


def test_bad_lines_are_skipped_and_counted_the_rest_still_shows(tmp_path):
    """A line with a field of the wrong type, nested past the JSON parser, or not an
    episode at all costs that line only."""
    path = tmp_path / "t.jsonl"
    write(path, range(3))
    good = json.loads(trajectory(3).to_json())
    bad = [{**good, "turns": "many"}, {**good, "reward": [1]}, {**good, "episode": {"a": 1}},
           {**good, "timings": {"init": "slow"}, "task_id": "odd-timings"}]
    with path.open("a") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in bad)
        handle.write('{"task_id": "deep", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
        handle.write(json.dumps([1, 2]) + "\n")
    write(path, range(4, 6))
    index = EpisodeIndex([path])
    assert [r.task_id for r in index.rows] == ["task-0", "task-1", "task-2", "odd-timings",
                                               "task-4", "task-5"]
    assert index.bad_lines == 5 and index.rows[3].timings == {}
    assert index.query(sort="time_s").total == 6
    # A bad line takes no position: links name the episodes that show.
    assert [r.position for r in index.rows] == list(range(6))
    assert index.locate(0, 4) == 4 and index.rows[4].task_id == "task-4"


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "run.jsonl"
    write(path, range(250))
    server = LocalServer(viewer_app(EpisodeIndex([path]))).start()
    yield server, path
    server.close()


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_the_api_pages_filters_and_names_bad_requests(served):
    server, path = served
    assert server.url.startswith("http://127.0.0.1:")
    status, data = get(server.url + "/api/episodes?finish=max_turns&offset=80&limit=10")
    assert status == 200 and data["total"] == 84 and len(data["episodes"]) == 4
    assert get(server.url + "/api/facets")[1]["envs"] == ["calculator", "swe-lite"]
    assert get(server.url + "/api/episode/5")[1]["messages"][-1]["content"].endswith("5")
    assert get(server.url + "/api/episode/999")[0] == 404
    # Out-of-range counts are clamped (the page's own requests never send them), never a
    # dropped connection; what is not a number is named.
    assert len(get(server.url + "/api/episodes?limit=0")[1]["episodes"]) == 1
    status, data = get(server.url + "/api/episodes?limit=inf&offset=-inf")
    assert status == 200 and len(data["episodes"]) == min(250, MAX_PAGE) == data["total"]
    assert get(server.url + "/api/episodes?offset=1e300")[1]["episodes"] == []
    status, data = get(server.url + "/api/episodes?limit=nan")
    assert status == 400 and "limit='nan'" in data["error"]
    assert get(server.url + "/api/episodes?min=high")[0] == 400
    # The figures above the list are of every matching episode.
    rewards = [trajectory(i).reward for i in range(0, 250, 2)]
    data = get(server.url + "/api/episodes?env=calculator&limit=5")[1]
    assert data["total"] == 125 and len(data["episodes"]) == 5
    assert data["mean_reward"] == pytest.approx(sum(rewards) / 125)
    assert data["pass_rate"] == pytest.approx(sum(r == 1.0 for r in rewards) / 125)
    assert get(server.url + "/api/episodes?file=0")[1]["total"] == 250
    assert get(server.url + "/api/episodes?file=1")[1]["total"] == 0  # no such file
    # A link names an episode by its file and its position there.
    assert get(server.url + "/api/locate?file=0&position=42")[1] == {"index": 42}
    status, data = get(server.url + "/api/locate?file=0&position=9999")
    assert status == 404 and data["error"] == "no episode 9999 in run.jsonl: it holds 250"
    assert get(server.url + "/api/locate?file=7&position=0")[0] == 404
    assert get(server.url + "/api/locate?file=inf&position=-inf")[0] == 404  # clamped
    status, data = get(server.url + "/api/locate?file=a&position=1")
    assert status == 400 and data["error"] == "file='a' is not a number"
    assert get(server.url + "/api/episode/five") == (
        400, {"error": "episode 'five' is not a number: /api/episode/N, N from 0"})
    assert get(server.url + "/api/nothing") == (404, {"error": "no page /api/nothing"})
    write(path, range(250, 260))
    assert get(server.url + "/api/facets")[1]["episodes"] == 260  # appended: seen
    # The files grow under the page: no answer may come from a cache.
    for address in ("/", "/api/facets", "/api/episode/0", "/api/nothing"):
        request = urllib.request.Request(server.url + address, method="HEAD")
        try:
            headers = urllib.request.urlopen(request, timeout=10).headers
        except urllib.error.HTTPError as error:
            headers = error.headers
        assert headers["Cache-Control"] == "no-store", address


def test_the_page_in_chromium(served):
    """The list, its live filters and the figures above it, an episode opened by a click
    and by a link (back and forward move between them). Screenshots: list.png,
    filtered.png and episode.png under build/test-artifacts/viewer/."""
    from tests.plugins.web.conftest import chromium_missing

    if chromium_missing():
        pytest.skip(f"real-browser test: {chromium_missing()}")
    from agentgym.plugins.web.browser import sync_chromium

    server, path = served
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    count_is = "document.querySelector('#count').textContent === '{} episodes'"
    with sync_chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.wait_for_selector("#rows tr")
        assert page.locator("#rows tr").count() == 100
        assert page.locator("#count").inner_text() == "250 episodes"
        solved = [trajectory(i).reward for i in range(250)]
        assert page.locator("#mean-reward").inner_text() == f"{sum(solved) / 250:.3f}"
        assert page.locator("#pass-rate").inner_text() == f"{100 * sum(solved) / 250:.1f}%"
        # One file, one policy: no column for either.
        assert not page.locator("th.col-file").is_visible()
        assert not page.locator("th.col-policy").is_visible()
        page.screenshot(path=ARTIFACTS / "list.png", full_page=False)

        page.select_option("#finish", "max_turns")
        page.wait_for_function(count_is.format(84))
        assert set(page.locator("#rows tr td:nth-child(7)").all_inner_texts()) == {"max_turns"}
        assert page.locator("#mean-reward").inner_text() == "0.000"
        # Text filters apply as one types: no Enter, no leaving the field.
        page.locator("#q").press_sequentially("needle-in-episode", delay=20)
        page.select_option("#finish", "")
        page.wait_for_function(count_is.format(1))
        assert page.locator("#pass-rate").inner_text() == "100.0%"  # episode 5: solved
        page.screenshot(path=ARTIFACTS / "filtered.png")
        page.fill("#q", "")
        page.wait_for_function(count_is.format(250))
        page.locator("#min").press_sequentially("1")
        page.wait_for_function(count_is.format(166))
        assert page.locator("#pass-rate").inner_text() == "100.0%"
        page.fill("#min", "")
        page.wait_for_function(count_is.format(250))

        page.click("#rows tr[data-index='7']")
        page.wait_for_selector("#messages")
        assert page.url.endswith("#run.jsonl/7")  # the address names the episode
        assert page.locator(".call strong").first.inner_text() == "→ run"
        argument = page.locator(".call .arg").first
        assert argument.locator(".arg-name").inner_text() == "command"
        assert argument.locator("code").inner_text() == "pytest -q"
        assert page.locator("#messages .add").first.inner_text() == "+new = 2"  # the diff
        page.click("#show-mask")
        assert page.locator("#mask .model").count() == 3
        assert page.locator("#mask .env").count() == 2
        page.screenshot(path=ARTIFACTS / "episode.png", full_page=True)
        # An agent program's episode of two samples: each its own row, masked spans kept.
        page.goto(server.url + "#run.jsonl/8")
        page.wait_for_selector("#episode:not([hidden]) h2")
        page.click("#show-mask")
        assert page.locator("#mask .sample").count() == 2
        assert page.locator("#mask .sample h4").all_inner_texts() == [
            "sample 1 of 2 (1 call)", "sample 2 of 2"]
        assert page.locator("#mask .sample").first.locator(".model").count() == 2
        assert page.locator("#mask .model").count() == 2 + 3
        page.go_back()
        page.go_back()
        page.wait_for_selector("#list:not([hidden])")
        page.go_forward()
        page.wait_for_selector("#episode:not([hidden]) h2")
        assert page.locator("#episode h2").inner_text() == "#7 task-7"

        # A link opens its episode in a new page; one that names none says so.
        linked = browser.new_page()
        linked.on("pageerror", lambda e: errors.append(str(e)))
        linked.goto(server.url + "/#run.jsonl/42")
        linked.wait_for_selector("#episode:not([hidden]) h2")
        assert linked.locator("#episode h2").inner_text() == "#42 task-42"
        linked.goto(server.url + "/#run.jsonl/9999")
        linked.wait_for_function("document.querySelector('#notice').textContent"
                                 ".includes('no episode 9999 in run.jsonl')")
        assert linked.locator("#list").is_visible()

        write(path, range(250, 255))  # a file still being written: the list grows
        page.click("#back")
        page.wait_for_function(count_is.format(255), timeout=10_000)
    assert not errors, errors
    assert all((ARTIFACTS / name).stat().st_size > 0
               for name in ("list.png", "filtered.png", "episode.png"))


def test_the_command_serves_until_ctrl_c(tmp_path):
    """`agentgym view` in the foreground, as a user runs it: the address it prints answers,
    and Ctrl-C (SIGINT) stops it cleanly."""
    import os
    import re
    import signal
    import subprocess
    import sys

    write(tmp_path / "t.jsonl", range(3))
    command = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "view", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        first = command.stdout.readline()
        url = re.search(r"open (http://127\.0\.0\.1:\d+/) ", first)
        assert url, first
        assert get(url[1] + "api/facets")[1]["episodes"] == 3
        command.send_signal(signal.SIGINT)
        assert command.wait(timeout=30) == 0
        assert command.stdout.read() == ""  # quiet: no request log, no traceback
    finally:
        command.kill()


def test_the_command_names_what_it_cannot_serve(tmp_path):
    import socket

    from click.testing import CliRunner

    from agentgym.cli import main

    runner = CliRunner()
    done = runner.invoke(main, ["view", str(tmp_path)])
    assert done.exit_code != 0 and "no trajectory files (*.jsonl)" in done.output
    write(tmp_path / "t.jsonl", range(3))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = runner.invoke(main, ["view", str(tmp_path), "--port", str(port)])
    assert done.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in done.output
    assert "Address already in use" in done.output and "0 for any free one" in done.output


def training_run(folder: Path, shift: float, evals: bool) -> Path:
    """A run folder as ``agentgym train`` leaves it: an SFT stage logged every 5 steps up
    to 40 (with TRL's held-out loss every 20), then a 20-step GRPO stage, and eval.json."""
    folder.mkdir()
    lines = [{"stage": "00-sft", "kind": "sft", "step": s, "loss": 2.0 - s / 40 - shift,
              "learning_rate": 1e-4 * (1 - s / 50)} for s in range(5, 45, 5)]
    lines[3]["eval_loss"], lines[7]["eval_loss"] = 1.9 - shift, 1.5 - shift
    lines += [{"stage": "01-grpo", "kind": "grpo", "step": s, "reward": 0.02 * s + shift,
               "env/pass_rate": 0.02 * s, "env/turns": 3 + s / 10, "time/init_s": 1.0,
               "time/generate_s": 2.0 + s / 10, "time/tool_s": 0.5, "time/grade_s": 0.2,
               "rollout/tokens_per_s": 100.0 + s, "completions/mean_length": 50 + s,
               "episodes/mean_length": 60 + s, "time/step_s": 4.0 + s / 10,
               "time/rollout_s": 3.0 + s / 10}
              for s in range(1, 21)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines)
                                          + '{"stage": "01-grpo", "rew')  # being written
    if evals:
        stages = [("base", "base", 0.1), ("00-sft", "sft", 0.3), ("01-grpo", "grpo", 0.55)]
        (folder / "eval.json").write_text(json.dumps({"env": "calculator", "episodes": 20,
            "stages": [{"stage": n, "kind": k, "pass_rate": r, "mean_reward": r}
                       for n, k, r in stages]}))
    return folder


def test_training_runs_are_plotted_per_stage_in_chromium(tmp_path):
    """Each stage on its own steps (GRPO's 20 steps read 1 to 20, not where its lines fall
    in the file), y axes with a few round ticks, runs overlaid, and the held-out pass rate
    by stage from eval.json. Screenshot: build/test-artifacts/viewer/training.png."""
    from agentgym.viewer.server import open_index, training_runs
    from tests.plugins.web.conftest import chromium_missing

    folders = [training_run(tmp_path / "run-a", 0.0, evals=True),
               training_run(tmp_path / "run-b", 0.1, evals=False)]
    write(folders[0] / "demonstrations.jsonl", range(5))
    assert training_runs([*folders, tmp_path / "nothing"]) == folders
    server = LocalServer(viewer_app(open_index(folders), training_runs(folders))).start()
    try:
        status, data = get(server.url + "/api/runs")
        assert status == 200 and [r["name"] for r in data["runs"]] == ["run-a", "run-b"]
        assert len(data["runs"][0]["records"]) == 28  # the line being written waits
        assert data["runs"][0]["evals"]["stages"][2]["pass_rate"] == 0.55
        assert data["runs"][1]["evals"] is None
        if chromium_missing():
            pytest.skip(f"real-browser test: {chromium_missing()}")
        from agentgym.plugins.web.browser import sync_chromium

        errors: list[str] = []
        with sync_chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url)
            page.wait_for_selector("#show-training:not([hidden])")
            page.click("#show-training")
            page.wait_for_selector(".chart")
            assert page.url.endswith("#training")
            assert page.locator(".stage h2").all_inner_texts() == [
                "held-out", "00-sft (sft)", "01-grpo (grpo)"]

            grpo = page.locator(".stage[data-stage='01-grpo']")
            assert grpo.locator(".chart h3").all_inner_texts() == [
                "reward", "pass rate", "turns", "episode length (tokens)",
                "wall seconds", "tokens per second"]
            # One line per run for the episode length: agentgym's, not TRL's as well.
            length = grpo.locator(".chart").nth(3)
            assert length.locator("polyline").count() == 2
            reward = grpo.locator(".chart").first
            assert reward.locator("polyline").count() == 2  # the two runs, overlaid
            steps = ",".join(str(s) for s in range(1, 21))
            assert reward.locator("polyline").first.get_attribute("data-x") == steps
            x_ticks = [float(t) for t in reward.locator(".x-tick").all_text_contents()]
            assert len(x_ticks) >= 3 and all(1 <= t <= 20 and t == int(t) for t in x_ticks)
            y_ticks = [float(t) for t in reward.locator(".y-tick").all_text_contents()]
            assert len(y_ticks) >= 3 and y_ticks == sorted(y_ticks)
            assert y_ticks[0] <= 0.02 and y_ticks[-1] >= 0.5  # the data lie within them
            # wall seconds: per step and per rollout, for each of the two runs
            assert grpo.locator(".chart").nth(4).locator("polyline").count() == 4

            sft = page.locator(".stage[data-stage='00-sft']")
            assert sft.locator(".chart h3").all_inner_texts() == [
                "loss", "learning rate", "held-out loss"]
            assert sft.locator(".chart").first.locator("polyline").first.get_attribute(
                "data-x") == "5,10,15,20,25,30,35,40"
            assert sft.locator(".chart").nth(2).locator("polyline").first.get_attribute(
                "data-x") == "20,40"

            held_out = page.locator("#held-out")
            assert held_out.locator("h3").inner_text() == "held-out pass rate by stage"
            assert held_out.locator(".x-tick").all_text_contents() == ["base", "00-sft",
                                                                     "01-grpo"]
            assert held_out.locator(".value").all_text_contents() == ["0.1", "0.3", "0.55"]
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=ARTIFACTS / "training.png", full_page=True)
            page.go_back()
            page.wait_for_selector("#list:not([hidden])")
        assert not errors, errors
    finally:
        server.close()


def tiny_png() -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + \
        chunk(b"IEND", b"")


def test_screenshots_go_into_the_trajectory_and_onto_the_page(tmp_path):
    """An env that returns info["screenshot"] (web envs with screenshot=True): the loop
    keeps each with its message, and the episode page shows them."""
    from agentgym.core import OraclePolicy
    from agentgym.plugins.calculator.env import CalculatorEnv
    from agentgym.rollout.loop import play_episode

    class Snapping(CalculatorEnv):
        async def extra_info(self, episode):
            return {"screenshot": tiny_png()}

    env = Snapping()
    try:
        result = env.run_coroutine(play_episode(env, OraclePolicy(), env.task_ids()[0]))
    finally:
        env.close()
    assert [s["message"] for s in result.screenshots] == [1, 3, 5]
    assert all(result.messages[s["message"]]["role"] in ("user", "tool")
               for s in result.screenshots)
    path = tmp_path / "shots.jsonl"
    path.write_text(result.to_json() + "\n")
    from tests.plugins.web.conftest import chromium_missing

    if chromium_missing():
        pytest.skip(f"real-browser test: {chromium_missing()}")
    from agentgym.plugins.web.browser import sync_chromium

    server = LocalServer(viewer_app(EpisodeIndex([path]))).start()
    try:
        with sync_chromium() as browser:
            page = browser.new_page()
            page.goto(server.url)
            page.click("#rows tr[data-index='0']")
            page.wait_for_selector("#messages")
            assert page.locator("#messages details.screenshot").count() == 3
            page.locator("#messages details.screenshot summary").first.click()
            width = page.locator("#messages details.screenshot img").first.evaluate(
                "img => img.complete && img.naturalWidth")
            assert width == 2  # the PNG decoded
    finally:
        server.close()


def test_with_a_tokenizer_the_mask_shows_tokens_as_text(tmp_path):
    pytest.importorskip("transformers", reason="the tiny model needs the train extra")
    import asyncio

    from transformers import AutoTokenizer

    from agentgym.rollout.evaluate import rollout
    from agentgym.rollout.policies.hf import hf_policy
    from agentgym.testing import build_tiny_model

    model = build_tiny_model(tmp_path / "model")
    [played] = asyncio.run(rollout("calculator", hf_policy(str(model)), 1))
    assert played.completion_ids
    path = tmp_path / "t.jsonl"
    path.write_text(played.to_json() + "\n")
    tokenizer = AutoTokenizer.from_pretrained(model)
    server = LocalServer(viewer_app(EpisodeIndex([path]), tokenizer=tokenizer)).start()
    try:
        episode = get(server.url + "/api/episode/0")[1]
    finally:
        server.close()
    pieces = episode["completion_pieces"]
    assert len(pieces) == len(played.completion_ids)
    assert pieces == [tokenizer.decode([i]) for i in played.completion_ids]
    assert "<|im_end|>" in pieces  # tokens as text, the template's end of turn among them
