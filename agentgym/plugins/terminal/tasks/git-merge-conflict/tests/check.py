"""Checks for git-merge-conflict."""
import configparser
import os
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
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "app.py"), "w") as handle:
            handle.write(app)
        with open(os.path.join(tmp, "settings.ini"), "w") as handle:
            handle.write(ini)
        probe = ("import app\n"
                 "s = app.load_settings('settings.ini')\n"
                 "assert app.bind_address(s) == ('0.0.0.0', 8443), app.bind_address(s)\n"
                 "assert app.health(s) == {'status': 'ok', 'workers': 4}, app.health(s)\n"
                 "import inspect\n"
                 "src = inspect.getsource(app.tls_context)\n"
                 "assert 'load_cert_chain(server[\"cert\"])' in src\n"
                 "assert 'getboolean(\"tls\", fallback=False)' in src\n"
                 "print('app.py probe ok %s')\n")
        # Passed only if the probe ran to its end: it then prints a word made for this run
        # alone (exit status 0 is what code that ends the process early gives too), given
        # on stdin, which Python reads to its end before it runs any of it: not in the
        # command line, where code the probe imports could read it.
        done = secrets.token_hex(16)
        run = subprocess.run([sys.executable, "-"], input=probe % done, cwd=tmp,
                             capture_output=True, text=True)
        ok = run.returncode == 0 and run.stdout.endswith(f"app.py probe ok {done}\n")
        check(ok, "app.py keeps load_settings, bind_address, health and tls_context"
              + ("" if ok else f": exit {run.returncode}, {run.stderr.strip()[-300:]}"))


main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
