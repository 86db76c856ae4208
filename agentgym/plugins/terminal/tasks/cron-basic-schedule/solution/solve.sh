#!/usr/bin/env bash
# Reference crontab.
set -euo pipefail
cat > /app/crontab <<'CRON'
MAILTO=ops@example.com
# m   h     dom mon dow  command
30    2     *   *   *    /app/bin/backup.sh
*/15  *     *   *   *    /app/bin/cleanup.sh
0     9     *   *   1-5  /app/bin/report.sh --weekly
0     0     1   *   *    /app/bin/rotate-logs.sh
5     */2   *   *   *    /app/bin/sync.sh
CRON
cat /app/crontab
