"""Grading a terminal task: its tests, copied in only now, run in the episode's sandbox,
where nothing the agent left behind can reach them.

:func:`grade_task` runs after the agent finished, in the same sandbox (the workspace, its
files, databases and repositories are what the tests check):

1. **The agent is stopped.** Every process the agent started ends and a new session shell
   starts, sealed where the backend can (:meth:`~agentgym.core.sandbox.Sandbox.seal_session`:
   no process of the tests traces another or writes its memory, and none reads the
   shell's; the metrics' ``sealed`` says what held): no
   detached loop keeps writing the reward file, no service or fork bomb runs on, and no
   function, alias or trap the agent defined in its shell wraps the grader's commands. A
   task that checks a service has its tests start it from the agent's files (see
   docs/terminal.md).
2. **Nothing the agent left points at the grader's files.** A link anywhere in the
   workspace, the agent's home or ``/tmp`` that resolves into ``/tests`` or ``/logs`` (an
   output file made a link to ``/tests/expected.csv``, which exists once the tests are
   copied in) refuses grading, as does one any hop of which (as written or resolved)
   goes through ``/proc`` or ``/dev/fd``, ``/dev/std*``: those name another file for each
   process that opens them (``/proc/<the checker's pid>/root`` is ``/``). The grader's
   own commands run with the system's PATH
   (:data:`SYSTEM_PATH`, ``command -p``), never the sandbox's, whose folders a task may
   let the agent write, and the session shell is bash by its absolute path.
3. **The grader's folders are made anew.** Whatever is in ``/tests`` and ``/logs`` is
   removed without following links (a ``/logs/verifier`` the agent replaced by a link to a
   folder of its own goes, the folder it points to stays untouched) and ``/tests``,
   ``/logs/verifier`` and ``/logs/agent`` are made empty; if one is still not a real
   folder, grading refuses and scores 0, saying which. The task's test files are copied
   into ``/tests``: before this the agent could not read them (they were never in the
   sandbox), and a copy of its own is gone.
4. **The tests run with an environment the agent never wrote**, in the workspace, as the
   sandbox user, within the task's test timeout: the sandbox's starting environment
   without the variables that make programs run code or read files they name
   (:data:`HOOK_VARIABLES`), a fresh ``HOME`` made by the grader (holding only the git
   identity agents get: the agent's ``~/.gitconfig``, ``~/.sqliterc``, shell rc files and
   Python user site do not reach the tests), ``PYTHONNOUSERSITE=1``, and a ``PATH`` whose
   folders the sandbox user can write (or replace) come after the others, so a wrapper
   planted there cannot shadow a system program. The task's ``verifier_env`` is added
   last.
5. **Nothing the tests started runs on.** The sandbox's processes are listed before the
   tests and after them (three passes, so that one changing its pid is seen): one started
   since, still running when the test script has ended, refuses grading, since it could
   have written the reward after the script did (a red team's processes forked anew
   faster than a test script's kill loop read their pids, and wrote 1 over its 0). The
   tests of agentgym's tasks stop what they start; a task's own must too.
6. **The test files are as they were copied in.** After the tests, their processes are
   stopped and every file of ``/tests`` must keep its inode and change time: code of the
   agent's that the tests ran (a service, a module, a Makefile, a git hook) could
   otherwise rewrite the test script bash is reading, or a check before it runs. A test
   runner's configuration appearing there (``conftest.py``, ``pytest.ini`` ...) refuses
   grading too.
7. **The reward:** Harbor tasks report it in ``/logs/verifier/reward.txt`` (a number, or
   ``reward.json`` with a ``reward`` field), read only as a regular file in a real folder
   (a link, or a file made read-only, is refused); Terminal-Bench tasks print pytest's
   ``-rA`` summary, whose PASSED/FAILED lines are counted. ``binary`` gives 1.0 only for
   a full score (a reward of 1, or every test passed); ``fraction`` gives the score
   itself. A test script ended by a signal (exit status above 128: killed, most likely
   by the agent's code it ran, before it wrote its own reward) pays nothing, whatever
   the reward file says.

What stays in reach by design: the workspace and every file the tests read or run. Tests
that run the agent's code (a service, a module, a built program, ``make`` on its Makefile)
run it as the sandbox user, who may write ``/logs`` as the tests do; so the tests of
agentgym's own tasks (and of the tasks converted from packages) stop every process started
since they began, then make ``/logs/verifier`` anew, before they write the reward. A
task's own ``test.sh`` that runs the agent's code should do the same (see
docs/terminal.md).

A task may ask for a **start snapshot** (``[verifier] snapshot``, see
:mod:`~agentgym.plugins.terminal.formats`): a command run as the episode starts, whose result
the tests get as ``/tests/snapshot.json``, for what must be measured before the agent can
change it.

The metrics carry the tests' exit code, the counts, why the reward is what it is, and the
tail of the test output.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import shlex
import tarfile
from collections.abc import Mapping
from pathlib import Path

from agentgym.core.reward import RewardResult
from agentgym.core.sandbox import Sandbox
from agentgym.plugins.terminal.formats import LOGS_DIR, REWARD_FILE, TESTS_DIR, TerminalTask

#: Characters of the test output kept in the metrics.
LOG_TAIL_CHARS = 3000
#: A shell reports a command ended by signal N with exit status 128 + N.
SIGNALLED = 128
#: The git identity of the sandbox user (``~/.gitconfig`` of a fresh sandbox, and of the
#: grader's fresh home), so that commits work.
GITCONFIG = ("[user]\n\tname = agent\n\temail = agent@agentgym.invalid\n"
             "[init]\n\tdefaultBranch = main\n")
#: Variables of the sandbox's environment the tests never get: each makes a program run
#: code or read a file it names (shell and interpreter startup files, preloaded libraries,
#: module paths, test-runner options, config locations), and the file may be the agent's.
#: A task that needs one sets it in its ``verifier_env``.
HOOK_VARIABLES = frozenset({
    "BASH_ENV", "ENV", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE",
    "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
    "PYTHONBREAKPOINT", "PYTHONPYCACHEPREFIX", "PYTHONSAFEPATH", "PYTHONINSPECT",
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PERL5LIB", "PERL5OPT", "PERLLIB",
    "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS",
    "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "SQLITE_HISTORY", "INPUTRC", "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "XDG_CACHE_HOME", "HOME", "PATH",
})
#: What prefixes the grader's lines (its own replies, never the tests' output).
_MARK = "AGENTGYM-GRADER"
#: Where the grader's own commands are looked up: never the sandbox's PATH, whose folders
#: a task may let the agent write (`env`, `find`, `tar` of its own would run as the grader).
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
# pytest -rA's short summary: "PASSED tests/test_x.py::test_y", "FAILED ... - reason"
_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)", re.MULTILINE)
_PASSING = {"PASSED", "XFAIL"}

# Run in the fresh session shell (as a function: `exit` would end that shell), with the
# agent's processes gone and programs from the system's PATH. Refuses a link in the
# workspace, the home or a temporary folder that resolves into /tests or /logs (a folder
# its owner closed, where find would list nothing, is opened for the scan and closed
# again; one of the sandbox user's that cannot be opened refuses). Makes the grader's home
# (a folder of a random name, made just now: one already there is refused). Empties
# /tests and /logs without following links (find -delete never does; chmod first, since
# the agent may have taken its own write permission away), makes the folders anew and
# refuses any that is still not a real, empty folder; unpacks the tests (their tar, a
# file of a random name the grader wrote just now, then removed) and lists them; orders
# PATH: a folder that the sandbox user may write, or owns on a writable mount (its owner
# may make it writable), or one under such a folder (it could be swapped),
# goes after the others. Builtins where they do (each program started costs time on a
# loaded machine). Replies: "files LISTING" and "path PATH", or "refuse WHY".
_PREPARE = r"""
__ag_prepare() {{
  local PATH={system_path} d x agent first= last= entries link mode more opened hop t n
  hash -r
  for d in {scan}; do
    [ -d "$d" ] || continue
    opened=()
    while :; do  # open each folder closed to its owner (find lists no link in one)
      more=
      while IFS= read -r -d '' x; do
        mode=$(stat -c %a -- "$x") && chmod u+rx -- "$x" 2>/dev/null \
          && opened=("$x" "$mode" "${{opened[@]}}") && more=1
      done < <(find "$d" -xdev -type d \( ! -readable -o ! -executable \) -print0 2>/dev/null)
      [[ $more ]] || break
    done
    if [[ $(find "$d" -xdev -type d -uid "$EUID" \( ! -readable -o ! -executable \) \
            -print -quit 2>/dev/null) ]]; then
      echo "{mark} refuse a folder under $d cannot be listed"; return
    fi
    while IFS= read -r -d '' link; do
      x=$(readlink -m -- "$link")
      case $x in {tests}|{tests}/*|{logs}|{logs}/*)
        echo "{mark} refuse $link is a link to $x, into the grader's folders"; return;;
      esac
      # Each hop of its chain, as written and as resolved now: none may go through /proc
      # or /dev's views of a process (/dev/fd, /dev/stdin ...), which resolve to another
      # file for the process that opens it (/proc/<the checker's pid>/root is /).
      hop=$link
      for ((n = 0; n < 40; n++)); do
        t=$(readlink -- "$hop") || break
        [[ $t == /* ]] || t=${{hop%/*}}/$t
        for x in "$t" "$(realpath -s -m -- "$t" 2>/dev/null)" "$(readlink -m -- "$t")"; do
          case $x in /proc|/proc/*|/dev/fd|/dev/fd/*|/dev/std*|{tests}|{tests}/*|{logs}|{logs}/*)
            echo "{mark} refuse $link is a link through $t, a path that resolves to" \
                 "another file for each process (or into the grader's folders)"; return;;
          esac
        done
        hop=$t
      done
    done < <(find "$d" -xdev -type l -print0 2>/dev/null)
    for ((x = 0; x < ${{#opened[@]}}; x += 2)); do  # as they were, the deepest first
      chmod "${{opened[x+1]}}" -- "${{opened[x]}}"
    done
  done
  chmod -R u+rwX {tests} {logs} 2>/dev/null
  find {tests} {logs} -mindepth 1 -delete 2>/dev/null
  if ! mkdir -m 700 {home} {logs}/verifier {logs}/agent 2>/dev/null; then
    echo "{mark} refuse the grader's home and log folders could not be made anew"; return
  fi
  for d in {tests} {logs} {logs}/verifier {home}; do
    if [ -L "$d" ] || [ ! -d "$d" ] || [ ! -O "$d" ]; then
      echo "{mark} refuse $d is not a folder of the grader's (a link?)"; return
    fi
  done
  shopt -s nullglob dotglob
  entries=({tests}/* {logs}/verifier/*)
  for x in {logs}/*; do [[ $x == {logs}/verifier || $x == {logs}/agent ]] || entries+=("$x"); done
  shopt -u nullglob dotglob
  if (( ${{#entries[@]}} )); then
    echo "{mark} refuse ${{entries[0]}} could not be removed"; return
  fi
  printf %s {gitconfig} > {home}/.gitconfig
  if [ -L {archive} ] || [ ! -f {archive} ] || [ ! -O {archive} ] \
      || ! tar -xf {archive} -C {tests}; then
    rm -f {archive}; echo "{mark} refuse the tests could not be copied in"; return
  fi
  rm -f {archive}
  printf '%s files %s\n' {mark} "$(find {tests} -type f -printf '%i %C@ %s %P\n' | base64 -w0)"
  IFS=: read -r -a dirs <<< {path}
  for d in "${{dirs[@]}}"; do
    x=$d agent=
    [[ $x == /* ]] || agent=1
    while [[ -z $agent ]]; do
      if [ -w "$x" ]; then agent=1
      elif [ -O "$x" ] && chmod u+w "$x" 2>/dev/null; then  # its owner could have made it
        chmod u-w "$x"; agent=1                             # writable (not on a read-only
      fi                                                    # mount, as / is here)
      [[ $x == / ]] && break
      x=${{x%/*}}; x=${{x:-/}}
    done
    if [[ $agent ]]; then last=$last:$d; else first=$first:$d; fi
  done
  x=$first$last
  echo "{mark} path ${{x#:}}"
}}
__ag_prepare; unset -f __ag_prepare
"""

# The processes of the sandbox but the session shell and zombies, as "pid:start-time"
# words, listed three times over (builtins only, in one subshell that skips itself), so
# that a process that keeps changing its pid is seen in one pass or another. A zombie is
# one whose every thread is: one whose first thread exited while others run on shows Z
# in /proc/PID/stat too (as the test scripts' kill loop knows). Reply: "procs WORDS".
_PROCESSES = r"""
__ag_ps() {{
  local p s f t key value live
  for p in /proc/[0-9]*; do
    p=${{p#/proc/}}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue  # the shell, the listing's subshell
    s=; read -r -d '' s 2>/dev/null < "/proc/$p/stat"
    [[ $s ]] || continue
    f=(${{s##*) }})
    if [[ ${{f[0]}} == Z ]]; then
      live=
      for t in /proc/$p/task/*/status; do
        while read -r key value _; do
          [[ $key == State: ]] && {{ [[ $value == Z ]] || live=1; break; }}
        done 2>/dev/null < "$t"
      done
      [[ $live ]] || continue
    fi
    printf '%s:%s ' "$p" "${{f[19]}}"
  done
}}
printf '%s procs %s\n' {mark} "$(__ag_ps; __ag_ps; __ag_ps)"; unset -f __ag_ps
"""

# The test files as they are now (after the tests ran, their processes stopped): a
# "files" reply as _PREPARE's, to compare with.
_LIST_TESTS = r"""
__ag_list() {{
  local PATH={system_path}
  printf '%s files %s\n' {mark} "$(find {tests} -type f -printf '%i %C@ %s %P\n' | base64 -w0)"
}}
__ag_list; unset -f __ag_list
"""
#: New files in /tests that a test runner or an interpreter would load as configuration or
#: hooks: left there by the agent's code while the tests ran, they would change the rest.
_LOADED_NAMES = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg",
                           "pyproject.toml", "sitecustomize.py", "usercustomize.py"})

# The reward file as it is: a regular file in a real folder, never through a link, and
# writable (a test script writes it; one made read-only was locked against that write);
# read with builtins. Replies: "file NAME TEXT" (its first 4 KiB, newlines as spaces),
# "refuse WHY" or "none".
_READ_REWARD = r"""
__ag_reward() {{
  local d={verifier} f name text=
  if [ -L "$d" ] || [ ! -d "$d" ]; then
    echo "{mark} refuse $d is not a folder (a link?)"; return
  fi
  for name in reward.txt reward.json; do
    f=$d/$name
    if [ -L "$f" ]; then echo "{mark} refuse $f is a link, not the tests' file"; return; fi
    if [ -f "$f" ] && [ ! -w "$f" ]; then echo "{mark} refuse $f was made read-only"; return; fi
    if [ -f "$f" ]; then
      IFS= read -r -d '' -n 4096 text < "$f"
      printf '%s file %s %s\n' {mark} "$name" "${{text//$'\n'/ }}"; return
    fi
    if [ -e "$f" ]; then echo "{mark} refuse $f is not a regular file"; return; fi
  done
  echo "{mark} none"
}}
__ag_reward; unset -f __ag_reward
"""


def tests_archive(task: TerminalTask, extra: Mapping[str, bytes] | None = None) -> bytes:
    """The task's test files as a tar, laid out as they go into ``/tests``, with files
    ``extra`` (name -> content) added."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, host in task.tests:
            if host.is_dir():
                for path in sorted(host.rglob("*")):
                    tar.add(path, arcname=str(Path(name) / path.relative_to(host)),
                            recursive=False)
            else:
                tar.add(host, arcname=name or host.name, recursive=False)
        for name, data in (extra or {}).items():  # last: over a file of the same name
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def clean_command(command: str, env: Mapping[str, str] | None, workdir: str) -> str:
    """``command`` run by a fresh bash in ``workdir`` with exactly ``env`` (None: the
    session's own environment)."""
    inner = f"cd {shlex.quote(workdir)} && {command}"
    # Both programs by the system's own PATH (``command -p``), not the session's.
    bash = '"$(command -pv bash)" --noprofile --norc -c'
    if env is None:
        return f"{bash} {shlex.quote(inner)}"
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    return f"command -p env -i {pairs} {bash} {shlex.quote(inner)}"


