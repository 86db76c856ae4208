"""Memory env latency and memory_search speed.

    python bench/memory.py [--episodes 40] [--sessions 100] [--items 10000] [--json]

Latency: ``--episodes`` resets of ``memory-sessions`` tasks of ``--sessions`` sessions, each
followed by one step (the first turn of the task's reference solution: save what the first
session says, show the next one); medians in ms. A reset generates the task (seeded) and
opens the episode's SQLite memory in its own folder.

Search: a store of ``--items`` notes (generated sentences from the tasks' distractor corpus
and facts), then 200 searches of two to four words each; ``search_ms_p50_10k`` is the
median time of one ``memory_search`` tool call (query to rendered text).
Target (issue 19): memory_search < 10 ms median at 10k stored items.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _shared import print_results

import agentgym
from agentgym.plugins.memory.generator import distractor_conversations
from agentgym.plugins.memory.store import MemoryStore
from agentgym.plugins.memory.tools import MemoryTools


def latency(episodes: int, sessions: int) -> tuple[list[float], list[float]]:
    env = agentgym.make("memory-sessions", sessions=sessions, num_tasks=episodes + 1)
    resets, steps = [], []
    try:
        ids = env.task_ids()
        env.reset(seed=0, options={"task_id": ids[-1]})  # warm: imports, the corpus
        for index in range(episodes):
            start = time.perf_counter()
            env.reset(seed=index, options={"task_id": ids[index]})
            resets.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            env.step(env.task.solution[0])
            steps.append((time.perf_counter() - start) * 1000)
    finally:
        env.close()
    return resets, steps


def search_speed(items: int, searches: int = 200) -> list[float]:
    rng = random.Random(0)
    lines = [line for conversation in distractor_conversations() for line in conversation
             if 20 <= len(line) <= 300]
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore(Path(folder) / "memory.db")
        store.write_many((f"{rng.randint(2020, 2024)}/{rng.randint(1, 12):02}: "
                          f"{rng.choice(lines)}", ()) for _ in range(items))
        search = next(t for t in MemoryTools(store).tools() if t.name == "memory_search")
        words = [w for line in lines for w in line.split() if w.isalpha() and len(w) > 3]
        times = []
        for _ in range(searches):
            query = " ".join(rng.sample(words, rng.randint(2, 4)))
            start = time.perf_counter()
            asyncio.run(search.call({"query": query, "k": 5}))
            times.append((time.perf_counter() - start) * 1000)
        store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    resets, steps = latency(args.episodes, args.sessions)
    searches = search_speed(args.items)
    results = {"reset_ms_p50": statistics.median(resets),
               "step_ms_p50": statistics.median(steps),
               "search_ms_p50_10k": statistics.median(searches),
               "episodes": args.episodes, "sessions": args.sessions, "items": args.items}
    print_results(results, args.json, width=22, digits=2)


if __name__ == "__main__":
    sys.exit(main())
