#!/usr/bin/env bash
# Reference: copy the two commits onto feature/export, then move main back by two.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
git checkout -q feature/export
git cherry-pick main~2..main >/dev/null
git checkout -q main
git reset -q --hard HEAD~2
git log --oneline --all --graph
