"""Checks for zip-verify-manifest: extraction and the report."""
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeError):
        return None


check(read("/app/bundle/lib/core.py") == "def core():\n    return 42\n",
      "bundle/lib/core.py extracted")
check(read("/app/bundle/docs/user guide.txt") == "Start the tool with bin/tool.py --fast.\n",
      "bundle/docs/user guide.txt extracted")
check(read("/app/bundle/.config/settings.ini") == "[tool]\nmode = slow\n",
      "hidden bundle/.config/settings.ini extracted")
want = ("MISMATCH .config/settings.ini\n"
        "MISMATCH data/weights.json\n"
        "MISMATCH docs/user guide.txt\n"
        "MISSING lib/legacy.py\n"
        "UNLISTED notes/extra.txt\n")
got = read("/app/verify_report.txt")
if check(got is not None, "/app/verify_report.txt exists"):
    check(got == want, "the report lists exactly the problems, sorted by path")
    if got != want:
        print("  got:\n" + "".join("    " + line + "\n" for line in got.splitlines()))
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
