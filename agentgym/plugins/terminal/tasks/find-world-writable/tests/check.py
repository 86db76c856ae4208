"""Checks for find-world-writable: the list, and the modes afterwards."""
import os
import stat
import sys
from pathlib import Path

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


BEFORE = {
    "reports": 0o755, "reports/q1.csv": 0o644, "reports/q2.csv": 0o666,
    "reports/draft": 0o777, "reports/draft/notes.txt": 0o646,
    "logs": 0o755, "logs/app.log": 0o664, "logs/old.log": 0o602, "logs/.hidden.log": 0o666,
    "scripts": 0o755, "scripts/run.sh": 0o777, "scripts/build.sh": 0o755,
    "shared": 0o1777, "shared/readme": 0o640, "shared/upload.bin": 0o622,
    "cache": 0o755, "cache/x.tmp": 0o660, "with space.txt": 0o666, "group-only.txt": 0o670,
}
listed = sorted(p for p, m in BEFORE.items() if m & 0o002)
try:
    got = Path("/app/world_writable.txt").read_text()
except OSError:
    got = None
if check(got is not None, "/app/world_writable.txt exists"):
    lines = got.splitlines()
    check(lines == listed and got.endswith("\n"),
          f"the list is exactly the world-writable entries, sorted (got {lines})")
found = {}
for dirpath, dirnames, filenames in os.walk("/app/data"):
    for name in dirnames + filenames:
        full = os.path.join(dirpath, name)
        found[os.path.relpath(full, "/app/data")] = stat.S_IMODE(os.lstat(full).st_mode)
check(set(found) == set(BEFORE), "the same entries as before")
wrong = [f"{p}: {found.get(p, 0):04o} (want {m & ~0o002:04o})" for p, m in sorted(BEFORE.items())
         if found.get(p) != m & ~0o002]
check(not wrong, f"others-write removed, every other bit kept ({len(wrong)} wrong)")
for line in wrong:
    print("  " + line)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
