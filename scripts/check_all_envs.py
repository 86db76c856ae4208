"""Run ``agentgym.testing.check_env`` on every registered env id (or those matching a
prefix), a few at a time in separate processes, and print one line per id.

    python scripts/check_all_envs.py [PREFIX] [--jobs 2]

An env that cannot be made offline (a ``MissingResourceError``: data, an image or a server
that is not there) is reported as skipped with its reason. Exits non-zero if any check
fails. CI runs the same check on every id but the MiniWoB++ families (tests/test_all_envs.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import time


def check(env_id: str) -> tuple[str, str, float]:
    import agentgym
    from agentgym.core import MissingResourceError
    from agentgym.testing import check_env

    start = time.perf_counter()
    try:
        env = agentgym.make(env_id)
        env.reset(seed=0)
    except MissingResourceError as error:
        return env_id, f"skipped: {error}", time.perf_counter() - start
    try:
        check_env(env)
    except Exception as error:
        return env_id, f"FAILED: {type(error).__name__}: {error}", time.perf_counter() - start
    return env_id, "ok", time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefix", nargs="?", default="")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    from agentgym.core.plugins import plugin_host

    ids = sorted(i for i in plugin_host().entries("envs") if i.startswith(args.prefix))
    failed = 0
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for env_id, status, seconds in pool.map(check, ids):
            failed += status.startswith("FAILED")
            print(f"{env_id:<40} {seconds:6.1f}s  {status[:300]}", flush=True)
    print(f"{len(ids)} envs, {failed} failed, {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
