"""Checks for c-static-library: archive contents, program output, incremental rebuilds, clean."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


work = tempfile.mkdtemp()
shutil.copytree("/tests/pristine", work, dirs_exist_ok=True)
try:
    shutil.copy("/app/strutil/Makefile", os.path.join(work, "Makefile"))
except OSError as error:
    print(f"no Makefile: {error}")


def make(*args):
    run = subprocess.run(["make", *args], cwd=work, capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def demo(*args):
    exe = os.path.join(work, "demo")
    if not os.access(exe, os.X_OK):
        return None
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=10).stdout


def later(rel, text=None):
    """Change rel so that it is newer than every other file, and all of them are in the past."""
    now = time.time()
    for dirpath, _, names in os.walk(work):
        for name in names:
            os.utime(os.path.join(dirpath, name), (now - 100, now - 100))
    path = os.path.join(work, rel)
    if text is not None:
        with open(path, "w") as handle:
            handle.write(text)
    os.utime(path, (now - 50, now - 50))


rc, out = make()
if not check(rc == 0, "make succeeds"):
    print(out[-1500:])
lib = os.path.join(work, "libstrutil.a")
members = subprocess.run(["ar", "t", lib], capture_output=True, text=True).stdout.split() \
    if os.path.isfile(lib) else None
check(members is not None and sorted(members) == ["reverse.o", "upper.o", "vowels.o"],
      f"libstrutil.a holds exactly reverse.o, upper.o, vowels.o ({members})")
check(demo("hello", "Make") == "OLLEH 2\nEKAM 2\n", f"demo output ({demo('hello', 'Make')!r})")
rc, _ = make("-q", "demo", "libstrutil.a")
check(rc == 0, "a second make has nothing to do")
# a library source changes: the program must pick it up
with open(os.path.join(work, "src/upper.c")) as handle:
    upper = handle.read().replace("toupper", "tolower")
later("src/upper.c", upper)
rc, out = make()
check(rc == 0 and demo("hello") == "olleh 2\n",
      f"after src/upper.c changes, make relinks demo with the new library ({demo('hello')!r})")
members = subprocess.run(["ar", "t", lib], capture_output=True, text=True).stdout.split()
check(sorted(members) == ["reverse.o", "upper.o", "vowels.o"],
      "the archive still holds three objects")
later("include/strutil.h")
rc, _ = make("-q", "demo", "libstrutil.a")
check(rc != 0, "changing the header makes the build out of date")
rc, _ = make()
rc, _ = make("-q", "demo", "libstrutil.a")
check(rc == 0, "and one make brings it up to date again")
rc, out = make("clean")
left = [p for p in ("libstrutil.a", "demo") if os.path.exists(os.path.join(work, p))]
left += [os.path.relpath(p, work) for p in glob.glob(os.path.join(work, "**/*.o"), recursive=True)]
check(rc == 0 and not left, f"make clean removes the library, demo and objects (left: {left})")
check(all(os.path.isfile(os.path.join(work, p)) for p in
          ("src/reverse.c", "src/upper.c", "src/vowels.c", "app/main.c", "include/strutil.h")),
      "make clean keeps the sources")
shutil.rmtree(work, ignore_errors=True)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
