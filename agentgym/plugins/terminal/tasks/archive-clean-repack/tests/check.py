"""Checks for archive-clean-repack: the entries, contents and modes of the new archive."""
import os
import sys
import tarfile

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


KEEP = {  # path under project/: content
    "README.md": "# project\n\nVersion 1.2 of the project.\n",
    "setup.cfg": "[metadata]\nname = project\nversion = 1.2\n",
    ".env.example": "DATABASE_URL=sqlite:///local.db\nDEBUG=0\n",
    ".gitignore": "*.tmp\n__pycache__/\n.DS_Store\n",
    ".github/workflows/ci.yml": "name: ci\non: [push]\n",
    "src/app/__init__.py": '__version__ = "1.2"\n',
    "src/app/core.py": 'def run():\n    return "running"\n',
    "src/app/utils/text.py": 'def slug(text):\n    return "-".join(text.lower().split())\n',
    "src/app/utils/__init__.py": "",
    "docs/guide.md": "# Guide\n\nRun scripts/run.sh.\n",
    "scripts/run.sh": '#!/bin/sh\nexec python3 -c "from app.core import run; print(run())"\n',
    "build/README.txt": "keep me\n",
    "docs/tmp-notes.md": "not a tmp file\n",
}
path = "/app/out/project.tar.gz"
try:
    archive = tarfile.open(path, "r:gz")  # noqa: SIM115 (read below, closed at exit)
    members = archive.getmembers()
except (OSError, tarfile.TarError) as error:
    members = None
    print(f"cannot open {path} as a gzip tar: {error}")
if check(members is not None, "out/project.tar.gz is a gzip-compressed tar archive"):
    def norm(name):
        while name.startswith("./"):
            name = name[2:]
        return name.rstrip("/")
    names = [norm(m.name) for m in members]
    outside = [n for n in names if n and n != "project" and not n.startswith("project/")]
    check(not outside, f"every entry is under project/ ({outside[:5]})")
    files = {norm(m.name)[len("project/"):]: m for m in members if m.isfile()
             and norm(m.name).startswith("project/")}
    missing = sorted(set(KEEP) - set(files))
    extra = sorted(set(files) - set(KEEP))
    check(not missing, f"nothing kept is missing ({missing})")
    check(not extra, f"no junk left ({extra})")
    junk_dirs = [n for n in names if n.endswith("__pycache__")]
    check(not junk_dirs, f"no __pycache__ folders ({junk_dirs})")
    bad = []
    for name, want in KEEP.items():
        if name in files:
            data = archive.extractfile(files[name]).read()
            if data != want.encode():
                bad.append(name)
    check(not bad, f"contents unchanged ({bad})")
    run = files.get("scripts/run.sh")
    check(run is not None and run.mode & 0o111 == 0o111, "scripts/run.sh is still executable")
    others = [n for n, m in files.items() if n != "scripts/run.sh" and m.mode & 0o777 != 0o644]
    check(not others, f"the other files keep mode 644 ({others})")
check(os.path.isfile("/app/incoming/project-1.2.tar.gz"), "the original archive is still there")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
