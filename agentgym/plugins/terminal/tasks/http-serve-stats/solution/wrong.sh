#!/usr/bin/env bash
# Plausible mistake: the right file, but serve.sh starts http.server on its default port (8000).
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
cd /app/public
exec python3 -m http.server --bind 127.0.0.1
SH
