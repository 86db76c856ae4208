#!/usr/bin/env bash
# Reference: % must be escaped as \% in a crontab; day-of-month and day-of-week together
# mean "either".
set -euo pipefail
cat > /app/crontab <<'CRON'
SHELL=/bin/bash
15 3 * * 0 tar czf /app/backups/home-$(date +\%F).tgz /app/home
0 6 1,15 * * /app/bin/invoice.sh
30 7 1 jan,apr,jul,oct * /app/bin/quarterly.sh
*/10 9-17 * * 1-5 /app/bin/poll.sh >> /app/logs/poll-$(date +\%Y\%m\%d).log 2>&1
0 12 13 * 5 /app/bin/payroll.sh
CRON
cat /app/crontab
