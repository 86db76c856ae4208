#!/usr/bin/env bash
# Reference: csv module, latest row per normalised email.
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
        kept = best.get(row["email"])
        if kept is None or row["updated_at"] > kept["updated_at"]:
            best[row["email"]] = row
with open("customers_clean.csv", "w", newline="", encoding="utf-8") as handle:
    writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for email in sorted(best):
        writer.writerow(best[email])
PY
wc -l customers_clean.csv
