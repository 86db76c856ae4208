#!/usr/bin/env bash
# Plausible mistake: reset main back to the lost commit, which drops the later README fix.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
lost=$(git reflog --format='%H %gs' | awk '/^[0-9a-f]+ commit: Add low-stock alerts$/ {print $1; exit}')
git checkout -q main
git reset -q --hard "$lost"
