#!/usr/bin/env bash
# Plausible mistake: take the feature branch's side of every conflict wholesale.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
git checkout --theirs settings.ini app.py
git add settings.ini app.py
git commit -q --no-edit
