"""Checks for http-serve-stats: start the agent's server and query it on 127.0.0.1:8080."""
import atexit
import contextlib
import json
import os
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


# The expected numbers, read before the agent's server starts, then deleted, with this
# process made non-dumpable: the server, the agent's code, runs as the same user and could
# otherwise serve them (cp /tests/expected.json public/stats.json) instead of its own.
want = json.loads(Path("/tests/expected.json").read_text())
Path("/tests/expected.json").unlink()
with contextlib.suppress(OSError, AttributeError):
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0

start_server(["bash", "/app/serve.sh"], 8080)


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy


def get(path):
    try:
        with OPENER.open(f"http://127.0.0.1:8080{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except (OSError, ValueError) as error:
        print(f"GET {path}: {error}")
        if "timed out" in str(error):  # a server that hangs: stop rather than wait on every check
            print("the server stopped answering; giving up")
            sys.exit(1)
        return None, b""


status, body = get("/index.html")
if check(status == 200, f"GET /index.html answers 200 ({status})"):
    check(body == Path("/app/public/index.html").read_bytes(), "index.html served unchanged")
status, body = get("/stats.json")
check(status == 200, f"GET /stats.json answers 200 ({status})")
try:
    stats = json.loads(body)
except ValueError:
    stats = None
check(stats == want, f"stats.json has the right numbers ({str(stats)[:300]})")
status, _ = get("/no-such-page.html")
check(status == 404, f"a missing file answers 404 ({status})")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
