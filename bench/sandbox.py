"""Sandbox latency and throughput, per backend.

    python bench/sandbox.py [--backends local,docker] [--json]

For each backend: create+close latency (median, p95 over sequential sandboxes), the
round trip of ``exec("true")`` in an open sandbox (median), and the throughput of 32
sandboxes open at once, each running ``true`` in a loop. Targets (issue 3): local create
< 100 ms median and exec < 20 ms median; docker exec < 100 ms median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from _shared import percentile

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import SandboxError


async def measure(backend: str, creates: int, execs: int, per_box: int) -> dict[str, float]:
    create_ms = []
    for _ in range(creates):
        start = time.perf_counter()
        box = await open_sandbox(backend)
        await box.close()
        create_ms.append((time.perf_counter() - start) * 1000)

    box = await open_sandbox(backend)
    exec_ms = []
    try:
        for _ in range(execs):
            start = time.perf_counter()
            await box.exec("true")
            exec_ms.append((time.perf_counter() - start) * 1000)
    finally:
        await box.close()

    boxes = await asyncio.gather(*(open_sandbox(backend) for _ in range(32)))
    try:
        async def loop(b):
            for _ in range(per_box):
                await b.exec("true")

        start = time.perf_counter()
        await asyncio.gather(*(loop(b) for b in boxes))
        elapsed = time.perf_counter() - start
    finally:
        await asyncio.gather(*(b.close() for b in boxes))
    return {
        "create_ms_p50": statistics.median(create_ms),
        "create_ms_p95": percentile(create_ms, 0.95),
        "exec_ms_p50": statistics.median(exec_ms),
        "concurrent32_execs_per_s": 32 * per_box / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local,docker")
    parser.add_argument("--creates", type=int, default=40, help="sequential create+close")
    parser.add_argument("--execs", type=int, default=300, help="execs of `true` in one box")
    parser.add_argument("--per-box", type=int, default=20, help="execs per box, 32 boxes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    results: dict[str, dict[str, float] | dict[str, str]] = {}
    for backend in args.backends.split(","):
        try:
            results[backend] = asyncio.run(
                measure(backend, args.creates, args.execs, args.per_box))
        except SandboxError as e:
            results[backend] = {"skipped": str(e)}
    if args.json:
        print(json.dumps(results))
        return
    keys = ["create_ms_p50", "create_ms_p95", "exec_ms_p50", "concurrent32_execs_per_s"]
    print(f"{'backend':<8}" + "".join(f"{k:>26}" for k in keys))
    for backend, row in results.items():
        if "skipped" in row:
            print(f"{backend:<8}  skipped: {row['skipped']}")
            continue
        print(f"{backend:<8}" + "".join(f"{row[k]:>26.2f}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
