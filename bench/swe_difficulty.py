"""What each ``swe-synth`` difficulty gives, per project.

    python bench/swe_difficulty.py [--package toolz==1.2.0 ...] [--tasks 10]
                                   [--difficulty easy medium hard] [--jobs 1] [--json]

Workload: ``--tasks`` tasks of each difficulty synthesized from each ``--package``, in a
fresh task cache that shares the default cache's sdists, repositories and dependency envs
(so synthesis and the grader's validation really run, and nothing is downloaded twice).
Per project and difficulty:

* tasks: how many came out (fewer than asked when the project ran out of candidates);
* mutations: mean mutations per task (1, 2, 3 by design);
* fail_to_pass: mean ``FAIL_TO_PASS`` tests per task;
* non_crashing: the share of ``FAIL_TO_PASS`` failures that are wrong values (an
  assertion, an unmet ``pytest.raises``), not crashes (``TypeError``, ``NameError``, ...);
* multi_line: the share of tasks with a mutation spanning several lines;
* validated: the share of candidates the mutant checks kept that the real grader accepted
  (gold patch 1.0, no change 0.0); ``graded`` counts them;
* tried / screened: candidates tried (groups, for medium and hard) and single mutations
  judged to build them;
* seconds: the synthesis's wall time.

Prints a table, or with ``--json`` one object per line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def fresh_cache() -> Path:
    """A task cache whose builds are the default cache's."""
    from agentgym.plugins.swe.repo import cache_dir

    root = Path(tempfile.mkdtemp(prefix="agentgym-bench-difficulty-"))
    for name in ("sdists", "repos", "envs"):
        (cache_dir() / name).mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(cache_dir() / name)
    return root


def measure(spec: str, difficulty: str, tasks: int, jobs: int) -> dict:
    from agentgym.plugins.swe.mutations import MULTI_LINE_KINDS
    from agentgym.plugins.swe.repo import split_spec
    from agentgym.plugins.swe.suite import ASSERTION_STYLE
    from agentgym.plugins.swe.synth import synthesize_report

    package, version = split_spec(spec)
    cache = fresh_cache()
    started = time.monotonic()
    try:
        report = synthesize_report(package, version, tasks, progress=False, jobs=jobs,
                                   difficulty=difficulty, cache=cache)
    finally:
        seconds = time.monotonic() - started
        shutil.rmtree(cache, ignore_errors=True)
    rows = report.tasks
    failures = sum(sum(row["failure_types"].values()) for row in rows)
    wrong_values = sum(count for row in rows for kind, count in row["failure_types"].items()
                       if kind in ASSERTION_STYLE)
    count = max(1, len(rows))
    return {
        "package": spec, "difficulty": difficulty, "tasks": len(rows),
        "mutations": round(sum(len(row["mutations"]) for row in rows) / count, 2),
        "fail_to_pass": round(sum(len(row["FAIL_TO_PASS"]) for row in rows) / count, 2),
        "non_crashing": round(wrong_values / failures, 3) if failures else 0.0,
        "multi_line": round(sum(any(m["kind"] in MULTI_LINE_KINDS for m in row["mutations"])
                                for row in rows) / count, 3),
        "validated": round(len(rows) / report.graded, 3) if report.graded else 0.0,
        "graded": report.graded, "tried": report.tried, "screened": report.screened,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", nargs="+", default=["toolz==1.2.0"],
                        help="PACKAGE==VERSION ...")
    parser.add_argument("--tasks", type=int, default=10, help="tasks per difficulty")
    parser.add_argument("--difficulty", nargs="+", default=["easy", "medium", "hard"])
    parser.add_argument("--jobs", type=int, default=1, help="candidates checked at once")
    parser.add_argument("--json", action="store_true", help="print one JSON object a line")
    args = parser.parse_args()

    columns = ["package", "difficulty", "tasks", "mutations", "fail_to_pass", "non_crashing",
               "multi_line", "validated", "graded", "tried", "screened", "seconds"]
    if not args.json:
        print(" ".join(f"{c:>13}" for c in columns))
    for spec in args.package:
        for difficulty in args.difficulty:
            result = measure(spec, difficulty, args.tasks, args.jobs)
            if args.json:
                print(json.dumps(result), flush=True)
            else:
                print(" ".join(f"{result[c]!s:>13}" for c in columns), flush=True)


if __name__ == "__main__":
    main()
