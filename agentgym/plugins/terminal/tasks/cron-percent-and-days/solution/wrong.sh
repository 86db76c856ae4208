#!/usr/bin/env bash
# Plausible mistake: the % signs are left unescaped, so cron cuts the commands at the first %.
set -euo pipefail
cat > /app/crontab <<'CRON'
SHELL=/bin/bash
15 3 * * 0 tar czf /app/backups/home-$(date +%F).tgz /app/home
0 6 1,15 * * /app/bin/invoice.sh
30 7 1 1,4,7,10 * /app/bin/quarterly.sh
*/10 9-17 * * 1-5 /app/bin/poll.sh >> /app/logs/poll-$(date +%Y%m%d).log 2>&1
0 12 13 * 5 /app/bin/payroll.sh
CRON
