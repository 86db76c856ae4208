#!/usr/bin/env bash
# Builds /app/repo: a history in which config/secrets.env (live API keys) was committed.
set -euo pipefail
export GIT_AUTHOR_NAME="Priya Natarajan" GIT_AUTHOR_EMAIL="priya@example.com"
export GIT_COMMITTER_NAME="Priya Natarajan" GIT_COMMITTER_EMAIL="priya@example.com"
export GIT_CONFIG_NOSYSTEM=1
n=0
stamp() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="$((1712000000 + n * 86400)) +0000" GIT_COMMITTER_DATE="$((1712000000 + n * 86400)) +0000"
}
commit() { stamp; git add -A; git commit -q -m "$1"; }
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Priya Natarajan"
git config user.email "priya@example.com"

printf '# shopfront\n\nCheckout service for the shop.\n' > README.md
printf '__pycache__/\n*.pyc\n' > .gitignore
cat > app.py <<'T'
from payments import charge


def checkout(cart):
    return charge(sum(item["price"] for item in cart))
T
commit "Initial commit"

mkdir -p config
cat > config/settings.env <<'T'
PAYMENT_API=https://api.payments.example/v1
CURRENCY=EUR
T
cat > config/secrets.env <<'T'
PAYMENT_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc
T
cat > payments.py <<'T'
import os


def charge(amount):
    key = os.environ["PAYMENT_KEY"]
    return {"amount": amount, "auth": key[:7] + "..."}
T
commit "Add payment client"

cat > payments.py <<'T'
import os
import time


def charge(amount, attempts=3):
    key = os.environ["PAYMENT_KEY"]
    for attempt in range(attempts):
        try:
            return {"amount": amount, "auth": key[:7] + "..."}
        except OSError:
            time.sleep(2 ** attempt)
    raise RuntimeError("payment failed")
T
commit "Add retry logic"

cat > config/secrets.env <<'T'
PAYMENT_KEY=sk_live_9fQ2ZtW8mKcR3vYpL6nB1xDs
T
commit "Rotate payment key"
stamp
git tag -a v1.0 -m "Release 1.0"
git branch release/1.0

cat >> payments.py <<'T'


def refund(amount):
    return {"amount": -amount}
T
commit "Add refunds"

cat >> README.md <<'T'

## Configuration

Settings live in `config/settings.env`; keys are read from the environment.
T
commit "Document configuration"
