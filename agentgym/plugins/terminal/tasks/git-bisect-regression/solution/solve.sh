#!/usr/bin/env bash
# Reference: let git bisect run the check script.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
git bisect start main v1.0 >/dev/null
git bisect run python3 /app/check_wordcount.py > /tmp/bisect.log 2>&1 || true
bad=$(git rev-parse refs/bisect/bad)
git bisect reset >/dev/null 2>&1
echo "$bad" > /app/first_bad.txt
cat /app/first_bad.txt
