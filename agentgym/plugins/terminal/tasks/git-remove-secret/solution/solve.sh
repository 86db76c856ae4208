#!/usr/bin/env bash
# Reference: drop the file from every commit on every ref, remove the backup refs that
# filter-branch leaves, then keep the file locally as an ignored file.
set -euo pipefail
export GIT_PAGER=cat PAGER=cat
cd /app/repo
cp config/secrets.env /tmp/secrets.env.keep
export FILTER_BRANCH_SQUELCH_WARNING=1
git filter-branch -f \
  --index-filter 'git rm -q --cached --ignore-unmatch config/secrets.env' \
  --tag-name-filter cat -- --all >/dev/null 2>&1
git for-each-ref --format='%(refname)' refs/original/ | while read -r ref; do
  git update-ref -d "$ref"
done
mkdir -p config
cp /tmp/secrets.env.keep config/secrets.env
echo "config/secrets.env" >> .gitignore
git add .gitignore
git commit -q -m "Ignore local secrets"
git log --oneline --all
