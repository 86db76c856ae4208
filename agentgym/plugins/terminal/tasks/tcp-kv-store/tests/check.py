"""Checks for tcp-kv-store: start the agent's server and talk to it on 127.0.0.1:7070."""
import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

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


start_server(["python3", "/app/kvserver.py"], 7070)


class Client:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", 7070), timeout=3)
        self.file = self.sock.makefile("rb")

    def ask(self, line):
        try:
            self.sock.sendall(line.encode() + b"\n")
            reply = self.file.readline()
        except TimeoutError:
            return "<timeout>"
        except OSError as error:
            return f"<{error.__class__.__name__}>"
        return reply.decode("utf-8", "replace").rstrip("\n") if reply else "<closed>"

    def close(self):
        self.sock.close()


try:
    a = Client()
except OSError as error:
    print(f"cannot connect to 127.0.0.1:7070: {error}")
    check(False, "the server accepts connections")
    sys.exit(1)
check(True, "the server accepts connections")


def expect(client, line, want, what=None):
    got = client.ask(line)
    ok = check(got == want, f"{what or line!r} -> {want!r} (got {got!r})")
    if got == "<timeout>":  # a server that hangs: stop here rather than wait on every check
        print("the server stopped answering; giving up")
        sys.exit(1)
    return ok


expect(a, "GET region", "VALUE eu-north", "seeded key")
expect(a, "GET owner", "VALUE platform team", "second command on the same connection")
expect(a, "GET formula", "VALUE a=b+c", "seed split at the first '='")
expect(a, "COUNT", "COUNT 5", "COUNT after seeding (comments skipped)")
expect(a, "GET missing", "NOT_FOUND")
expect(a, "SET city Tromsø by the sea", "OK")
expect(a, "GET city", "VALUE Tromsø by the sea", "value with spaces and UTF-8")
expect(a, "FLY away", "ERROR", "unknown command")
expect(a, "GET city", "VALUE Tromsø by the sea", "connection stays open after ERROR")
try:
    b = Client()
except OSError as error:
    check(False, f"a second client can connect ({error})")
    sys.exit(1)
expect(b, "GET city", "VALUE Tromsø by the sea", "a second client sees the first client's data")
expect(b, "SET max_conn 128", "OK")
expect(a, "GET max_conn", "VALUE 128", "updates are shared")
expect(a, "DEL region", "DELETED")
expect(b, "DEL region", "NOT_FOUND", "deleting twice")
expect(b, "COUNT", "COUNT 5")
expect(b, "GET greeting\r", "VALUE hello world", "a trailing \\r is stripped")
expect(a, "QUIT", "BYE")
try:
    a.sock.settimeout(2)
    rest = a.file.read()
    closed = rest == b""
except OSError:
    closed = True
check(closed, "the server closes the connection after BYE")
expect(b, "COUNT", "COUNT 5", "the other client still works")
b.close()
try:
    c = Client()
except OSError as error:
    check(False, f"a new connection is accepted ({error})")
    sys.exit(1)
expect(c, "GET max_conn", "VALUE 128", "data survives across connections")
c.close()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
