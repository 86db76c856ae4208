"""agentgym view on a large trajectory file: indexing, and the page's first view in Chromium.

    python bench/viewer.py [--episodes 100000] [--json]

Writes ``--episodes`` synthetic trajectories (six messages and 200 tokens each, about 3 KB
a line) to a temporary file, then measures:

* ``index_s_100k``: seconds to index the file (:class:`agentgym.viewer.index.EpisodeIndex`);
* ``first_view_ms``: from opening the page in Chromium to its first 100 rows shown;
* ``episode_open_ms``: from clicking a row to its conversation shown.

Target (issue 20): the first view of a 100,000-episode file in under 2 s.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _shared import print_results

from agentgym.core.serving import LocalServer
from agentgym.rollout.trajectory import Trajectory
from agentgym.viewer.index import EpisodeIndex
from agentgym.viewer.server import viewer_app


def write_file(path: Path, episodes: int) -> None:
    rng = random.Random(0)
    with path.open("w") as handle:
        for i in range(episodes):
            reward = float(rng.random() < 0.4)
            messages = [
                {"role": "system", "content": "Solve the task with the tools."},
                {"role": "user", "content": f"Task {i}: " + "describe the problem. " * 20},
                {"role": "assistant", "content": "", "tool_calls": [{
                    "id": "call_1_0", "type": "function", "function": {
                        "name": "run", "arguments": json.dumps({"command": "ls -la"})}}]},
                {"role": "tool", "tool_call_id": "call_1_0", "content": "file\n" * 60},
                {"role": "assistant", "content": "", "tool_calls": [{
                    "id": "call_2_0", "type": "function", "function": {
                        "name": "submit", "arguments": json.dumps({"answer": str(i)})}}]},
                {"role": "tool", "tool_call_id": "call_2_0", "content": "Submitted."}]
            handle.write(Trajectory(
                env=rng.choice(["swe-lite", "terminal", "web-shop"]), task_id=f"task-{i}",
                episode=i, policy="hf", prompt_ids=list(range(100)),
                completion_ids=list(range(100)), loss_mask=[1, 0] * 50,
                logprobs=[-0.5] * 100, reward=reward,
                finish_reason="submitted" if reward else rng.choice(["max_turns", "error"]),
                turns=2, timings={"init": rng.random(), "generate": rng.random() * 5,
                                  "tool": rng.random(), "grade": rng.random()},
                messages=messages).to_json() + "\n")


def measure(episodes: int, opens: int = 5) -> dict[str, float]:
    from agentgym.plugins.web.browser import sync_chromium

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trajectories.jsonl"
        write_file(path, episodes)
        start = time.perf_counter()
        index = EpisodeIndex([path])
        index_s = time.perf_counter() - start
        server = LocalServer(viewer_app(index)).start()
        try:
            with sync_chromium() as browser:
                page = browser.new_page()
                start = time.perf_counter()
                page.goto(server.url)
                page.wait_for_selector("#rows tr:nth-child(100)")
                first_view_ms = (time.perf_counter() - start) * 1000
                open_ms = []
                for n in range(opens):
                    start = time.perf_counter()
                    page.click(f"#rows tr:nth-child({n * 10 + 1})")
                    page.wait_for_selector("#messages .message")
                    open_ms.append((time.perf_counter() - start) * 1000)
                    page.click("#back")
        finally:
            server.close()
    return {"index_s_100k": index_s, "first_view_ms": first_view_ms,
            "episode_open_ms": statistics.median(open_ms), "episodes": episodes,
            "file_mb": 0.0 if not index.rows else
            sum(r.length for r in index.rows) / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results = measure(args.episodes)
    print_results(results, args.json, width=18, digits=2)


if __name__ == "__main__":
    sys.exit(main())
