"""Checks for python-package-module: layout, imports, `python3 -m wordstat` vs the old script."""
import os
import secrets
import subprocess
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


ENV = dict(os.environ, PYTHONPATH="/app", PYTHONDONTWRITEBYTECODE="1")


def run(args, cwd="/tmp", env=ENV, stdin=None):
    try:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=20,
                              input=stdin)
    except subprocess.TimeoutExpired:
        return (None, "", "timeout")
    return done.returncode, done.stdout, done.stderr


for rel in ("__init__.py", "__main__.py", "core.py", "cli.py"):
    check(os.path.isfile(f"/app/wordstat/{rel}"), f"wordstat/{rel} exists")

probe = ("import wordstat, wordstat.core, wordstat.cli\n"
         "from wordstat import count_words, top_words, __version__\n"
         "assert __version__ == '1.2.0', __version__\n"
         "assert count_words(\"It's a test, a TEST.\") == 5\n"
         "assert top_words('b a b c a b', 2) == [('b', 3), ('a', 2)]\n"
         "assert wordstat.core.words(\"Don't STOP\") == [\"don't\", 'stop']\n"
         "assert callable(wordstat.cli.main)\n"
         "assert wordstat.cli.main(['/app/sample.txt', '--top', '1']) == 0\n")
# A probe passes only if it ran to its end: it then prints a word made for this run alone
# (exit status 0 and no output are what code that ends the process early gives too). The
# probe comes on stdin, which Python reads to its end before it runs any of it: the word
# is not in the command line, where the package's code could read it.
DONE = secrets.token_hex(16)
rc, out, err = run([sys.executable, "-"], stdin=probe + f"print('probe-done-' + {DONE!r})\n")
ok = rc == 0 and out.endswith(f"probe-done-{DONE}\n")
check(ok, "the package imports and exposes the API"
      + ("" if ok else f": exit {rc}, {err.strip()[-400:]}"))
rc, out, err = run([sys.executable, "-"], stdin="import wordstat, wordstat.core, wordstat.cli\n"
                   f"print('probe-done-' + {DONE!r})\n")
check(rc == 0 and out == f"probe-done-{DONE}\n" and err == "", "importing prints nothing")

ORIGINAL = "/tests/original_textstats.py"
with open("/tmp/wordstat-check.txt", "w") as handle:
    handle.write("Alpha beta, beta GAMMA gamma gamma; delta's delta's delta's delta's!\n")
cases = [["/app/sample.txt"], ["/app/sample.txt", "--top", "5"],
         ["/tmp/wordstat-check.txt", "--top", "2"], ["/tmp/wordstat-check.txt"],
         ["/tmp/does-not-exist.txt"], ["/app/sample.txt", "--top", "many"], []]
for args in cases:
    want = run([sys.executable, ORIGINAL, *args])
    for cwd in ("/tmp", "/"):
        got = run([sys.executable, "-m", "wordstat", *args], cwd=cwd)
        same = got[0] == want[0] and got[1] == want[1] and bool(got[2]) == bool(want[2])
        check(same, f"python3 -m wordstat {' '.join(args)} (in {cwd}):"
                    f" exit {got[0]} (want {want[0]})")
        if not same:
            print(f"  got stdout {got[1][:200]!r} stderr {got[2][-200:]!r}")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
