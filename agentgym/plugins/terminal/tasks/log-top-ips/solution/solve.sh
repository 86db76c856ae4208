#!/usr/bin/env bash
# Reference: count per IP, then sort by count (descending) and IP (ascending, as text).
set -euo pipefail
cd /app
awk '{print $1}' access.log | LC_ALL=C sort | uniq -c \
  | awk '{print $2, $1}' | LC_ALL=C sort -k2,2nr -k1,1 | head -n 10 > top_ips.txt
cat top_ips.txt
