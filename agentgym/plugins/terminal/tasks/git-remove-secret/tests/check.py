"""Checks for git-remove-secret."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = "/app/repo"
FAILS = []
BASE = 1712000000


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def git(*args, cwd=REPO, data=None):
    out = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, input=data,
                         capture_output=True)
    return out.returncode, out.stdout.decode("utf-8", "replace")


PAYMENTS_MAIN = '''import os
import time


def charge(amount, attempts=3):
    key = os.environ["PAYMENT_KEY"]
    for attempt in range(attempts):
        try:
            return {"amount": amount, "auth": key[:7] + "..."}
        except OSError:
            time.sleep(2 ** attempt)
    raise RuntimeError("payment failed")


def refund(amount):
    return {"amount": -amount}
'''
README_MAIN = ("# shopfront\n\nCheckout service for the shop.\n\n## Configuration\n\n"
               "Settings live in `config/settings.env`; keys are read from the environment.\n")
SETTINGS = "PAYMENT_API=https://api.payments.example/v1\nCURRENCY=EUR\n"
HISTORY = [  # subject, day, files
    ("Initial commit", 1, {".gitignore", "README.md", "app.py"}),
    ("Add payment client", 2, {".gitignore", "README.md", "app.py", "config/settings.env",
                               "payments.py"}),
    ("Add retry logic", 3, None),
    ("Rotate payment key", 4, None),
    ("Add refunds", 6, None),
    ("Document configuration", 7, None),
]


def commits(ref):
    rc, out = git("log", "--reverse", "--format=%H%x09%s%x09%an%x09%at", ref)
    return [line.split("\t") for line in out.splitlines()] if rc == 0 else []


def files(sha):
    _, out = git("ls-tree", "-r", "--name-only", sha)
    return set(out.splitlines())


def main():
    rc, refs = git("for-each-ref", "--format=%(refname)")
    refs = refs.split()
    print("refs:", refs)
    check({"refs/heads/main", "refs/heads/release/1.0", "refs/tags/v1.0"} <= set(refs),
          "main, release/1.0 and v1.0 exist")
    # 1. nothing reachable from any ref holds the file or a key
    rc, revs = git("rev-list", "--all")
    bad_paths = [sha for sha in revs.split() if "config/secrets.env" in files(sha)]
    check(rc == 0 and not bad_paths,
          f"no reachable commit has config/secrets.env ({len(bad_paths)} do)")
    rc, objects = git("rev-list", "--objects", "--all")
    names = "\n".join(line.split()[0] for line in objects.splitlines() if line.strip()) + "\n"
    run = subprocess.run(["git", "-c", "safe.directory=*", "cat-file", "--batch"], cwd=REPO,
                         input=names.encode(), capture_output=True)
    tags = b"".join(subprocess.run(["git", "-c", "safe.directory=*", "cat-file", "-p", r],
                                   cwd=REPO, capture_output=True).stdout
                    for r in refs if r.startswith("refs/tags/"))
    check(run.returncode == 0 and b"sk_live_" not in run.stdout and b"sk_live_" not in tags,
          "no reachable object contains a key")
    # 2. the history is otherwise intact
    main_commits = commits("main")
    subjects = [c[1] for c in main_commits]
    check(len(main_commits) in (6, 7) and subjects[:6] == [h[0] for h in HISTORY],
          f"main keeps its commits in order, at most one new one on top (got {subjects})")
    pairs = zip(main_commits, HISTORY, strict=False)
    for (sha, subject, author, at), (want, day, want_files) in pairs:
        check(subject == want and author == "Priya Natarajan" and int(at) == BASE + day * 86400,
              f"'{want}' keeps its author and date")
        if want_files is not None:
            check(files(sha) == want_files, f"'{want}' has the other files ({sorted(files(sha))})")
    if len(main_commits) == 7:
        check(files(main_commits[6][0]) == files(main_commits[5][0]),
              "the extra commit only changes existing files")
    release = commits("release/1.0")
    check([c[1] for c in release] == [h[0] for h in HISTORY[:4]],
          "release/1.0 keeps its four commits")
    check(release[:4] == main_commits[:4] if len(release) == 4 else False,
          "release/1.0 and main share the rewritten commits")
    rc, kind = git("cat-file", "-t", "refs/tags/v1.0")
    check(kind.strip() == "tag", "v1.0 is still an annotated tag")
    rc, peeled = git("rev-parse", "v1.0^{commit}")
    check(bool(release) and peeled.strip() == release[-1][0],
          "v1.0 points at the tip of release/1.0")
    rc, message = git("tag", "-l", "--format=%(contents:subject)", "v1.0")
    check(message.strip() == "Release 1.0", "v1.0 keeps its message")
    for ref, path, want in (("main", "payments.py", PAYMENTS_MAIN),
                            ("main", "README.md", README_MAIN),
                            ("main", "config/settings.env", SETTINGS),
                            ("release/1.0", "config/settings.env", SETTINGS)):
        rc, got = git("show", f"{ref}:{path}")
        check(rc == 0 and got == want, f"{ref}:{path} unchanged")
    rc, got = git("show", "release/1.0:payments.py")
    check(rc == 0 and "attempts=3" in got and "refund" not in got,
          "release/1.0:payments.py unchanged")
    # 3. the working tree
    rc, head = git("symbolic-ref", "--short", "HEAD")
    check(head.strip() == "main", "main is checked out")
    rc, status = git("status", "--porcelain", "--untracked-files=no")
    check(rc == 0 and status.strip() == "", "no uncommitted changes to tracked files")
    path = os.path.join(REPO, "config/secrets.env")
    content = Path(path).read_text() if os.path.isfile(path) else None
    check(content == "PAYMENT_KEY=sk_live_9fQ2ZtW8mKcR3vYpL6nB1xDs\n",
          "config/secrets.env still on disk with the current key")
    rc, tracked = git("ls-files", "config/secrets.env")
    check(tracked.strip() == "", "config/secrets.env is not tracked")
    rc, ignore = git("show", "main:.gitignore")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "init", "-q", tmp], capture_output=True)
        with open(os.path.join(tmp, ".gitignore"), "w") as handle:
            handle.write(ignore)
        rc, _ = git("check-ignore", "-q", "--no-index", "config/secrets.env", cwd=tmp)
    check(rc == 0, "the committed .gitignore on main ignores config/secrets.env")
    check("__pycache__/" in ignore, ".gitignore keeps its old rules")


main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
