"""Checks for csv-dedupe-latest: /app/customers_clean.csv parsed and compared row by row."""
import csv
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


with open("/tests/expected.csv", newline="", encoding="utf-8") as handle:
    want = list(csv.reader(handle))
try:
    with open("/app/customers_clean.csv", newline="", encoding="utf-8") as handle:
        got = list(csv.reader(handle))
except (OSError, UnicodeError, csv.Error) as error:
    got = None
    print(f"cannot read /app/customers_clean.csv: {error}")
if check(got is not None, "/app/customers_clean.csv is readable CSV"):
    got = [row for row in got if row]  # tolerate a trailing blank line
    check(got[:1] == want[:1], f"header {got[:1]}")
    check(len(got) == len(want), f"{len(got) - 1} customer rows (want {len(want) - 1})")
    emails = [row[2] for row in got[1:] if len(row) > 2]
    check(emails == [row[2] for row in want[1:]], "one row per normalised email, sorted by email")
    wrong = [(g, w) for g, w in zip(got[1:], want[1:], strict=False) if g != w]
    check(not wrong, f"every row is the customer's latest, unchanged ({len(wrong)} differ)")
    for g, w in wrong[:3]:
        print(f"  got  {g}\n  want {w}")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
