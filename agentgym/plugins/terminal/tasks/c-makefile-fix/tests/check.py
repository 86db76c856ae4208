"""Checks for c-makefile-fix: build, run, incremental rebuilds, clean."""
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


# Work on a copy with pristine sources (only the Makefile comes from the agent).
work = tempfile.mkdtemp()
shutil.copytree("/tests/pristine", work, dirs_exist_ok=True)
try:
    shutil.copy("/app/calc/Makefile", os.path.join(work, "Makefile"))
except OSError as error:
    print(f"no Makefile: {error}")


def make(*args):
    run = subprocess.run(["make", *args], cwd=work, capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


def calc(*args):
    exe = os.path.join(work, "calc")
    if not os.access(exe, os.X_OK):
        return None
    run = subprocess.run([exe, *args], capture_output=True, text=True, timeout=10)
    return run.returncode, run.stdout.strip()


def touch_later(rel):
    """Make rel newer than every other file, and all of them lie in the past."""
    now = time.time()
    for dirpath, _, names in os.walk(work):
        for name in names:
            os.utime(os.path.join(dirpath, name), (now - 100, now - 100))
    os.utime(os.path.join(work, rel), (now - 50, now - 50))


rc, out = make()
if not check(rc == 0, "make succeeds"):
    print(out[-1500:])
for rel in ("calc", "src/main.o", "src/parse.o", "src/ops.o"):
    check(os.path.isfile(os.path.join(work, rel)), f"{rel} built")
for args, want in ((("add", "2", "3"), "5"), (("pow", "2", "10"), "1024"), (("hyp", "3", "4"), "5"),
                   (("div", "7", "2"), "3.5"), (("sub", "1.5", "4"), "-2.5")):
    got = calc(*args)
    check(got == (0, want), f"calc {' '.join(args)} -> {want} (got {got})")
got = calc("mod", "1", "2")
check(got is not None and got[0] == 2, "unknown operation exits with 2")
rc, _ = make("-q", "calc")
check(rc == 0, "a second make has nothing to do")
for rel in ("include/calc.h", "src/parse.c"):
    touch_later(rel)
    rc, _ = make("-q", "calc")
    check(rc != 0, f"changing {rel} makes calc out of date")
    rc, out = make()
    check(rc == 0, f"make rebuilds after {rel} changed")
    rc, _ = make("-q", "calc")
    check(rc == 0, "after that rebuild, calc is up to date")
rc, out = make("clean")
left = [rel for rel in ("calc", "src/main.o", "src/parse.o", "src/ops.o")
        if os.path.exists(os.path.join(work, rel))]
check(rc == 0 and not left, f"make clean removes calc and the objects (left: {left})")
check(all(os.path.isfile(os.path.join(work, rel)) for rel in
          ("src/main.c", "src/parse.c", "src/ops.c", "include/calc.h", "Makefile")),
      "make clean keeps the sources and the Makefile")
# The agent's own tree must build too (its sources are what the task ships).
run = subprocess.run(["make"], cwd="/app/calc", capture_output=True, text=True, timeout=60)
exe = "/app/calc/calc"
ok = run.returncode == 0 and os.access(exe, os.X_OK) and subprocess.run(
    [exe, "hyp", "6", "8"], capture_output=True, text=True).stdout.strip() == "10"
check(ok, "make in /app/calc builds a working calc")
shutil.rmtree(work, ignore_errors=True)
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
