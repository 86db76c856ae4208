"""Checks for sqlite-top-customers."""
import csv
import sqlite3
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


with open("/tests/expected.csv", newline="") as handle:
    want = list(csv.reader(handle))
try:
    with open("/app/top_customers.csv", newline="") as handle:
        got = [row for row in csv.reader(handle) if row]
except (OSError, UnicodeError, csv.Error) as error:
    got = None
    print(f"cannot read /app/top_customers.csv: {error}")
if check(got is not None, "/app/top_customers.csv is readable CSV"):
    check(got[:1] == want[:1], f"header {got[:1]}")
    check(len(got) == len(want), f"{len(got) - 1} data rows (want 5)")
    for g, w in zip(got[1:], want[1:], strict=False):
        check([x.strip() for x in g] == w, f"{g} (want {w})")
try:
    db = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    counts = db.execute("SELECT (SELECT COUNT(*) FROM orders), (SELECT COUNT(*) FROM order_items),"
                        " (SELECT SUM(quantity * unit_price_cents) FROM order_items)").fetchone()
except sqlite3.Error as error:
    counts = str(error)
check(counts == (75, 176, 1594913), f"database unchanged ({counts})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
