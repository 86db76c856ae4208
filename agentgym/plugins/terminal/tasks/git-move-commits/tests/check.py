"""Checks for git-move-commits."""
import subprocess
import sys

REPO = "/app/repo"
FAILS = []
BASE = 1714000000


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def git(*args):
    out = subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=REPO,
                         capture_output=True, text=True)
    return out.returncode, out.stdout


def log(ref):
    rc, out = git("log", "--reverse", "--format=%H%x09%s%x09%at%x09%ct%x09%P", ref)
    return [line.split("\t") for line in out.splitlines()] if rc == 0 else []


JSON_EXPORT = '''import json


def to_json(rows, path):
    with open(path, "w") as handle:
        json.dump(rows, handle, indent=2, sort_keys=True)
'''


def main():
    main_log = log("main")
    check([c[1] for c in main_log] == ["Initial commit", "Add CSV reader", "Fix header alignment"],
          f"main ends at 'Fix header alignment' (got {[c[1] for c in main_log]})")
    if main_log:
        tip = main_log[-1]
        # the original commit: authored and committed at its original time (step 4)
        check(tip[2] == tip[3] == str(BASE + 4 * 7200), "main's tip is the original commit")
    rc, tree = git("ls-tree", "-r", "--name-only", "main")
    check(set(tree.split()) == {"README.md", "reader.py", "table.py"},
          f"main has no JSON export files ({tree.split()})")
    feature = log("feature/export")
    subjects = [c[1] for c in feature]
    check(subjects == ["Initial commit", "Add CSV reader", "Start export module",
                       "Add JSON export", "Add JSON export tests"],
          f"feature/export has the two commits on top of 'Start export module' (got {subjects})")
    if len(feature) == 5:
        start = feature[2]
        check(start[2] == start[3] == str(BASE + 3 * 7200),
              "'Start export module' is the original commit")
        check(feature[3][4] == start[0] and feature[4][4] == feature[3][0],
              "the moved commits sit linearly on top of it")
        for sha, paths in ((feature[3][0], ["export_json.py"]),
                           (feature[4][0], ["test_export_json.py"])):
            rc, changed = git("show", "--format=", "--name-only", sha)
            check(changed.split() == paths, f"{sha[:8]} changes exactly {paths}")
    rc, content = git("show", "feature/export:export_json.py")
    check(rc == 0 and content == JSON_EXPORT, "export_json.py content preserved")
    rc, content = git("show", "feature/export:export.py")
    check(rc == 0 and content.startswith('"""Exporters'), "export.py still on feature/export")
    rc, head = git("symbolic-ref", "--short", "HEAD")
    check(head.strip() == "main", "main is checked out")
    rc, status = git("status", "--porcelain")
    check(rc == 0 and status.strip() == "", "clean working tree")


main()
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
