"""Reset and grading latency of ``swe-synth`` on the local backend.

    python bench/swe.py [--package toolz==1.2.0] [--tasks 5] [--resets 30] [--json]

Workload: ``--tasks`` tasks synthesized from a real PyPI project (cached after the first
run; the first run downloads the sdist and builds the project's dependency env), one
``swe-synth`` env over them. Measured, after one warm-up episode per task (so the cached
repositories and templates exist, as they do in any training run after its first step):

* reset: ``env.reset`` wall time, which starts a local sandbox whose workspace is a
  copy-on-write view of the task's repository with the dependency env mounted read-only
  (nothing is installed per episode). Target: median < 1 s.
* grade: the oracle's patch applied, then ``submit``; the step's wall time, which takes
  the workspace's diff, opens a fresh sandbox at the same base and runs the FAIL_TO_PASS and
  PASS_TO_PASS tests.

* synthesis: ``validated_fraction``, the tasks kept per candidate (mutant) tried, with
  ``grader_rejected`` (candidates the mutant checks kept and the real grader rejected) and
  ``validation_ms_per_candidate`` (the grader's wall time per candidate it validated:
  gold patch, no change and a no-op change graded at once). These come from the
  synthesis that made the tasks (the cached one, when the tasks were cached).

Prints a table, or with ``--json`` one object with ``reset_ms_p50``, ``reset_ms_p95``,
``grade_ms_p50``, ``validated_fraction`` (and the counts and constants).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _shared import percentile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", default="toolz==1.2.0", help="PACKAGE==VERSION")
    parser.add_argument("--tasks", type=int, default=5, help="tasks to synthesize and use")
    parser.add_argument("--resets", type=int, default=30, help="resets measured")
    parser.add_argument("--grades", type=int, default=5, help="gradings measured")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    import agentgym
    from agentgym.plugins.swe.repo import split_spec
    from agentgym.plugins.swe.synth import synthesize_report, write_jsonl

    package, version = split_spec(args.package)
    report = synthesize_report(package, version, args.tasks, progress=not args.json)
    rows = report.tasks
    task_file = Path(tempfile.mkdtemp(prefix="agentgym-bench-swe-")) / "tasks.jsonl"
    write_jsonl(rows, task_file)
    env = agentgym.make("swe-synth", tasks=str(task_file))
    raw = env.unwrapped
    ids = [task.id for task in raw.tasks]
    try:
        for task_id in ids:  # warm-up: repositories built, templates prepared
            env.reset(options={"task_id": task_id})
        resets = []
        for i in range(args.resets):
            start = time.perf_counter()
            env.reset(options={"task_id": ids[i % len(ids)]})
            resets.append((time.perf_counter() - start) * 1000)
        grades, rewards = [], []
        for i in range(args.grades):
            env.reset(options={"task_id": ids[i % len(ids)]})
            fix, submit = raw.task.solution
            env.step(fix)
            start = time.perf_counter()
            _, reward, _, _, _ = env.step(submit)
            grades.append((time.perf_counter() - start) * 1000)
            rewards.append(reward)
    finally:
        env.close()

    result = {
        "reset_ms_p50": round(statistics.median(resets), 1),
        "reset_ms_p95": round(percentile(resets, 0.95), 1),
        "grade_ms_p50": round(statistics.median(grades), 1),
        "grade_ms_p95": round(percentile(grades, 0.95), 1),
        "resets": len(resets), "grades": len(grades),
        "oracle_mean_reward": sum(rewards) / len(rewards),
        "package": args.package, "tasks": len(ids),
        "validated_fraction": round(report.validated_fraction, 4),
        "candidates_tried": report.tried, "grader_rejected": report.grader_rejected,
        "validation_ms_per_candidate": round(
            1000 * report.grading_seconds / max(1, report.graded), 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"swe-synth on the local backend: {args.package}, {len(ids)} tasks")
    print(f"{'':10} {'p50 ms':>10} {'p95 ms':>10} {'n':>5}")
    print(f"{'reset':10} {result['reset_ms_p50']:>10} {result['reset_ms_p95']:>10}"
          f" {len(resets):>5}")
    print(f"{'grade':10} {result['grade_ms_p50']:>10} {result['grade_ms_p95']:>10}"
          f" {len(grades):>5}")
    print(f"oracle mean reward over the graded episodes: {result['oracle_mean_reward']:.2f}"
          " (must be 1.00)")
    print(f"synthesis: {len(ids)} tasks from {report.tried} candidates (validated fraction"
          f" {result['validated_fraction']:.3f}), {report.grader_rejected} rejected by the"
          f" grader, validation {result['validation_ms_per_candidate']} ms per candidate")
    print("target: reset median < 1000 ms")


if __name__ == "__main__":
    main()
