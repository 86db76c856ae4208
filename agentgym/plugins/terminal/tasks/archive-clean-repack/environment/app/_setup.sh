#!/usr/bin/env bash
# Builds /app/incoming/project-1.2.tar.gz (a release tarball with build junk in it).
set -euo pipefail
work=$(mktemp -d)
p=$work/project-1.2
mkdir -p "$p/src/app/__pycache__" "$p/src/app/utils/__pycache__" "$p/docs" "$p/scripts" "$p/build" "$p/.github/workflows"
printf '# project\n\nVersion 1.2 of the project.\n' > "$p/README.md"
printf '[metadata]\nname = project\nversion = 1.2\n' > "$p/setup.cfg"
printf 'DATABASE_URL=sqlite:///local.db\nDEBUG=0\n' > "$p/.env.example"
printf '*.tmp\n__pycache__/\n.DS_Store\n' > "$p/.gitignore"
printf 'name: ci\non: [push]\n' > "$p/.github/workflows/ci.yml"
printf '__version__ = "1.2"\n' > "$p/src/app/__init__.py"
printf 'def run():\n    return "running"\n' > "$p/src/app/core.py"
printf 'def slug(text):\n    return "-".join(text.lower().split())\n' > "$p/src/app/utils/text.py"
printf '' > "$p/src/app/utils/__init__.py"
printf 'compiled junk\n' > "$p/src/app/__pycache__/core.cpython-311.pyc"
printf 'compiled junk\n' > "$p/src/app/utils/__pycache__/text.cpython-311.pyc"
printf 'partial write\n' > "$p/src/app/core.py.tmp"
printf '# Guide\n\nRun scripts/run.sh.\n' > "$p/docs/guide.md"
printf 'Bud1 junk\n' > "$p/docs/.DS_Store"
printf 'Bud1 junk\n' > "$p/.DS_Store"
printf '#!/bin/sh\nexec python3 -c "from app.core import run; print(run())"\n' > "$p/scripts/run.sh"
printf 'scratch\n' > "$p/build/notes.tmp"
printf 'keep me\n' > "$p/build/README.txt"
printf 'not a tmp file\n' > "$p/docs/tmp-notes.md"
find "$p" -type f -exec chmod 644 {} +
chmod 755 "$p/scripts/run.sh"
find "$p" -type d -exec chmod 755 {} +
find "$p" -exec touch -h -d '2024-05-01 12:00:00 UTC' {} +
mkdir -p /app/incoming
tar --sort=name --owner=0 --group=0 --numeric-owner -C "$work" -cf - project-1.2 | gzip -n > /app/incoming/project-1.2.tar.gz
rm -rf "$work"
