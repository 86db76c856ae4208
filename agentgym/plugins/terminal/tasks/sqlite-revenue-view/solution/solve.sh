#!/usr/bin/env bash
# Reference: strftime() normalises the offset to UTC before taking the month.
set -euo pipefail
cd /app
sqlite3 billing.db <<'SQL'
CREATE VIEW monthly_revenue AS
SELECT strftime('%Y-%m', p.paid_at) AS month,
       a.plan AS plan,
       COUNT(*) AS payments,
       ROUND(SUM(p.amount_cents) / 100.0, 2) AS revenue
FROM payments p
JOIN accounts a ON a.id = p.account_id
WHERE p.status = 'ok'
GROUP BY 1, 2
ORDER BY 1, 2;
SQL
sqlite3 billing.db 'SELECT * FROM monthly_revenue;'
