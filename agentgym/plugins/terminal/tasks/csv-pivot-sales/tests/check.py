"""Checks for csv-pivot-sales: /app/pivot.csv against the expected table."""
import sys
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


want = Path("/tests/expected.csv").read_text().splitlines()
try:
    got = Path("/app/pivot.csv").read_text().replace("\r\n", "\n").splitlines()
except (OSError, UnicodeError) as error:
    got = None
    print(f"cannot read /app/pivot.csv: {error}")
if check(got is not None, "/app/pivot.csv exists"):
    while got and not got[-1].strip():
        got.pop()
    check(got[:1] == want[:1], f"header {got[:1]}")
    check([line.split(",")[0] for line in got] == [line.split(",")[0] for line in want],
          f"one row per region in order, then TOTAL ({[line.split(',')[0] for line in got]})")
    for g, w in zip(got[1:], want[1:], strict=False):
        check(g == w, f"{g!r} (want {w!r})")
    check(len(got) == len(want), f"{len(got)} lines (want {len(want)})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
