"""Checks for cron-next-runs: /app/next_runs.json against the expected run times."""
import json
import sys
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


want = json.loads(Path("/tests/expected.json").read_text())
try:
    got = json.loads(Path("/app/next_runs.json").read_text())
except (OSError, ValueError) as error:
    got = None
    print(f"cannot read /app/next_runs.json: {error}")
if check(isinstance(got, dict), "/app/next_runs.json is a JSON object"):
    check(sorted(got) == sorted(want), f"one key per job command ({sorted(got)})")
    for command, runs in want.items():
        check(got.get(command) == runs, f"{command}: {got.get(command)} (want {runs})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
