#!/usr/bin/env bash
# Reference: a ThreadingHTTPServer with the three endpoints (the checker starts it).
set -euo pipefail
cat > /app/server.py <<'PY'
"""Word-count API over /app/corpus.txt on 127.0.0.1:9090."""
import collections
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
with open("/app/corpus.txt", encoding="utf-8") as handle:
    COUNTS = collections.Counter(WORD.findall(handle.read().lower()))
RANKED = sorted(COUNTS.items(), key=lambda kv: (-kv[1], kv[0]))


class Handler(BaseHTTPRequestHandler):
    def send(self, status, body, kind="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/health":
            return self.send(200, b"ok", "text/plain")
        if url.path == "/count":
            if "word" not in query:
                return self.send(400, {"error": "missing word"})
            word = query["word"][0].lower()
            return self.send(200, {"word": word, "count": COUNTS.get(word, 0)})
        if url.path == "/top":
            raw = query.get("n", ["5"])[0]
            if not raw.isdigit() or not 1 <= int(raw) <= 50:
                return self.send(400, {"error": "n must be 1..50"})
            return self.send(200, [list(kv) for kv in RANKED[:int(raw)]])
        return self.send(404, {"error": "not found"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", 9090), Handler).serve_forever()
PY
# Try it as the checker runs it, then stop it.
cd /app
python3 /app/server.py > /tmp/svc.log 2>&1 &
server=$!
for _ in $(seq 50); do
  curl -sf -o /dev/null http://127.0.0.1:9090/health && break
  sleep 0.1
done
curl -s 'http://127.0.0.1:9090/top?n=3'; echo
kill "$server"
