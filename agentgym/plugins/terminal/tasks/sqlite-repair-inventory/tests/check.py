"""Checks for sqlite-repair-inventory: final table contents and the unique index."""
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


want = json.loads(Path("/tests/expected.json").read_text())
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "inventory.db")
shutil.copy("/app/inventory.db", path)
db = sqlite3.connect(path)
moves = [list(r) for r in db.execute(
    "SELECT id, product_id, ref, delta, moved_at FROM movements ORDER BY id")]
check(len(moves) == len(want["movements"]),
      f"{len(moves)} movements left (want {len(want['movements'])})")
refs = [m[2] for m in moves]
check(len(refs) == len(set(refs)), "no duplicate refs left")
check(moves == want["movements"], "exactly the right movements kept, unchanged")
products = [list(r) for r in db.execute("SELECT id, sku, name, stock FROM products ORDER BY id")]
check([p[:3] for p in products] == [p[:3] for p in want["products"]], "all products kept")
wrong = [(p, w[3]) for p, w in zip(products, want["products"], strict=False) if p[3] != w[3]]
check(not wrong and len(products) == len(want["products"]),
      f"stock equals the sum of the remaining movements ({len(wrong)} products wrong)")
for p, w in wrong[:4]:
    print(f"  {p} (want stock {w})")
index = db.execute("SELECT tbl_name FROM sqlite_master"
                   " WHERE type = 'index' AND name = 'ux_movements_ref'").fetchone()
unique = [row for row in db.execute("PRAGMA index_list(movements)") if row[1] == "ux_movements_ref"]
cols = [c[2] for c in db.execute("PRAGMA index_info('ux_movements_ref')")]
check(index == ("movements",) and unique and unique[0][2] == 1 and cols == ["ref"],
      "unique index ux_movements_ref on movements(ref)")
try:
    db.execute("INSERT INTO movements (product_id, ref, delta, moved_at)"
               " VALUES (1, ?, 1, '2025-01-01')",
               (want["movements"][0][2],))
    refused = False
except sqlite3.IntegrityError:
    refused = True
check(refused, "a duplicate ref is refused")
db.close()
shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
