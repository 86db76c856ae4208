#!/usr/bin/env bash
# Plausible mistake: the handler reads one recv() chunk, answers the first command in it,
# and returns, so only one command per connection ever gets an answer.
set -euo pipefail
cat > /app/kvserver.py <<'PY'
import socketserver

DATA = {}
for line in open("/app/seed.txt", encoding="utf-8"):
    line = line.rstrip("\n")
    if line and not line.startswith("#") and "=" in line:
        key, value = line.split("=", 1)
        DATA[key] = value


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        line = self.request.recv(4096).decode().split("\n")[0].rstrip("\r")
        command, _, rest = line.partition(" ")
        if command == "SET" and " " in rest:
            key, value = rest.split(" ", 1)
            DATA[key] = value
            reply = "OK"
        elif command == "GET":
            reply = f"VALUE {DATA[rest]}" if rest in DATA else "NOT_FOUND"
        elif command == "DEL":
            reply = "DELETED" if DATA.pop(rest, None) is not None else "NOT_FOUND"
        elif command == "COUNT":
            reply = f"COUNT {len(DATA)}"
        elif command == "QUIT":
            reply = "BYE"
        else:
            reply = "ERROR"
        self.request.sendall((reply + "\n").encode())


socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", 7070), Handler).serve_forever()
PY
