#!/usr/bin/env bash
# Builds /app/repo: two commits meant for feature/export were made on main by mistake.
set -euo pipefail
export GIT_AUTHOR_NAME="Lena Vogel" GIT_AUTHOR_EMAIL="lena@example.com"
export GIT_COMMITTER_NAME="Lena Vogel" GIT_COMMITTER_EMAIL="lena@example.com"
export GIT_CONFIG_NOSYSTEM=1
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="$((1714000000 + n * 7200)) +0000" GIT_COMMITTER_DATE="$((1714000000 + n * 7200)) +0000"
  git add -A
  git commit -q -m "$1"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Lena Vogel"
git config user.email "lena@example.com"

printf '# tabletool\n\nRead and convert tables.\n' > README.md
commit "Initial commit"

cat > reader.py <<'T'
import csv


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
T
commit "Add CSV reader"

git checkout -q -b feature/export
cat > export.py <<'T'
"""Exporters: one function per output format."""
T
commit "Start export module"

git checkout -q main
cat > table.py <<'T'
def render(rows):
    if not rows:
        return ""
    names = list(rows[0])
    widths = {n: max(len(n), *(len(str(r[n])) for r in rows)) for n in names}
    head = " | ".join(n.ljust(widths[n]) for n in names)
    body = [" | ".join(str(r[n]).ljust(widths[n]) for n in names) for r in rows]
    return "\n".join([head, *body])
T
commit "Fix header alignment"

# Oops: still on main.
cat > export_json.py <<'T'
import json


def to_json(rows, path):
    with open(path, "w") as handle:
        json.dump(rows, handle, indent=2, sort_keys=True)
T
commit "Add JSON export"

cat > test_export_json.py <<'T'
import json

from export_json import to_json


def test_roundtrip(tmp_path):
    target = tmp_path / "out.json"
    to_json([{"b": 1, "a": 2}], target)
    assert json.loads(target.read_text()) == [{"a": 2, "b": 1}]
T
commit "Add JSON export tests"
