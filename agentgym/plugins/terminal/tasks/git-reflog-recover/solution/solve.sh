#!/usr/bin/env bash
# Reference: find the lost tip in the reflog, then replay the two commits on top of main.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
lost=$(git reflog --format='%H %gs' | awk '/^[0-9a-f]+ commit: Add low-stock alerts$/ {print $1; exit}')
git checkout -q main
git cherry-pick "$lost~1" "$lost" >/dev/null
git log --oneline main
