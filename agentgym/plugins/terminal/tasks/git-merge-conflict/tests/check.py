"""Checks for git-merge-conflict."""
import ast
import configparser
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile

REPO = "/app/repo"
FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def git(*args):
    out = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=REPO,
                         capture_output=True, text=True)
    return out.returncode, out.stdout


def main():
    rc, _ = git("rev-parse", "-q", "--verify", "MERGE_HEAD")
    check(rc != 0, "no merge in progress any more")
    rc, head = git("symbolic-ref", "--short", "HEAD")
    check(head.strip() == "main", "main is checked out")
    rc, status = git("status", "--porcelain", "--untracked-files=no")
    check(rc == 0 and status.strip() == "", "clean working tree")
    rc, feature = git("log", "--format=%s", "feature/tls")
    check(feature.splitlines() == ["Serve over TLS", "Initial service skeleton"],
          "feature/tls unchanged")
    rc, parents = git("log", "-1", "--format=%P", "main")
    parents = parents.split()
    if not check(len(parents) == 2, f"tip of main is a merge commit (parents: {parents})"):
        return
    rc, first = git("log", "-1", "--format=%s", parents[0])
    check(first.strip() == "Tune workers and log level; add health check",
          "first parent is the previous tip of main")
    rc, tip = git("rev-parse", "feature/tls")
    check(parents[1] == tip.strip(), "second parent is the tip of feature/tls")
    rc, ini = git("show", "main:settings.ini")
    check("<<<<<<<" not in ini and ">>>>>>>" not in ini and "=======" not in ini,
          "settings.ini has no conflict markers")
    parser = configparser.ConfigParser()
    try:
        parser.read_string(ini)
        got = {s: dict(parser[s]) for s in parser.sections()}
    except configparser.Error as error:
        got = {"error": str(error)}
    want = {"server": {"host": "0.0.0.0", "port": "8443", "tls": "true",
                       "cert": "/etc/app/cert.pem", "workers": "4"},
            "logging": {"level": "WARNING", "file": "/var/log/app.log"}}
    check(got == want, f"settings.ini resolved as asked (got {got})")
    rc, app = git("show", "main:app.py")
    check("<<<<<<<" not in app and ">>>>>>>" not in app, "app.py has no conflict markers")
    rc, _ = git("cat-file", "-e", "main:TLS.md")
    check(rc == 0, "TLS.md from the feature branch is present")
    check(tls_context_kept(app), "app.py keeps tls_context as feature/tls wrote it")
    # The functions run in a process of their own, on settings made for this run, and print
    # what they returned as JSON; the values are compared here. Code that ends that process
    # early prints none, and the right ones for settings nobody has seen before are what
    # working functions print (a word planted in the probe would be in reach of app.py's
    # code, which runs in the same process).
    rng = random.Random(secrets.randbits(64))
    host = "10." + ".".join(str(rng.randint(1, 254)) for _ in range(3))
    port, workers = rng.randint(1025, 65000), rng.randint(1, 64)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "app.py"), "w") as handle:
            handle.write(app)
        with open(os.path.join(tmp, "probe.ini"), "w") as handle:
            handle.write(f"[server]\nhost = {host}\nport = {port}\nworkers = {workers}\n"
                         "tls = false\n")
        probe = ("import json, sys\n"
                 "import app\n"
                 "s = app.load_settings('probe.ini')\n"
                 "values = [list(app.bind_address(s)), app.health(s), app.tls_context(s)]\n"
                 "sys.stdout.write(json.dumps(values, sort_keys=True) + '\\n')\n")
        run = subprocess.run([sys.executable, "-"], input=probe, cwd=tmp,
                             capture_output=True, text=True)
        want = json.dumps([[host, port], {"status": "ok", "workers": workers}, None],
                          sort_keys=True)
        try:
            got = json.dumps(json.loads(run.stdout), sort_keys=True)
        except ValueError:
            got = None
        ok = run.returncode == 0 and run.stdout.count("\n") == 1 and got == want
        check(ok, "app.py keeps load_settings, bind_address and health"
              + ("" if ok else f": exit {run.returncode}, stdout {run.stdout[-200:]!r},"
                               f" stderr {run.stderr.strip()[-300:]!r}"))


def tls_context_kept(app):
    """Whether ``app`` (the text of app.py) defines tls_context with feature/tls's body."""
    try:
        tree = ast.parse(app)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "tls_context":
            source = ast.get_source_segment(app, node) or ""
            return ('load_cert_chain(server["cert"])' in source
                    and 'getboolean("tls", fallback=False)' in source)
    return False

main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
