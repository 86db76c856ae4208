#!/usr/bin/env bash
# Plausible mistake: BETWEEN '2024-01-01' AND '2024-12-31' compares text and so drops
# orders placed during December 31st.
set -euo pipefail
cd /app
sqlite3 -header -csv shop.db > top_customers.csv <<'SQL'
SELECT c.name AS customer,
       COUNT(DISTINCT o.id) AS orders,
       printf('%.2f', SUM(i.quantity * i.unit_price_cents) / 100.0) AS revenue
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.ordered_at BETWEEN '2024-01-01' AND '2024-12-31'
GROUP BY c.id
ORDER BY SUM(i.quantity * i.unit_price_cents) DESC, c.name
LIMIT 5;
SQL
