#!/usr/bin/env bash
# Reference: build users_new, copy converted rows, drop the old table, rename the new one.
# (Renaming the OLD table first would make SQLite rewrite posts' foreign key to point at it.)
set -euo pipefail
cd /app
python3 - <<'PY'
import sqlite3
db = sqlite3.connect("app.db", isolation_level=None)
db.execute("PRAGMA foreign_keys = OFF")
db.execute("BEGIN")
db.execute("""CREATE TABLE users_new (
    id         INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name  TEXT NOT NULL,
    email      TEXT NOT NULL UNIQUE,
    signed_up  TEXT NOT NULL
)""")
for uid, fullname, email, signup in db.execute("SELECT id, fullname, email, signup FROM users").fetchall():
    words = fullname.split()
    day, month, year = signup.strip().split("/")
    db.execute("INSERT INTO users_new VALUES (?, ?, ?, ?, ?)",
               (uid, words[0], " ".join(words[1:]), email.strip().lower(), f"{year}-{month}-{day}"))
db.execute("DROP TABLE users")
db.execute("ALTER TABLE users_new RENAME TO users")
db.execute("CREATE INDEX idx_posts_user_id ON posts(user_id)")
db.execute("PRAGMA user_version = 2")
assert not db.execute("PRAGMA foreign_key_check").fetchall()
db.execute("COMMIT")
PY
sqlite3 app.db '.schema' 'PRAGMA user_version;'
