#!/usr/bin/env bash
# Plausible mistake: `sort -rn` also reverses the order of tied lines.
set -euo pipefail
cd /app
awk '{print $1}' access.log | sort | uniq -c | sort -rn | head -n 10 \
  | awk '{print $2, $1}' > top_ips.txt
