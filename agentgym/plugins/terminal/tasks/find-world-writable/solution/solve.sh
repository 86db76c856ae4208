#!/usr/bin/env bash
# Reference: -perm -o+w finds the bit regardless of the others; chmod o-w keeps the rest.
set -euo pipefail
cd /app/data
find . -mindepth 1 -perm -o+w -printf '%P\n' | LC_ALL=C sort > /app/world_writable.txt
find . -mindepth 1 -perm -o+w -exec chmod o-w {} +
cat /app/world_writable.txt
