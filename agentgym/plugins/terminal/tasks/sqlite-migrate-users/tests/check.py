"""Checks for sqlite-migrate-users: schema, data, foreign keys, index and version."""
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
path = os.path.join(tmp, "app.db")
shutil.copy("/app/app.db", path)
db = sqlite3.connect(path)
tables = {name for (name,) in db.execute(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
check(tables == {"users", "posts"}, f"tables are users and posts only ({sorted(tables)})")
info = [(name, kind.upper(), notnull, pk) for _, name, kind, notnull, _, pk in
        db.execute("PRAGMA table_info(users)")]
check(info == [("id", "INTEGER", 0, 1), ("first_name", "TEXT", 1, 0), ("last_name", "TEXT", 1, 0),
               ("email", "TEXT", 1, 0), ("signed_up", "TEXT", 1, 0)],
      f"users has the new columns ({info})")
try:
    rows = [list(r) for r in db.execute(
        "SELECT id, first_name, last_name, email, signed_up FROM users ORDER BY id")]
except sqlite3.Error as error:
    rows = str(error)
check(rows == want["users"], "every user converted as specified")
if isinstance(rows, list) and rows != want["users"]:
    bad = [(g, w) for g, w in zip(rows, want["users"], strict=False) if g != w]
    for g, w in bad[:4]:
        print(f"  got {g}  want {w}")
posts = [list(r) for r in db.execute("SELECT * FROM posts ORDER BY id")]
check(posts == want["posts"], f"posts unchanged ({len(posts)} rows)")
fks = [(row[2], row[3], row[4]) for row in db.execute("PRAGMA foreign_key_list(posts)")]
check(fks == [("users", "user_id", "id")], f"posts.user_id references users(id) ({fks})")
check(db.execute("PRAGMA foreign_key_check").fetchall() == [], "no dangling foreign keys")
index = {name: (table, [c[2] for c in db.execute(f"PRAGMA index_info('{name}')")])
         for name, table in db.execute(
             "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'")}
check(index.get("idx_posts_user_id") == ("posts", ["user_id"]),
      "index idx_posts_user_id on posts(user_id)")
check(db.execute("PRAGMA user_version").fetchone()[0] == 2, "user_version is 2")
for sql, what in (
        ("INSERT INTO users (id, first_name, last_name, email, signed_up)"
         " VALUES (1000, 'X', 'Y', 'ada.lovelace@example.net', '2024-01-01')", "email is UNIQUE"),
        ("INSERT INTO users (id, first_name, last_name, email, signed_up)"
         " VALUES (1001, NULL, 'Y', 'new@example.net', '2024-01-01')", "first_name is NOT NULL"),
        ("INSERT INTO users (id, first_name, last_name, email, signed_up)"
         " VALUES (1002, 'X', 'Y', NULL, '2024-01-01')", "email is NOT NULL")):
    try:
        db.execute(sql)
        refused = False
    except sqlite3.IntegrityError:
        refused = True
    except sqlite3.Error:
        refused = False
    check(refused, what)
db.close()
shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
