#!/usr/bin/env bash
# Plausible mistake: "* 9" runs the report every minute from 09:00 to 09:59.
set -euo pipefail
cat > /app/crontab <<'CRON'
MAILTO=ops@example.com
30 2 * * * /app/bin/backup.sh
*/15 * * * * /app/bin/cleanup.sh
* 9 * * 1-5 /app/bin/report.sh --weekly
0 0 1 * * /app/bin/rotate-logs.sh
5 */2 * * * /app/bin/sync.sh
CRON
