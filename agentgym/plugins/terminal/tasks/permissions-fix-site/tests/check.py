"""Checks for permissions-fix-site: exact modes of every path, nothing else changed."""
import os
import stat
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


ROOT = "/app/site"
WANT = {
    ".": 0o755, "index.html": 0o644, "about.html": 0o644, ".htaccess": 0o644,
    "css": 0o755, "css/style.css": 0o644, "css/.cache": 0o755, "css/.cache/build.css": 0o644,
    "js": 0o755, "js/app.js": 0o644,
    "bin": 0o755, "bin/deploy": 0o755, "bin/backup.sh": 0o755,
    "bin/lib": 0o755, "bin/lib/helpers.py": 0o644,
    "tools": 0o755, "tools/minify.sh": 0o755,
    "private": 0o700, "private/credentials.txt": 0o600, "private/.token": 0o600,
    "private/keys": 0o700, "private/keys/server.key": 0o600, "private/keys/rotate.sh": 0o600,
    "uploads": 0o755, "uploads/notes.txt": 0o644,
}
CONTENT = {"index.html": "<h1>Welcome</h1>\n", "private/keys/rotate.sh": "#!/bin/sh\necho rotate\n",
           "private/.token": "tok-123\n", "bin/deploy": "#!/bin/sh\necho deploying\n"}
found = {}
if check(os.path.isdir(ROOT), "/app/site exists"):
    found["."] = os.lstat(ROOT).st_mode
    for dirpath, dirnames, filenames in os.walk(ROOT):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            found[os.path.relpath(full, ROOT)] = os.lstat(full).st_mode
check(set(found) == set(WANT), "the same files and folders as before "
      f"(missing {sorted(set(WANT) - set(found))}, new {sorted(set(found) - set(WANT))})")
wrong = []
for rel, mode in sorted(WANT.items()):
    if rel in found and stat.S_IMODE(found[rel]) != mode:
        wrong.append(f"{rel}: {stat.S_IMODE(found[rel]):04o} (want {mode:04o})")
check(not wrong and set(found) == set(WANT), f"every mode is right ({len(wrong)} wrong)")
for line in wrong:
    print("  " + line)
for rel, text in CONTENT.items():
    try:
        with open(os.path.join(ROOT, rel)) as handle:
            same = handle.read() == text
    except OSError:
        same = False
    check(same, f"{rel} content unchanged")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
