#!/usr/bin/env bash
# Reference: dedupe, drop orphans, recompute, then add the unique index.
set -euo pipefail
cd /app
sqlite3 inventory.db <<'SQL'
BEGIN;
DELETE FROM movements WHERE id NOT IN (SELECT MIN(id) FROM movements GROUP BY ref);
DELETE FROM movements WHERE product_id NOT IN (SELECT id FROM products);
UPDATE products SET stock = COALESCE((SELECT SUM(delta) FROM movements m WHERE m.product_id = products.id), 0);
CREATE UNIQUE INDEX ux_movements_ref ON movements(ref);
COMMIT;
SQL
sqlite3 inventory.db 'SELECT id, sku, stock FROM products;'
