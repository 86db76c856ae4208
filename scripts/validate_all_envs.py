"""Run ``agentgym validate`` (oracle, noop, known-wrong solutions and every exploit probe
that applies) on every registered env id, or those matching a prefix, a few ids at a time
in separate processes; print one line per id and a total.

    python scripts/validate_all_envs.py [PREFIX] [-n 5 | --all] [--backend docker]
                                        [--jobs 2] [--json FILE]

An env that cannot be made offline (a ``MissingResourceError``: data, an image or a server
that is not there) is reported as skipped with its reason; so is one that takes no
``--backend``. Exits non-zero if any check fails. CI plays the probes on samples
(tests/**/test_*probes*.py, tests/plugins/*/test_reward_integrity.py); this is the full
run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
import time
from typing import Any


def validate_one(env_id: str, n: int | None, backend: str | None) -> dict[str, Any]:
    from agentgym.core import MissingResourceError
    from agentgym.rollout.validate import NoBackendError, env_kwargs_with_backend, validate

    start = time.perf_counter()
    row: dict[str, Any] = {"env": env_id}
    try:
        kwargs = env_kwargs_with_backend(env_id, {}, backend)
        report = validate(env_id, kwargs, n=n)
    except (MissingResourceError, NoBackendError) as error:
        return {**row, "status": f"skipped: {error}", "seconds": time.perf_counter() - start}
    except Exception as error:  # an env that cannot even be validated fails its line
        return {**row, "status": f"FAILED: {type(error).__name__}: {error}",
                "seconds": time.perf_counter() - start}
    counts = report.probe_counts()
    row.update(report.to_dict())
    row.update(status="ok" if report.ok else "FAILED: " + "; ".join(
        f"{r.task_id} {r.check}: {r.reason}" for r in report.failed)[:2000],
        probes_played=sum(c["played"] for c in counts.values()),
        probes_paid=sum(c["paid"] for c in counts.values()),
        seconds=time.perf_counter() - start)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prefix", nargs="?", default="")
    parser.add_argument("-n", type=int, default=5, help="tasks per env id (default 5)")
    parser.add_argument("--all", action="store_true", help="every task of every env id")
    parser.add_argument("--backend", default=None, help="the sandbox backend (envs that take"
                        " one; the others are skipped)")
    parser.add_argument("--jobs", type=int, default=2, help="env ids validated at once")
    parser.add_argument("--json", dest="json_out", default=None,
                        help="write every id's report (one JSON object per line) here")
    args = parser.parse_args()
    from agentgym.core.plugins import plugin_host

    ids = sorted(i for i in plugin_host().entries("envs") if i.startswith(args.prefix))
    if not ids:
        parser.error(f"no env id starts with {args.prefix!r} (`agentgym list envs`)")
    n = None if args.all else args.n
    totals = dict(tasks=0, checked=0, failed=0, probes_played=0, probes_paid=0)
    start = time.perf_counter()
    out = open(args.json_out, "w") if args.json_out else None  # noqa: SIM115
    try:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            rows = pool.map(validate_one, ids, [n] * len(ids), [args.backend] * len(ids))
            for row in rows:
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                if "checked" in row:
                    totals["tasks"] += row["tasks"]
                    totals["checked"] += row["checked"]
                    totals["failed"] += len(row["failed"])
                    totals["probes_played"] += row["probes_played"]
                    totals["probes_paid"] += row["probes_paid"]
                elif row["status"].startswith("FAILED"):
                    totals["failed"] += 1
                figures = (f"{row['tasks']:4} tasks {row['checked']:5} checks"
                           f" {row['probes_played']:5} probe plays {row['probes_paid']:3} paid"
                           if "checked" in row else " " * 47)
                print(f"{row['env']:<36} {figures} {row['seconds']:7.1f}s  "
                      f"{row['status'][:300]}", flush=True)
    finally:
        if out:
            out.close()
    print(f"{len(ids)} env ids: {totals['tasks']} tasks, {totals['checked']} checks,"
          f" {totals['failed']} failed; {totals['probes_played']} probe plays,"
          f" {totals['probes_paid']} paid; {time.perf_counter() - start:.0f} s")
    return 1 if totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
