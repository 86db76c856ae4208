"""Checks for git-reflog-recover."""
import subprocess
import sys

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


REPORT = '''from alerts import low_stock


def stock_report(items):
    lines = [f"{item.sku:<10}{item.name:<30}{item.quantity:>6}" for item in items]
    short = low_stock(items)
    if short:
        lines.append(f"LOW STOCK: {', '.join(i.sku for i in short)}")
    return "\\n".join(lines)
'''
ALERTS = '''def low_stock(items):
    """Items whose quantity fell below their minimum, lowest first."""
    return sorted((i for i in items if i.quantity < i.minimum), key=lambda i: i.quantity)
'''
EXPECTED = ["Initial commit", "Add item model", "Add CSV loader", "Add stock report",
            "Add low-stock alerts", "Fix typo in README"]


def main():
    rc, head = git("symbolic-ref", "--short", "HEAD")
    check(rc == 0 and head.strip() == "main", "main is checked out")
    rc, subjects = git("log", "--no-merges", "--format=%s", "main")
    subjects = subjects.splitlines()
    check(rc == 0 and sorted(subjects) == sorted(EXPECTED),
          f"main holds each expected commit exactly once (got {subjects})")
    rc, status = git("status", "--porcelain", "--untracked-files=no")
    check(rc == 0 and status.strip() == "", "no uncommitted changes to tracked files")
    rc, report = git("show", "main:report.py")
    check(rc == 0 and report == REPORT,
          "report.py at main is the version from 'Add low-stock alerts'")
    rc, alerts = git("show", "main:alerts.py")
    check(rc == 0 and alerts == ALERTS, "alerts.py at main matches the lost commit")
    rc, readme = git("show", "main:README.md")
    check(rc == 0 and "warehouse stock" in readme and "warehuose" not in readme,
          "README fix kept on main")
    rc, _ = git("cat-file", "-e", "main:storage.py")
    check(rc != 0, "nothing from spike on main")
    rc, spike = git("log", "--format=%s", "spike")
    check(rc == 0 and spike.splitlines() == ["Spike: try JSON storage", "Add CSV loader",
                                             "Add item model", "Initial commit"],
          "spike is unchanged")
    # Each recovered commit must carry the same change as the original (not squashed).
    for subject, path in (("Add stock report", "report.py"), ("Add low-stock alerts", "alerts.py")):
        rc, sha = git("log", "--format=%H", "--fixed-strings", f"--grep={subject}", "main")
        sha = sha.split()[0] if sha.split() else ""
        rc2, files = git("show", "--format=", "--name-only", sha) if sha else (1, "")
        check(rc2 == 0 and path in files.split(), f"'{subject}' changes {path}")


main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
