#!/usr/bin/env bash
# Plausible mistake: takes the month from the local date text, ignoring the UTC offset.
set -euo pipefail
cd /app
sqlite3 billing.db <<'SQL'
CREATE VIEW monthly_revenue AS
SELECT substr(p.paid_at, 1, 7) AS month,
       a.plan AS plan,
       COUNT(*) AS payments,
       ROUND(SUM(p.amount_cents) / 100.0, 2) AS revenue
FROM payments p
JOIN accounts a ON a.id = p.account_id
WHERE p.status = 'ok'
GROUP BY 1, 2
ORDER BY 1, 2;
SQL
