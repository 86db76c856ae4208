"""Checks for log-top-ips: /app/top_ips.txt against the expected ranking."""
import sys
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


expected = Path("/tests/expected.txt").read_text()
try:
    got = Path("/app/top_ips.txt").read_text()
except OSError:
    got = None
if check(got is not None, "/app/top_ips.txt exists"):
    lines = got.splitlines()
    check(len(lines) == 10 and got.endswith("\n"),
          f"10 newline-terminated lines (got {len(lines)})")
    want = expected.splitlines()
    for i, (a, b) in enumerate(zip(lines, want, strict=False), 1):
        check(a == b, f"line {i}: {a!r} (want {b!r})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
