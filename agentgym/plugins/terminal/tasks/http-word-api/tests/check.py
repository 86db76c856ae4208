"""Checks for http-word-api: start the agent's server and query it on 127.0.0.1:9090."""
import atexit
import collections
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

FAILS = []
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def start_server(argv, port):
    """Start the agent's server as the instruction says (from /app, in a session of its
    own), wait up to 10 s for it to accept connections on 127.0.0.1:PORT, and stop it, its
    whole process group, when the checks end."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 (open until exit, for the server)
    proc = subprocess.Popen(argv, cwd="/app", stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)

    def stop():
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    atexit.register(stop)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() in (None, 0):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    log.seek(0)
    print(f"`{' '.join(argv)}` did not open 127.0.0.1:{port} within 10 s (exit status"
          f" {proc.poll()}); its output:\n{log.read()[-2000:].decode(errors='replace')}")
    check(False, f"the server started by `{' '.join(argv)}` listens on port {port}")
    sys.exit(1)


start_server(["python3", "/app/server.py"], 9090)


def get(path):
    try:
        with OPENER.open(f"http://127.0.0.1:9090{path}", timeout=5) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), b""
    except (OSError, ValueError) as error:
        print(f"GET {path}: {error}")
        if "timed out" in str(error):  # a server that hangs: stop rather than wait on every check
            print("the server stopped answering; giving up")
            sys.exit(1)
        return None, "", b""


def get_json(path):
    status, kind, body = get(path)
    try:
        return status, kind, json.loads(body)
    except ValueError:
        return status, kind, None


# The expected answers, from a pristine copy of the corpus.
WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
COUNTS = collections.Counter(WORD.findall(Path("/tests/corpus.txt").read_text().lower()))
RANKED = [list(kv) for kv in sorted(COUNTS.items(), key=lambda kv: (-kv[1], kv[0]))]

status, _, body = get("/health")
if not check(status == 200 and body.strip() == b"ok",
             f"/health answers 200 ok ({status}, {body[:40]!r})"):
    print(f"{len(FAILS)} check(s) failed")
    sys.exit(1)
for word in ("fog", "The", "HARBOUR", "harbour's", "master's", "kraken", "TIDE"):
    status, kind, data = get_json(f"/count?word={urllib.request.quote(word)}")
    want = {"word": word.lower(), "count": COUNTS.get(word.lower(), 0)}
    check(status == 200 and data == want, f"/count?word={word} -> {want} (got {status} {data})")
    check(kind.startswith("application/json"),
          f"/count answers with Content-Type application/json ({kind})")
status, _, _ = get("/count")
check(status == 400, f"/count without word -> 400 ({status})")
for n in (1, 3, 7):
    status, _, data = get_json(f"/top?n={n}")
    check(status == 200 and data == RANKED[:n], f"/top?n={n} -> {RANKED[:n]} (got {status} {data})")
status, _, data = get_json("/top")
check(status == 200 and data == RANKED[:5], f"/top defaults to 5 (got {status} {data})")
for bad in ("0", "51", "abc", "-2"):
    status, _, _ = get(f"/top?n={bad}")
    check(status == 400, f"/top?n={bad} -> 400 ({status})")
for path in ("/", "/counts?word=fog", "/health/extra"):
    status, _, _ = get(path)
    check(status == 404, f"{path} -> 404 ({status})")
check(Path("/app/server.py").read_text().strip() != "", "/app/server.py exists")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
