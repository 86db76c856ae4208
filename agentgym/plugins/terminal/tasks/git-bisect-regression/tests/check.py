"""Checks for git-bisect-regression."""
import subprocess
import sys
from pathlib import Path

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
    rc, want = git("log", "--format=%H", "--fixed-strings",
                   "--grep=Tidy up helpers for ends", "main")
    want = want.split()
    check(rc == 0 and len(want) == 1, "the history of main is intact")
    rc, count = git("rev-list", "--count", "v1.0..main")
    check(count.strip() == "40", "main still has its 40 commits after v1.0")
    try:
        got = Path("/app/first_bad.txt").read_text()
    except OSError:
        got = None
    check(got is not None, "/app/first_bad.txt exists")
    if got is None:
        return
    check(got.strip() == got.rstrip("\n") and len(got.strip()) == 40,
          f"it holds one full 40-character hash ({got.strip()!r})")
    check(bool(want) and got.strip() == want[0], "it is the first bad commit")
    rc, head = git("symbolic-ref", "--short", "HEAD")
    check(head.strip() == "main", "main is checked out again")
    rc, _ = git("rev-parse", "-q", "--verify", "refs/bisect/bad")
    check(rc != 0, "no bisect session left open")


main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
