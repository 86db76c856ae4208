#!/usr/bin/env bash
# Reference: compute the stats with Python; serve.sh serves the folder (the checker runs it).
set -euo pipefail
cd /app
python3 - <<'PY'
import collections, csv, json
rows = list(csv.DictReader(open("data/visits.csv", newline="")))
visits = collections.Counter(r["page"] for r in rows)
visitors = collections.defaultdict(set)
for r in rows:
    visitors[r["page"]].add(r["visitor_id"])
stats = {"total_visits": len(rows), "unique_visitors": len({r["visitor_id"] for r in rows}),
         "pages": {p: {"visits": visits[p], "visitors": len(visitors[p])} for p in sorted(visits)}}
json.dump(stats, open("public/stats.json", "w"), indent=2)
PY
cat > /app/serve.sh <<'SH'
#!/usr/bin/env bash
# Serve /app/public on 127.0.0.1:8080, in the foreground.
exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /app/public
SH
chmod +x /app/serve.sh
# Try it as the checker runs it, then stop it.
bash /app/serve.sh > /tmp/svc.log 2>&1 &
server=$!
for _ in $(seq 50); do
  curl -sf -o /dev/null http://127.0.0.1:8080/stats.json && break
  sleep 0.1
done
curl -s http://127.0.0.1:8080/stats.json | head -5
kill "$server"