def grader_environment(start_env: Mapping[str, str], home: str, path: str,
                       verifier_env: Mapping[str, str] = ()) -> dict[str, str]:
    """What the tests run with (see the module docstring, step 3): ``start_env`` without
    :data:`HOOK_VARIABLES`, the grader's ``home`` and ordered ``path``, no Python user
    site, then the task's ``verifier_env``."""
    env = {name: value for name, value in start_env.items() if name not in HOOK_VARIABLES}
    env.update(HOME=home, PATH=path, PYTHONNOUSERSITE="1")
    env.update(dict(verifier_env))
    return env


#: The most output of a start snapshot kept (characters).
SNAPSHOT_CHARS = 1 << 16


async def take_snapshot(box: Sandbox, task: TerminalTask, env: Mapping[str, str]
                        ) -> dict[str, object]:
    """Run ``task.snapshot`` in ``box`` as it starts (nothing of the agent's has run):
    ``{"exit_code", "output"}``, which grading hands the tests as ``snapshot.json``."""
    assert task.snapshot
    result = await box.exec(clean_command(task.snapshot, grader_environment(
        env, env.get("HOME") or "/tmp", env.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        task.verifier_env), task.workdir), timeout=task.test_timeout_s)
    return {"exit_code": TIMEOUT_EXIT if result.timed_out else result.exit_code,
            "output": result.output[:SNAPSHOT_CHARS]}


