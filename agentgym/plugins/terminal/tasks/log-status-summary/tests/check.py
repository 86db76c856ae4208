"""Checks for log-status-summary: /app/summary.json against the expected figures."""
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
    got = json.loads(Path("/app/summary.json").read_text())
except (OSError, ValueError) as error:
    got = None
    print(f"cannot read /app/summary.json: {error}")
if check(isinstance(got, dict), "/app/summary.json is a JSON object"):
    check(set(got) == set(want), f"exactly the keys {sorted(want)} (got {sorted(got)})")
    for key in ("total_requests", "malformed_lines", "bytes_sent"):
        check(got.get(key) == want[key] and type(got.get(key)) is int,
              f"{key} = {got.get(key)!r} (want {want[key]})")
    check(got.get("status_counts") == want["status_counts"],
          f"status_counts = {got.get('status_counts')!r}")
    top = got.get("top_paths")
    check(isinstance(top, list) and [list(x) for x in top if isinstance(x, (list, tuple))]
          == want["top_paths"], f"top_paths = {top!r}")
    rate = got.get("server_error_rate")
    check(isinstance(rate, (int, float)) and not isinstance(rate, bool)
          and abs(rate - want["server_error_rate"]) < 1e-9,
          f"server_error_rate = {rate!r} (want {want['server_error_rate']})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
