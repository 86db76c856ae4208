"""Checks for http-serve-stats: query the running server on 127.0.0.1:8080."""
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


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


want = json.loads(Path("/tests/expected.json").read_text())
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