#: The exit code a snapshot that timed out is given (as ``timeout`` does).
TIMEOUT_EXIT = 124


async def grade_task(box: Sandbox, task: TerminalTask, *, env: Mapping[str, str] | None,
                     timeout: float | None = None,
                     snapshot: Mapping[str, object] | None = None) -> RewardResult:
    """Run ``task``'s tests in ``box`` and score them (see the module docstring).
    ``env``: the sandbox's environment at the episode's start (None: the fresh session's,
    which is the same: the spec's); ``snapshot``: what :func:`take_snapshot` took then,
    given to the tests as ``snapshot.json`` (a task with a snapshot and none taken is
    graded without the file)."""
    timeout = timeout or task.test_timeout_s
    sealed = await box.seal_session()
    if env is None:
        env = await _session_environment(box)
    # The grader's home and the tests' archive: new names no one could know before (the
    # agent's processes are gone now). The archive is a file, not text through the
    # session shell, whose memory code of the agent's that the tests run could read
    # where the backend does not seal it.
    home = f"/tmp/.agentgym-grader-{secrets.token_hex(8)}"
    archive = f"/tmp/.agentgym-tests-{secrets.token_hex(8)}.tar"
    extra = {} if snapshot is None else {"snapshot.json": json.dumps(dict(snapshot)).encode()}
    await box.write_file(archive, tests_archive(task, extra))
    scan = {task.workdir, env.get("HOME") or "/tmp", "/tmp", "/var/tmp", "/dev/shm"}
    prepared = await box.exec(_PREPARE.format(
        tests=TESTS_DIR, logs=LOGS_DIR, mark=_MARK, home=home, archive=archive,
        gitconfig=shlex.quote(GITCONFIG), system_path=SYSTEM_PATH,
        scan=" ".join(shlex.quote(d) for d in sorted(scan)),
        path=shlex.quote(env.get("PATH", "/usr/local/bin:/usr/bin:/bin"))), timeout=60)
    replies = _replies(prepared.output)
    if "path" not in replies:
        why = replies.get("refuse") or "the grader's folders could not be prepared"
        return RewardResult(0.0, {"reason": f"grading refused: {why}",
                                  "sealed": ",".join(sealed) or "no",
                                  "log_tail": prepared.output[-LOG_TAIL_CHARS:]})
    test_env = grader_environment(env, home, replies["path"], task.verifier_env)
    before = await _processes(box)
    result = await box.exec(clean_command(task.test_command, test_env, task.workdir),
                            timeout=timeout)
    left = sorted((await _processes(box)) - before) if not result.timed_out else []
    metrics = {"exit_code": result.exit_code, "timed_out": result.timed_out,
               "test_command": task.test_command, "sealed": ",".join(sealed) or "no",
               "leftover_processes": len(left),
               "log_tail": result.output[-LOG_TAIL_CHARS:]}
    if left:
        return RewardResult(0.0, {**metrics, "reason": (
            f"grading refused: {len(left)} process(es) the tests started still ran after"
            f" them (pid:start {', '.join(left[:5])}); one could have written the reward"
            " after the test script did. A task's tests must stop what they start before"
            " they write the reward (docs/terminal.md)")})
    if result.timed_out:
        return RewardResult(0.0, {**metrics, "reason": f"the tests timed out after"
                                                       f" {timeout:g} s"})
    if result.exit_code > SIGNALLED or result.exit_code < 0:
        return RewardResult(0.0, {**metrics, "reason": (
            f"the tests were ended by signal {abs(result.exit_code) % SIGNALLED} (exit"
            f" status {result.exit_code}) before they finished: a reward they did not get to"
            " write is not read")})
    changed = await _tests_changed(box, replies.get("files", ""))
    if changed:
        return RewardResult(0.0, {**metrics, "reason": f"grading refused: {changed}"})
    if task.format == "harbor":
        score, reason = await _reward_file(box)
    else:
        score, reason, passed, total = _pytest_score(result.output)
        metrics.update(tests_passed=passed, tests_total=total)
    if score is None:
        return RewardResult(0.0, {**metrics, "reason": reason})
    score = min(1.0, max(0.0, score))
    reward = score if task.reward == "fraction" else float(score >= 1.0)
    return RewardResult(reward, {**metrics, "score": score, "reason": reason})


