#!/usr/bin/env bash
# Plausible mistake (off by one): both commits are copied, but main is moved back by one only.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
git checkout -q feature/export
git cherry-pick main~2..main >/dev/null
git checkout -q main
git reset -q --hard HEAD~1
