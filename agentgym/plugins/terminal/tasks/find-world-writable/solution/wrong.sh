#!/usr/bin/env bash
# Plausible mistake: only looks at regular files (-type f), so directories are missed.
set -euo pipefail
cd /app/data
find . -type f -perm -o+w -printf '%P\n' | LC_ALL=C sort > /app/world_writable.txt
find . -type f -perm -o+w -exec chmod o-w {} +