async def _processes(box: Sandbox) -> set[str]:
    """The sandbox's processes now, but the session shell (``pid:start-time``)."""
    listed = await box.exec(_PROCESSES.format(mark=_MARK), timeout=60)
    return set(_replies(listed.output).get("procs", "").split())


def _replies(output: str) -> dict[str, str]:
    """The grader's own lines in ``output``: ``{kind: rest}``."""
    replies = {}
    for line in output.splitlines():
        if line.startswith(_MARK + " "):
            kind, _, rest = line[len(_MARK) + 1:].partition(" ")
            replies.setdefault(kind, rest)
    return replies


async def _tests_changed(box: Sandbox, before: str) -> str | None:
    """Why the test files are not as the grader copied them in (``before``: the listing it
    made then), or None. The tests' processes are stopped first: code of the agent's that
    the tests ran (a service, a module, a Makefile) runs as they do and could rewrite a
    test script while bash reads it, or a check before it runs. A file written, replaced
    or re-moded has a new change time, which no one but the kernel sets."""
    await box.fresh_session()
    listed = await box.exec(_LIST_TESTS.format(tests=TESTS_DIR, mark=_MARK,
                                               system_path=SYSTEM_PATH), timeout=60)
    after = _replies(listed.output).get("files")
    if after is None:
        return "the test files could not be listed after the tests ran"
    old, new = _listing(before), _listing(after)
    for name, facts in sorted(old.items()):
        if name in new and new[name] != facts:
            return (f"{TESTS_DIR}/{name} changed while the tests ran (written, replaced or"
                    " its mode changed); a task's tests must leave their own files as they"
                    " are")
    for name in sorted(set(new) - set(old)):
        if name.rsplit("/", 1)[-1] in _LOADED_NAMES or name.endswith(".pth"):
            return (f"{TESTS_DIR}/{name} appeared while the tests ran: configuration a test"
                    " runner or interpreter loads")
    return None


