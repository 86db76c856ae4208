#!/usr/bin/env bash
# Reference: sum in cents with exact decimals, then print the pivot.
set -euo pipefail
cd /app
python3 - <<'PY'
import csv
from collections import defaultdict
from decimal import Decimal
months = ["2024-01", "2024-02", "2024-03"]
table = defaultdict(lambda: defaultdict(Decimal))
regions = set()
with open("sales.csv", newline="") as handle:
    for row in csv.DictReader(handle):
        regions.add(row["region"])
        if row["status"] == "completed":
            table[row["region"]][row["date"][:7]] += int(row["quantity"]) * Decimal(row["unit_price"])
with open("pivot.csv", "w") as out:
    out.write(",".join(["region", *months, "total"]) + "\n")
    sums = [Decimal(0)] * 4
    for region in sorted(regions):
        values = [table[region][m] for m in months]
        values.append(sum(values, Decimal(0)))
        sums = [a + b for a, b in zip(sums, values)]
        out.write(",".join([region, *(f"{v:.2f}" for v in values)]) + "\n")
    out.write(",".join(["TOTAL", *(f"{v:.2f}" for v in sums)]) + "\n")
PY
cat pivot.csv
