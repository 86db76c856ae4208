#!/usr/bin/env bash
# Plausible mistake: untrack the file and ignore it, but leave the keys in the history.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
git rm -q --cached config/secrets.env
echo "config/secrets.env" >> .gitignore
git add .gitignore
git commit -q -m "Stop tracking secrets"
