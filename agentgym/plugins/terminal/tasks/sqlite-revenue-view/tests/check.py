"""Checks for sqlite-revenue-view: the view's definition, rows, and that it stays live."""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def same(rows, want):
    return len(rows) == len(want) and all(
        list(r[:3]) == list(w[:3]) and isinstance(r[3], (int, float)) and abs(r[3] - w[3]) < 0.005
        for r, w in zip(rows, want, strict=False))


want = json.loads(Path("/tests/expected.json").read_text())
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "billing.db")
shutil.copy("/app/billing.db", path)
db = sqlite3.connect(path)
kind = db.execute("SELECT type FROM sqlite_master WHERE name = 'monthly_revenue'").fetchone()
if check(kind == ("view",), f"monthly_revenue is a view ({kind})"):
    cols = [row[1] for row in db.execute("PRAGMA table_info(monthly_revenue)")]
    check(cols == ["month", "plan", "payments", "revenue"], f"columns {cols}")
    try:
        rows = db.execute("SELECT month, plan, payments, revenue FROM monthly_revenue"
                          " ORDER BY month, plan").fetchall()
    except sqlite3.Error as error:
        rows = []
        print(f"query failed: {error}")
    check(same(rows, want["rows"]), "rows per UTC month and plan are right")
    if not same(rows, want["rows"]):
        for r in rows:
            print("  got", r)
    count, total = db.execute("SELECT COUNT(*), SUM(amount_cents) FROM payments").fetchone()
    check((count, total) == (want["payments_count"], want["payments_sum"]), "payments unchanged")
    # live: a new payment must show up
    db.execute("INSERT INTO payments (account_id, paid_at, amount_cents, status)"
               " VALUES (1, '2024-05-31T23:30:00-01:00', 1234, 'ok')")
    db.execute("INSERT INTO payments (account_id, paid_at, amount_cents, status)"
               " VALUES (1, '2024-05-20T10:00:00Z', 5000, 'failed')")
    plan = db.execute("SELECT plan FROM accounts WHERE id = 1").fetchone()[0]
    new = db.execute("SELECT month, plan, payments, revenue FROM monthly_revenue"
                     " WHERE month >= '2024-05'").fetchall()
    check(same(new, [["2024-06", plan, 1, 12.34]]), f"the view follows new payments ({new})")
db.close()
shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
