#!/usr/bin/env bash
# Reference: a threading TCP server reading commands line by line, one shared dict.
set -euo pipefail
cat > /app/kvserver.py <<'PY'
"""In-memory key-value store over a line protocol on 127.0.0.1:7070."""
import socketserver
import threading

DATA = {}
LOCK = threading.Lock()
with open("/app/seed.txt", encoding="utf-8") as handle:
    for line in handle:
        line = line.rstrip("\n")
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            DATA[key] = value


def answer(line):
    command, _, rest = line.partition(" ")
    with LOCK:
        if command == "SET" and rest and " " in rest:
            key, value = rest.split(" ", 1)
            DATA[key] = value
            return "OK"
        if command == "GET" and rest:
            return f"VALUE {DATA[rest]}" if rest in DATA else "NOT_FOUND"
        if command == "DEL" and rest:
            return "DELETED" if DATA.pop(rest, None) is not None else "NOT_FOUND"
        if command == "COUNT" and not rest:
            return f"COUNT {len(DATA)}"
    return "ERROR"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            if line == "QUIT":
                self.wfile.write(b"BYE\n")
                return
            self.wfile.write((answer(line) + "\n").encode())
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    Server(("127.0.0.1", 7070), Handler).serve_forever()
PY
# Try it as the checker runs it, then stop it.
cd /app
python3 /app/kvserver.py > /tmp/svc.log 2>&1 &
server=$!
for _ in $(seq 50); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', 7070), 1).close()" 2>/dev/null && break
  sleep 0.1
done
printf 'GET greeting\nCOUNT\nQUIT\n' | python3 -c "
import socket, sys
s = socket.create_connection(('127.0.0.1', 7070), 2)
s.sendall(sys.stdin.buffer.read())
print(s.makefile().read(), end='')"
kill "$server"
