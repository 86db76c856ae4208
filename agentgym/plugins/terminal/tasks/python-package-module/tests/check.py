"""Checks for python-package-module: layout, imports, `python3 -m wordstat` vs the old script."""
import contextlib
import importlib.util
import io
import json
import os
import random
import secrets
import subprocess
import sys

FAILS = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)
    return ok


ENV = dict(os.environ, PYTHONPATH="/app", PYTHONDONTWRITEBYTECODE="1")


def run(args, cwd="/tmp", env=ENV, stdin=None):
    try:
        done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=20,
                              input=stdin)
    except subprocess.TimeoutExpired:
        return (None, "", "timeout")
    return done.returncode, done.stdout, done.stderr


for rel in ("__init__.py", "__main__.py", "core.py", "cli.py"):
    check(os.path.isfile(f"/app/wordstat/{rel}"), f"wordstat/{rel} exists")

ORIGINAL = "/tests/original_textstats.py"
# The reference: the old script's functions, loaded here, in the checker's own process.
_spec = importlib.util.spec_from_file_location("original_textstats", ORIGINAL)
REFERENCE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(REFERENCE)

# The package's API runs in a process of its own, on a text and a file made for this run,
# and prints what it returned as JSON; the values are compared here, to the reference's on
# the same input. Nothing in that process can pass for the package doing its work: code
# that ends it early prints no values, and printing the right ones for a text nobody has
# seen before is the work (a word or a value planted in the probe would be in reach of the
# package's code, which runs in the same process).
RANDOM = random.Random(secrets.randbits(64))
VOCABULARY = ["alpha", "Beta", "GAMMA", "don't", "it's", "o'clock", "x", "Zeta", "ab12cd",
              "well-known", "rock'n'roll", "naive", "QUICK", "quick", "dog", "dogs"]


def made_text():
    """A text of the vocabulary's words, cases and punctuation, different on every run."""
    words = RANDOM.choices(VOCABULARY, k=RANDOM.randint(20, 60))
    return "".join(w + RANDOM.choice([" ", " ", ", ", ". ", "; ", "\n", "! "]) for w in words)


def as_json(value):
    return json.dumps(value, sort_keys=True)


TEXT, TOP = made_text(), RANDOM.randint(2, 6)
SAMPLE = f"/tmp/wordstat-probe-{secrets.token_hex(4)}.txt"
with open(SAMPLE, "w", encoding="utf-8") as handle:
    handle.write(made_text())
probe = ("import contextlib, io, json, sys\n"
         "import wordstat, wordstat.core, wordstat.cli\n"
         "from wordstat import count_words, top_words, __version__\n"
         f"text = {TEXT!r}\n"
         "out = io.StringIO()\n"
         "with contextlib.redirect_stdout(out):\n"
         f"    status = wordstat.cli.main([{SAMPLE!r}, '--top', '{TOP}'])\n"
         "values = {'version': __version__, 'count': count_words(text),\n"
         f"          'top': top_words(text, {TOP}), 'words': wordstat.core.words(text),\n"
         "          'main': [status, out.getvalue()]}\n"
         "sys.stdout.write(json.dumps(values, sort_keys=True) + '\\n')\n")
reference_out = io.StringIO()
with contextlib.redirect_stdout(reference_out):
    reference_status = REFERENCE.main([SAMPLE, "--top", str(TOP)])
WANT = as_json({"version": "1.2.0", "count": REFERENCE.count_words(TEXT),
                "top": REFERENCE.top_words(TEXT, TOP), "words": REFERENCE.words(TEXT),
                "main": [reference_status, reference_out.getvalue()]})
rc, out, err = run([sys.executable, "-"], stdin=probe)
try:
    got = as_json(json.loads(out)) if rc == 0 and out.count("\n") == 1 else None
except ValueError:
    got = None
ok = got == WANT
check(ok, "the package imports and exposes the API"
      + ("" if ok else f": exit {rc}, stdout {out[-300:]!r}, stderr {err.strip()[-300:]!r}"
                       f" (want {WANT[:300]})"))
rc, out, err = run([sys.executable, "-"], stdin="import wordstat, wordstat.core, wordstat.cli\n"
                   f"print(wordstat.core.count_words({TEXT!r}))\n")
check(rc == 0 and out == f"{REFERENCE.count_words(TEXT)}\n" and err == "",
      "importing prints nothing")

with open("/tmp/wordstat-check.txt", "w", encoding="utf-8") as handle:
    handle.write(made_text())
cases = [["/app/sample.txt"], ["/app/sample.txt", "--top", "5"],
         ["/tmp/wordstat-check.txt", "--top", "2"], ["/tmp/wordstat-check.txt"],
         ["/tmp/does-not-exist.txt"], ["/app/sample.txt", "--top", "many"], []]
for args in cases:
    want = run([sys.executable, ORIGINAL, *args])
    for cwd in ("/tmp", "/"):
        got = run([sys.executable, "-m", "wordstat", *args], cwd=cwd)
        same = got[0] == want[0] and got[1] == want[1] and bool(got[2]) == bool(want[2])
        check(same, f"python3 -m wordstat {' '.join(args)} (in {cwd}):"
                    f" exit {got[0]} (want {want[0]})")
        if not same:
            print(f"  got stdout {got[1][:200]!r} stderr {got[2][-200:]!r}")
print(f"{len(FAILS)} check(s) failed" if FAILS else "all checks passed")
sys.exit(1 if FAILS else 0)
