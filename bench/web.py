"""Web env latency and throughput in real Chromium, on agentgym's local sites.

    python bench/web.py [--episodes 40] [--concurrency 8] [--oracle-episodes N]
                        [--miniwob-episodes 40] [--json]

Latency: ``--episodes`` resets of ``web-shop`` and ``web-forum`` tasks (round robin), each
followed by one action step (the first call of the task's reference solution: a click, a
fill or a goto, and the observation after it); medians and p95s in ms. The browser pool is
warm (one episode ran before the timings), as it is in training.

Throughput: ``episodes_per_min_8`` is ``--concurrency`` oracle episodes at a time (each
env on its own, one process sharing the browser pool), over every task of both sites,
counted per minute of wall time, with the share that scored 1.0.
Target (issue 18): reset < 300 ms median.

MiniWoB: ``--miniwob-episodes`` solver episodes of five families, one family after another
(as GRPO's groups play them), one at a time, with reused tabs (the default) and with a
fresh context an episode (``reuse_tabs=False``), alternating in blocks of ten so that both
see the same machine; ``miniwob_reuse_speedup`` is their ratio of episodes per minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from _shared import percentile, print_results

from agentgym.core import OraclePolicy
from agentgym.plugins.web.miniwob import MiniWoBEnv
from agentgym.plugins.web.sites_env import SiteEnv
from agentgym.rollout.loop import play_episode

SITES = ("shop", "forum")
FAMILIES = ["click-button", "click-option", "click-tab", "enter-text-2", "focus-text-2"]


def first_call(env: SiteEnv, task_id: str) -> dict:
    """The first turn of the task's reference solution, as an assistant message."""
    call = env.tasks.get(task_id).solution[0].tool_calls[0]
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": call.name,
                                          "arguments": json.dumps(call.arguments)}}]}


def latency(episodes: int) -> tuple[list[float], list[float]]:
    envs = {site: SiteEnv(site) for site in SITES}
    resets, steps = [], []
    try:
        for env in envs.values():  # warm: the pool's first browser, the site's server
            env.reset(seed=0, options={"task_id": env.task_ids()[0]})
        for index in range(episodes):
            env = envs[SITES[index % len(SITES)]]
            ids = env.task_ids()
            task_id = ids[(index // len(SITES)) % len(ids)]
            start = time.perf_counter()
            env.reset(seed=index, options={"task_id": task_id})
            resets.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            env.step(first_call(env, task_id))
            steps.append((time.perf_counter() - start) * 1000)
    finally:
        for env in envs.values():
            env.close()
    return resets, steps


async def throughput(concurrency: int, limit: int | None) -> tuple[float, float, int]:
    jobs = [(site, task_id) for site in SITES for task_id in SiteEnv(site).task_ids()]
    jobs = jobs[::len(jobs) // limit][:limit] if limit else jobs
    queue: asyncio.Queue = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    rewards: list[float] = []

    async def worker() -> None:
        by_site = {site: SiteEnv(site) for site in SITES}
        try:
            while not queue.empty():
                site, task_id = queue.get_nowait()
                result = await play_episode(by_site[site], OraclePolicy(), task_id)
                rewards.append(result.reward or 0.0)
        finally:
            for env in by_site.values():
                await env.aclose()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    minutes = (time.perf_counter() - start) / 60
    return len(rewards) / minutes, sum(r == 1.0 for r in rewards) / len(rewards), len(rewards)


async def miniwob(episodes: int) -> dict[str, float]:
    """Episodes per minute with reused tabs and with fresh contexts (module docstring)."""
    from agentgym.core.policies import build_policy

    solver = build_policy("miniwob-solver")
    envs = {reuse: MiniWoBEnv(FAMILIES, reuse_tabs=reuse) for reuse in (True, False)}
    seconds = {True: 0.0, False: 0.0}
    solved = {True: 0, False: 0}
    try:
        for env in envs.values():  # warm: the pool's browsers, the page server
            await play_episode(env, solver, f"{FAMILIES[0]}/999")
        block = 10
        for start in range(0, episodes, block):
            family = FAMILIES[start // block % len(FAMILIES)]
            for reuse, env in envs.items():
                began = time.perf_counter()
                for seed in range(start, min(start + block, episodes)):
                    done = await play_episode(env, solver, f"{family}/{seed}")
                    solved[reuse] += done.reward == 1.0
                seconds[reuse] += time.perf_counter() - began
    finally:
        for env in envs.values():
            await env.aclose()
    reused, fresh = (60 * episodes / seconds[reuse] for reuse in (True, False))
    return {"miniwob_episodes_per_min_reused": reused,
            "miniwob_episodes_per_min_fresh": fresh,
            "miniwob_reuse_speedup": reused / fresh,
            "miniwob_solver_pass_rate": (solved[True] + solved[False]) / (2 * episodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--oracle-episodes", type=int, default=None,
                        help="oracle episodes of the throughput run (default: every task)")
    parser.add_argument("--miniwob-episodes", type=int, default=40,
                        help="MiniWoB solver episodes of each mode (reused tabs, fresh)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    resets, steps = latency(args.episodes)
    per_minute, solved, played = asyncio.run(throughput(args.concurrency,
                                                          args.oracle_episodes))
    results = {"reset_ms_p50": statistics.median(resets),
               "reset_ms_p95": percentile(resets, 0.95),
               "step_ms_p50": statistics.median(steps),
               "step_ms_p95": percentile(steps, 0.95),
               "episodes_per_min_8": per_minute,
               "oracle_pass_rate": solved,
               "throughput_episodes": played,
               "concurrency": args.concurrency,
               "episodes": args.episodes,
               **asyncio.run(miniwob(args.miniwob_episodes))}
    print_results(results, args.json, width=22, digits=1)


if __name__ == "__main__":
    sys.exit(main())