def _listing(encoded: str) -> dict[str, str]:
    """``{path under /tests: "inode ctime size"}`` from a "files" reply."""
    try:
        text = base64.b64decode(encoded.strip() or b"").decode(errors="replace")
    except ValueError:
        return {}
    files = {}
    for line in text.splitlines():
        inode, ctime, size, name = [*line.split(" ", 3), "", "", ""][:4]
        if name:
            files[name] = f"{inode} {ctime} {size}"
    return files


async def _session_environment(box: Sandbox) -> dict[str, str]:
    """The environment of the (fresh) session shell."""
    result = await box.exec("command -p env -0 | command -p base64 -w0", timeout=30)
    env = {}
    for pair in base64.b64decode(result.output.strip().splitlines()[-1]).split(b"\0"):
        name, sep, value = pair.decode(errors="replace").partition("=")
        if sep and name not in ("PWD", "OLDPWD", "SHLVL", "_"):
            env[name] = value
    return env


async def _reward_file(box: Sandbox) -> tuple[float | None, str]:
    """Harbor's reward: ``reward.txt``'s number, else ``reward.json``'s ``reward``; only
    a regular file in a real folder counts."""
    read = await box.exec(_READ_REWARD.format(verifier=f"{LOGS_DIR}/verifier", mark=_MARK),
                          timeout=60)
    replies = _replies(read.output)
    if "refuse" in replies:
        return None, f"reward refused: {replies['refuse']}"
    if "file" not in replies:
        return None, f"the tests wrote no {REWARD_FILE}"
    name, _, text = replies["file"].partition(" ")
    text = text.strip()
    if name == "reward.txt":
        try:
            return float(text.split()[0]), f"{REWARD_FILE} says {text[:40]}"
        except (ValueError, IndexError):
            return None, f"{REWARD_FILE} holds {text[:80]!r}, not a number"
    json_file = REWARD_FILE.replace(".txt", ".json")
    try:
        data = json.loads(text)
        return float(data["reward"]), f"{json_file} says {data['reward']}"
    except (ValueError, KeyError, TypeError):
        return None, f"{json_file} has no numeric 'reward'"


def _pytest_score(output: str) -> tuple[float | None, str, int, int]:
    """Terminal-Bench's reward: the share of tests pytest's ``-rA`` summary lists as
    passed."""
    results: dict[str, str] = {}
    for outcome, test in _RESULT.findall(output):
        results[test] = outcome
    total = len(results)
    passed = sum(outcome in _PASSING for outcome in results.values())
    if not total:
        return None, "the test output lists no test results (pytest -rA)", 0, 0
    return passed / total, f"{passed}/{total} tests passed", passed, total
