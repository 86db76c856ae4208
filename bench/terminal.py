"""Terminal env latency on the local backend: reset, one terminal step, grading.

    python bench/terminal.py [--episodes 20] [--json]

Plays ``--episodes`` episodes of the shipped ``terminal`` tasks (round robin, templates
built beforehand): per episode, ``reset`` (sandbox open on the task's cached template and
its preparation), one ``terminal`` step running a short command (``ls -la``), then
``submit``, whose step runs the task's tests (grading: the agent's processes stopped and a
fresh session shell started first, the grader's folders made anew, the tests run with a
clean environment). Prints the medians and p95s in ms,
and the sandbox exec round trip measured in the same run as the unit they are made of.
Target (issue 17): reset < 200 ms median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from _shared import percentile, print_results

from agentgym.core.registry import open_sandbox
from agentgym.plugins.terminal.env import TerminalEnv
from agentgym.plugins.terminal.workspace import local_template


def turn(name: str, arguments: dict) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


async def exec_round_trip(count: int = 50) -> float:
    box = await open_sandbox("local")
    try:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            await box.exec("true")
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)
    finally:
        await box.close()


def measure(episodes: int) -> dict[str, float]:
    env = TerminalEnv(backend="local")
    task_ids = env.task_ids()
    for task in env.terminal_tasks.values():  # built once, outside the timings
        asyncio.run(local_template(task))
    reset_ms, step_ms, grade_ms = [], [], []
    try:
        for index in range(episodes):
            start = time.perf_counter()
            env.reset(seed=index, options={"task_id": task_ids[index % len(task_ids)]})
            reset_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            env.step(turn("terminal", {"input": "ls -la"}))
            step_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            _, _, terminated, _, _ = env.step(turn("submit", {}))
            grade_ms.append((time.perf_counter() - start) * 1000)
            assert terminated
    finally:
        env.close()
    return {"reset_ms_p50": statistics.median(reset_ms),
            "reset_ms_p95": percentile(reset_ms, 0.95),
            "step_ms_p50": statistics.median(step_ms),
            "grade_ms_p50": statistics.median(grade_ms),
            "grade_ms_p95": percentile(grade_ms, 0.95),
            "exec_ms_p50": asyncio.run(exec_round_trip()),
            "episodes": episodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results = measure(args.episodes)
    print_results(results, args.json, width=16, digits=1)


if __name__ == "__main__":
    sys.exit(main())
