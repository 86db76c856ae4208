#!/usr/bin/env bash
# Plausible mistake: recomputes the stock before removing the duplicate movements.
set -euo pipefail
cd /app
sqlite3 inventory.db <<'SQL'
BEGIN;
DELETE FROM movements WHERE product_id NOT IN (SELECT id FROM products);
UPDATE products SET stock = COALESCE((SELECT SUM(delta) FROM movements m WHERE m.product_id = products.id), 0);
DELETE FROM movements WHERE id NOT IN (SELECT MIN(id) FROM movements GROUP BY ref);
CREATE UNIQUE INDEX ux_movements_ref ON movements(ref);
COMMIT;
SQL
