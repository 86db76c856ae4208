#!/usr/bin/env bash
# Reference: one pass with a strict regular expression.
set -euo pipefail
cd /app
python3 - <<'PY'
import collections, json, re
LINE = re.compile(r'^(\S+) \S+ \S+ \[[^\]]+\] "(\S+) (\S+) (\S+)" (\d{3}) (\d+|-) "[^"]*" "[^"]*"$')
total = malformed = size = errors = 0
statuses, paths = collections.Counter(), collections.Counter()
for line in open("access.log", encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    m = LINE.match(line)
    if not m:
        malformed += 1
        continue
    total += 1
    statuses[m.group(5)] += 1
    size += 0 if m.group(6) == "-" else int(m.group(6))
    errors += m.group(5).startswith("5")
    paths[m.group(3).split("?", 1)[0]] += 1
top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
json.dump({"total_requests": total, "malformed_lines": malformed,
           "status_counts": dict(sorted(statuses.items())), "bytes_sent": size,
           "top_paths": [list(kv) for kv in top],
           "server_error_rate": round(errors / total, 4)}, open("summary.json", "w"), indent=2)
PY
cat summary.json
