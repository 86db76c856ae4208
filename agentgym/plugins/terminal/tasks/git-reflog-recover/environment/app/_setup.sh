#!/usr/bin/env bash
# Builds /app/repo: a small history where two commits on main were thrown away by a reset.
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Reyes" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Reyes" GIT_COMMITTER_EMAIL="dana@example.com"
export GIT_CONFIG_NOSYSTEM=1
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="$((1709280000 + n * 3600)) +0000" GIT_COMMITTER_DATE="$((1709280000 + n * 3600)) +0000"
  git add -A
  git commit -q -m "$1"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Dana Reyes"
git config user.email "dana@example.com"

cat > README.md <<'T'
# inventory-tool

Small command line helpers to keep track of warehuose stock.
T
cat > inventory.py <<'T'
"""Entry point of the inventory tool."""


def main():
    print("inventory-tool")


if __name__ == "__main__":
    main()
T
commit "Initial commit"

cat > models.py <<'T'
from dataclasses import dataclass


@dataclass
class Item:
    sku: str
    name: str
    quantity: int
    minimum: int = 0
T
commit "Add item model"

cat > loader.py <<'T'
import csv

from models import Item


def load_items(path):
    with open(path, newline="") as handle:
        return [Item(row["sku"], row["name"], int(row["quantity"]), int(row["minimum"]))
                for row in csv.DictReader(handle)]
T
commit "Add CSV loader"

cat > report.py <<'T'
def stock_report(items):
    lines = [f"{item.sku:<10}{item.name:<30}{item.quantity:>6}" for item in items]
    return "\n".join(lines)
T
commit "Add stock report"

cat > alerts.py <<'T'
def low_stock(items):
    """Items whose quantity fell below their minimum, lowest first."""
    return sorted((i for i in items if i.quantity < i.minimum), key=lambda i: i.quantity)
T
cat > report.py <<'T'
from alerts import low_stock


def stock_report(items):
    lines = [f"{item.sku:<10}{item.name:<30}{item.quantity:>6}" for item in items]
    short = low_stock(items)
    if short:
        lines.append(f"LOW STOCK: {', '.join(i.sku for i in short)}")
    return "\n".join(lines)
T
commit "Add low-stock alerts"

n=$((n + 1))
export GIT_COMMITTER_DATE="$((1709280000 + n * 3600)) +0000"
git reset -q --hard HEAD~2

git checkout -q -b spike
cat > storage.py <<'T'
import json


def save(items, path):
    with open(path, "w") as handle:
        json.dump([vars(i) for i in items], handle)
T
commit "Spike: try JSON storage"
git checkout -q main

sed -i 's/warehuose/warehouse/' README.md
commit "Fix typo in README"
