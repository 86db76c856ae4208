#!/usr/bin/env bash
# Plausible mistake: keeps the first row seen for each customer instead of the latest.
set -euo pipefail
cd /app
python3 - <<'PY'
import csv
with open("customers.csv", newline="", encoding="utf-8") as handle:
    reader = csv.DictReader(handle)
    fields = reader.fieldnames
    best = {}
    for row in reader:
        row["email"] = row["email"].strip().lower()
        best.setdefault(row["email"], row)
with open("customers_clean.csv", "w", newline="", encoding="utf-8") as handle:
    writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for email in sorted(best):
        writer.writerow(best[email])
PY
