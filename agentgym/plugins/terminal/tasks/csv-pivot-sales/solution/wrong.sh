#!/usr/bin/env bash
# Plausible mistake: forgets to leave out cancelled and refunded orders.
set -euo pipefail
cd /app
{
  echo "region,2024-01,2024-02,2024-03,total"
  awk -F, 'NR > 1 { v[$3 "," substr($2, 1, 7)] += $5 * $6; r[$3] = 1 }
    END { for (g in r) { a = v[g ",2024-01"]; b = v[g ",2024-02"]; c = v[g ",2024-03"]
                         printf "%s,%.2f,%.2f,%.2f,%.2f\n", g, a, b, c, a + b + c } }' sales.csv | sort
  awk -F, 'NR > 1 { m = substr($2, 1, 7); t[m] += $5 * $6; all += $5 * $6 }
    END { printf "TOTAL,%.2f,%.2f,%.2f,%.2f\n", t["2024-01"], t["2024-02"], t["2024-03"], all }' sales.csv
} > pivot.csv
