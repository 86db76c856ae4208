#!/usr/bin/env bash
# Plausible mistake: splits the name at the LAST space (first_name "Ludwig van").
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
    parts = " ".join(fullname.split()).rsplit(" ", 1)
    first, last = (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "")
    day, month, year = signup.strip().split("/")
    db.execute("INSERT INTO users_new VALUES (?, ?, ?, ?, ?)",
               (uid, first, last, email.strip().lower(), f"{year}-{month}-{day}"))
db.execute("DROP TABLE users")
db.execute("ALTER TABLE users_new RENAME TO users")
db.execute("CREATE INDEX idx_posts_user_id ON posts(user_id)")
db.execute("PRAGMA user_version = 2")
db.execute("COMMIT")
PY
