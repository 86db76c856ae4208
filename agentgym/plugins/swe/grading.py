"""Grading a SWE task: apply the agent's change to a fresh checkout, run the tests, score.

:func:`grade` takes a FRESH :class:`~agentgym.core.sandbox.Sandbox` whose working
directory is the task's git repository at ``base_commit``, the :class:`SWEInstance`, and
the agent's diff (from :func:`diff_of` on the agent's own sandbox). Nothing of the agent's
sandbox reaches it but that diff, and of the diff only what is the agent's to change. It

1. drops from the diff every file that is the task's (:func:`split_diff`,
   :mod:`agentgym.plugins.swe.grader_files`): the tests (files the ``test_patch``
   touches, files named by ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` ids, test paths), the test
   runner's configuration (``pytest.ini``, ``pyproject.toml``, ``setup.cfg``, ``tox.ini``,
   ``conftest.py`` anywhere), interpreter start-up hooks (``sitecustomize.py``,
   ``usercustomize.py``, ``*.pth``), packaging metadata (``*.dist-info``, ``*.egg-info``,
   ``entry_points.txt``, ``setup.py``, ...), build artefacts, new modules that would shadow
   the runner (``pytest.py`` at the root) and the runner's own script (``bin/test``).
   Changing them therefore never changes the reward; :attr:`GradeResult.dropped_reasons`
   says what was dropped and why;
2. applies the rest with ``git apply`` (``patch --fuzz`` as a fallback, as the SWE-bench
   harness does); a diff that does not apply scores 0 and the reason says why;
3. applies ``test_patch``;
4. runs the test *files* of the listed tests, whole and in the project's collection order,
   as the official SWE-bench harness does (:func:`agentgym.plugins.swe.harness.plan`: the
   files of the ids and of the ``test_patch``, the repository's harness command, the
   images' ``testbed`` env activated), never a list of ids that would reorder the suite.
   The environment is the grader's: a HOME it made, no user site
   (``PYTHONNOUSERSITE``), no ``PYTHONSTARTUP`` or pytest options from anywhere else.
   When the command runs pytest itself (:func:`runs_pytest`), pytest runs with
   ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and the grader's own plugin
   (:mod:`agentgym.plugins.swe.pytest_report`, loaded with ``-p`` from a folder outside the
   repository, under a random name), which loads the environment's ``pytest11`` plugins
   itself, records each test's outcome from its call info, checks at the end that the
   code under test replaced none of pytest's internals nor added outcome hooks, and writes
   a report with a nonce to a random path. Output goes to a file in the sandbox so that
   no output limit cuts it; processes the tests left are killed before anything is read;
5. reads every listed test's status, for a pytest run from that report and only from it
   (rendered as ``-rA`` lines, :func:`report_log`, for the repository's parser, which
   spells ids as the datasets do), for other runners (Django's, SymPy's, ``tox``, a
   custom script) from the log with the repository's parser
   (:func:`~agentgym.plugins.swe.logs.log_parser_for`), and returns a :class:`GradeResult`:
   reward 1.0 iff every ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` test passed (``PASSED``, or
   ``XFAIL`` as in the official harness) and nothing was tampered with, else 0.0. A listed
   test the report (or log) does not name is :data:`MISSING`, and
   :attr:`GradeResult.missing` says why (:func:`missing_reasons`): the run timed out, its
   file failed to load (with the error line), pytest wrote no report (the session never
   finished: the code called ``os._exit``, crashed or was killed), the runner died or
   reported nothing, or its file ran without it.

A diff that changes no file of the agent's scores 0 without running anything:
``FAIL_TO_PASS`` tests fail at ``base_commit`` by definition.

The log parsers and their per-repository registry live in :mod:`agentgym.plugins.swe.logs`
and are re-exported here.

Limits: the tests run the agent's code in pytest's own process, and code can do anything
its process can. A printed summary, a patched ``TestReport`` or ``CallInfo``, a plugin
registered from package code, ``os._exit``, a forged report file without the nonce: each is
caught, and so is code compiled under the name of a file that does not hold it (pytest's
``runner.py``, a plugin's module: its bytecode is checked against the file's own). Code
written to defeat this grader in particular (reading the plugin's state out of
``sys.modules`` to forge its report) is not; nor, for a repository whose own code is the
test runner (pytest itself, SymPy's ``bin/test`` library, Django's runner), a change to
that runner. Runners other than pytest are read from their log (a printed line can pose
as a result there); so is Sphinx, whose harness runs pytest through ``tox``. Unlike the
official harness, a listed test that is skipped (or passes unexpectedly) does not count as
passed: a change that makes a failing test skip has not fixed it.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from agentgym.core.errors import AgentGymError
from agentgym.core.sandbox import Sandbox
from agentgym.plugins.swe.grader_files import SHADOWS, TEST_FILE, runner_script, task_owned
from agentgym.plugins.swe.harness import (
    DEFAULT_TEST_CMD,
    MAX_IDS_CHARS,
    PYTEST,
    Runner,
    TestPlan,
    plan,
)
from agentgym.plugins.swe.instance import SWEInstance, patch_files, split_patch
from agentgym.plugins.swe.logs import (
    ERROR,
    FAILED,
    LOG_PARSERS,
    PASSED,
    PASSING,
    SKIPPED,
    STATUSES,
    XFAIL,
    XPASS,
    LogParser,
    log_parser_for,
    parse_log_django,
    parse_log_pytest,
    parse_log_sympy,
    register_log_parser,
    split_node_id,
)

#: Status of a listed test that the log does not name; :attr:`GradeResult.missing` says why.
MISSING = "MISSING"
#: Characters of the end of the test log kept in :attr:`GradeResult.log_tail`.
LOG_TAIL_CHARS = 4000


class GradingError(AgentGymError):
    """The sandbox's workspace cannot be graded or diffed (no git repository, git failed)."""


# --- grading -----------------------------------------------------------------------------


@dataclass
class GradeResult:
    """The outcome of :func:`grade`.

    Attributes:
        reward: 1.0 iff every FAIL_TO_PASS and PASS_TO_PASS test passed, else 0.0.
        tests: every listed test (FAIL_TO_PASS, then PASS_TO_PASS) -> its status in the
            log, :data:`MISSING` when the log does not name it.
        f2p_passed, f2p_total: FAIL_TO_PASS tests that passed, and how many there are.
        p2p_passed, p2p_total: the same for PASS_TO_PASS.
        applied: the agent's (filtered) diff applied; False also when it was empty.
        dropped_files: files removed from the agent's diff before applying it: the tests,
            and the files that configure the test runner or the interpreter's start-up
            (:mod:`agentgym.plugins.swe.grader_files`).
        dropped_reasons: each dropped file -> why it is the task's (``test file``,
            ``test-runner configuration``, ``interpreter start-up hook``, ...).
        log_tail: the end of the test log (or of the failing ``git apply``'s output).
        reason: one sentence on why the reward is what it is.
        missing: every :data:`MISSING` test -> why (timed out, its file failed to load
            and the error line, the runner crashed or reported nothing, not collected).
        command: the test command that ran ("" when none did).
        exit_code: its exit status (None when it did not run).
        source: where the statuses came from: ``report`` (the grader's pytest plugin),
            ``log`` (the runner's output, for runners that are not pytest), "" (none ran).
        tampered: what the code under test changed in the test runner while it ran (the
            report plugin's check); non-empty means every test counts as failed.
    """

    reward: float
    tests: dict[str, str] = field(default_factory=dict)
    f2p_passed: int = 0
    f2p_total: int = 0
    p2p_passed: int = 0
    p2p_total: int = 0
    applied: bool = False
    dropped_files: list[str] = field(default_factory=list)
    dropped_reasons: dict[str, str] = field(default_factory=dict)
    log_tail: str = ""
    reason: str = ""
    missing: dict[str, str] = field(default_factory=dict)
    command: str = ""
    exit_code: int | None = None
    source: str = ""
    tampered: list[str] = field(default_factory=list)

    @property
    def resolved(self) -> bool:
        return self.reward == 1.0


def protected_files(instance: SWEInstance) -> set[str]:
    """Files that belong to the instance's tests: those its ``test_patch`` touches and
    those its test ids name (the part of a pytest node id before ``::``)."""
    files = set(patch_files(instance.test_patch))
    for test in instance.tests:
        if "::" in test:
            files.add(test.split("::", 1)[0])
    return files


def filter_diff(diff: str, protected: set[str]) -> tuple[str, list[str]]:
    """``diff`` without the parts that touch a file in ``protected`` or a path that is the
    task's (:func:`~agentgym.plugins.swe.grader_files.task_owned`); and the dropped
    paths."""
    kept, dropped = split_diff(diff, protected)
    return kept, list(dropped)


def split_diff(diff: str, protected: set[str], existing: set[str] | None = None,
               ) -> tuple[str, dict[str, str]]:
    """``diff`` without the parts that touch a file in ``protected`` (a test file) or a
    path that is the task's (:func:`~agentgym.plugins.swe.grader_files.task_owned`, with
    ``existing`` the entries of the import roots at the base); and each dropped path ->
    why. A part is dropped whole when either of its paths is the task's."""
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for part in split_patch(diff):
        new = part.old_path is None
        why = {p: TEST_FILE if p in protected else task_owned(p, new=new, existing=existing)
               for p in part.paths}
        if any(why.values()):
            for p in part.paths:
                dropped.setdefault(p, why[p] or next(w for w in why.values() if w))
        else:
            kept.append(part.text)
    text = "".join(kept)
    if text and not text.endswith("\n"):
        text += "\n"
    return text, dropped


def _exit_note(code: int) -> str:
    if code > 128:
        return f"exit status {code}: killed by signal {code - 128}" + (
            ", out of memory?" if code == 137 else "")
    return f"exit status {code}"


def _last_line(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(the log is empty)"


_UNCAUGHT = re.compile(r"^[\w.]+(Error|Exception|Interrupt|Exit)\b")


def _crash(log: str, exit_code: int) -> str | None:
    """How the runner died, when it did: killed by a signal, or an uncaught exception as
    the log's last line."""
    if exit_code > 128:
        return _exit_note(exit_code)
    last = _last_line(log)
    if exit_code != 0 and _UNCAUGHT.match(last):
        return f"{_exit_note(exit_code)}, uncaught {last}"
    return None


def missing_reasons(missing: list[str], statuses: dict[str, str], log: str, *,
                    test_plan: TestPlan, exit_code: int, timed_out: bool,
                    timeout: float, no_report: bool = False) -> dict[str, str]:
    """Why each test of ``missing`` is absent from the ``statuses`` (parsed from ``log``,
    or from the grader's pytest report).

    In order of precedence: the run timed out; the test's file (module) failed to load,
    with the error line; pytest wrote no report (``no_report``: its session never
    finished, say the code under test exited or crashed the process); the runner reported
    no test at all (it failed before running any, or crashed, with its exit status and
    the log's last line); the runner died before reporting the test (a signal, or an
    uncaught exception ending the log); the file ran but did not name the test (not
    collected: renamed, removed, or another parametrization).
    """
    if not missing:
        return {}
    runner: Runner = test_plan.runner
    errors = runner.load_errors(log)
    crash = _crash(log, exit_code)
    reasons: dict[str, str] = {}
    for test in missing:
        where = runner.locate(test)
        if where is None and len(test_plan.arguments) == 1:
            where = test_plan.arguments[0]  # the only file that ran holds it
        if timed_out:
            reasons[test] = (f"timed out: the run passed the {timeout:g}s timeout before"
                             " reporting it")
        elif where is not None and where in errors:
            reasons[test] = f"collection error in {where}: {errors[where] or 'failed to load'}"
        elif no_report:
            reasons[test] = (f"pytest wrote no report ({_exit_note(exit_code)}): its session"
                             f" never finished; the log ends: {_last_line(log)}")
        elif not statuses:
            reasons[test] = (f"the test runner reported no test ({_exit_note(exit_code)}):"
                             f" {_last_line(log)}")
        elif crash:
            reasons[test] = f"runner crashed ({crash}) before reporting it"
        elif where is not None and test_plan.arguments and not any(
                where == a or where.startswith(a + runner.separator)
                for a in test_plan.arguments):
            reasons[test] = f"not run: {where} is not among the files the command ran"
        else:
            loaded = (f"; files that failed to load: {', '.join(sorted(errors))}"
                      if errors and where is None else "")
            reasons[test] = (f"not collected: {where or 'the run'} ran, but the log does not"
                             f" name this test (renamed, removed, or another"
                             f" parametrization){loaded}")
    return reasons


def _tail(text: str, chars: int = LOG_TAIL_CHARS) -> str:
    return text if len(text) <= chars else "[...]\n" + text[-chars:]


def _encode(text: str) -> bytes:
    # diff_of decodes with surrogateescape so non-UTF-8 file content survives the round trip.
    return text.encode("utf-8", "surrogateescape")


async def _apply(box: Sandbox, root: str, patch_path: str, timeout: float) -> tuple[bool, str]:
    """Apply the patch at ``patch_path``; (applied, output of the attempts)."""
    quoted_root, quoted = shlex.quote(root), shlex.quote(patch_path)
    result = await box.exec(
        f"(cd {quoted_root} && git -c safe.directory='*' apply --verbose {quoted})", timeout)
    if result.ok:
        return True, result.output
    fallback = await box.exec(
        f"(cd {quoted_root} && command -v patch >/dev/null"
        f" && patch --batch --fuzz=5 -p1 --dry-run -i {quoted} >/dev/null"
        f" && patch --batch --fuzz=5 -p1 --no-backup-if-mismatch -i {quoted})", timeout)
    return fallback.ok, result.output + fallback.output


async def _tree_state(box: Sandbox, root: str, out: str, timeout: float) -> dict[str, str]:
    """Every entry of the checkout at ``root`` but directories and ``.git``: its path
    (relative to ``root``) -> type, inode, size, modification and change times, so that
    two states tell which paths a command created, changed or removed, whatever wrote
    them. Listed into ``out``, a file in the grader's scratch folder."""
    result = await box.exec(
        f"cd {shlex.quote(root)} && find . -path ./.git -prune -o ! -type d"
        f" -printf '%P\\0%y %i %s %T@ %C@\\0' > {shlex.quote(out)}", timeout)
    if not result.ok:
        raise GradingError(f"cannot list the grading checkout: {result.output.strip()[-300:]}")
    fields = (await box.read_file(out)).decode("utf-8", "surrogateescape").split("\0")
    return dict(zip(fields[0:-1:2], fields[1::2], strict=True))


async def _read(box: Sandbox, path: str) -> str | None:
    try:
        return (await box.read_file(path)).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


#: The grader's pytest plugin (copied into the sandbox as text; see its docstring).
REPORT_PLUGIN = Path(__file__).with_name("pytest_report.py")
_CONFIG_LINE = "CONFIG = {}  # AGENTGYM-CONFIG"
# A command that runs pytest itself (not through tox, whose environment is its own).
_PYTEST_COMMAND = re.compile(r"(?:^|[\s;&|(/])(?:py\.test|pytest)(?=[\s;&|)]|$)"
                             r"|-m\s+pytest\b")
_PYTHONPATH_WORD = re.compile(
    r"(?<![\w$])PYTHONPATH=(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s;&|)]*)")
# Variables that would let anything but the grader shape the interpreter or pytest.
_UNSET = ("PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTEST_ADDOPTS",
          "PYTEST_PLUGINS", "PYTHONBREAKPOINT")
# Kills every process the tests left (daemons included) but this script's own ancestors.
_KILL_LEFTOVERS = r"""
keep=" $$ "; p=$$
while [ "${p:-0}" -gt 1 ]; do
  ppid=0
  while read -r key value _; do [ "$key" = PPid: ] && ppid=$value; done < /proc/$p/status
  p=$ppid; keep="$keep$p "
done 2>/dev/null
for d in /proc/[0-9]*; do
  q=${d#/proc/}
  case "$keep" in *" $q "*) continue ;; esac
  kill -9 "$q" 2>/dev/null
done
true
"""


def runs_pytest(test_plan: TestPlan) -> bool:
    """Whether grading reads ``test_plan``'s outcomes from the grader's pytest report (the
    command runs pytest itself) rather than from the log (Django's and SymPy's runners,
    ``tox``, a custom script)."""
    return test_plan.runner is PYTEST and bool(_PYTEST_COMMAND.search(test_plan.command))


def _with_plugin_path(command: str, folder: str) -> str:
    """``command`` with ``folder`` appended to every ``PYTHONPATH=...`` it sets, so the
    grader's plugin stays importable whatever the task's command puts on the path."""
    quoted = shlex.quote(folder)
    return _PYTHONPATH_WORD.sub(
        lambda m: f"PYTHONPATH={m.group(1)}:{quoted}" if m.group(1) not in ("", '""', "''")
        else f"PYTHONPATH={quoted}", command)


def report_log(report: dict) -> str:
    """The grader's pytest report as ``-rA`` summary lines, for the repository's log parser
    (which spells the ids as the datasets do): setup errors and skips, the call's
    outcome, then teardown errors (a failure sticks)."""
    words = {"passed": PASSED, "failed": FAILED, "skipped": SKIPPED, "xfailed": XFAIL,
             "xpassed": XPASS, "error": ERROR}
    lines = ["=" * 20 + " short test summary info " + "=" * 20]
    for node, phases in report.get("tests", {}).items():
        if len(node.splitlines()) != 1:  # an id that breaks the line (a parametrize id the
            continue  # code under test spells) could write a line of its own: left missing
        setup, call, teardown = (phases.get(p) for p in ("setup", "call", "teardown"))
        if setup in ("error", "skipped"):
            lines.append(f"{words[setup]} {node}")
            continue
        if call in words:
            lines.append(f"{words[call]} {node}")
        if teardown == "error":
            lines.append(f"{ERROR} {node}")
    return "\n".join(lines) + "\n"


def _plugin_source(config: dict) -> str:
    source = REPORT_PLUGIN.read_text()
    if _CONFIG_LINE not in source:
        raise GradingError(f"{REPORT_PLUGIN} lost its {_CONFIG_LINE!r} line; restore it")
    return source.replace(_CONFIG_LINE, f"CONFIG = json.loads({json.dumps(config)!r})", 1)


async def _checkout_facts(box: Sandbox, timeout: float) -> tuple[str, set[str], list[str]]:
    """The repository root, the entries of its import roots (``name``, ``src/name``) and
    the packaging metadata folders inside it, at base_commit."""
    result = await box.exec(
        "root=$(git -c safe.directory='*' rev-parse --show-toplevel) || exit 3;"
        ' echo "$root"; cd "$root" || exit 3;'
        " for f in * .[!.]* src/* src/.[!.]*; do [ -e \"$f\" ] && echo \"E $f\"; done;"
        " find . -maxdepth 4 -name .git -prune -o \\( -name '*.dist-info' -o"
        " -name '*.egg-info' \\) -print -prune 2>/dev/null | sed 's/^/D /'; true", timeout)
    lines = result.output.splitlines()
    if result.exit_code == 3 or not lines:
        raise GradingError(
            f"the sandbox's working directory is not a git repository"
            f" ({result.output.strip()[-300:]}); open the grading sandbox on the task's"
            " repository at base_commit")
    root = lines[0].strip()
    existing = {line[2:] for line in lines[1:] if line.startswith("E ")}
    dists = [f"{root}/{line[2:].removeprefix('./')}" for line in lines[1:]
             if line.startswith("D ")]
    return root, existing, dists


async def grade(box: Sandbox, instance: SWEInstance, diff: str, *, test_cmd: str | None = None,
                timeout: float = 1800.0) -> GradeResult:
    """Grade ``diff`` for ``instance`` in ``box`` (see the module docstring).

    Args:
        box: a fresh sandbox whose working directory is the repository at ``base_commit``.
            Grading changes its workspace; use it for nothing else afterwards.
        instance: the task.
        diff: the agent's change, a unified diff against ``base_commit`` (:func:`diff_of`).
        test_cmd: the command that runs tests; the test files are appended, or fill
            ``{files}``, and ``{tests}`` takes the listed ids (see
            :func:`agentgym.plugins.swe.harness.plan`). Default: ``instance.test_cmd``,
            else the repository's harness command, else :data:`DEFAULT_TEST_CMD`.
        timeout: seconds the test command may run.

    Raises:
        GradingError: the working directory is not a git repository.
    """
    f2p, p2p = instance.FAIL_TO_PASS, instance.PASS_TO_PASS
    if not f2p:
        return GradeResult(0.0, p2p_total=len(p2p), reason=(
            f"instance {instance.instance_id!r} has no FAIL_TO_PASS tests, so nothing can"
            " show that a change fixes it"))
    test_plan = plan(instance, test_cmd)
    protected = protected_files(instance)
    script = runner_script(test_plan.command, test_plan.arguments)
    if script:
        protected.add(script)
    kept, dropped = split_diff(diff, protected)
    base = GradeResult(0.0, f2p_total=len(f2p), p2p_total=len(p2p))

    def empty() -> GradeResult:
        base.dropped_files, base.dropped_reasons = list(dropped), dict(dropped)
        base.reason = ("the diff changes no non-test file that is the agent's" + (
            f" (dropped, the task's: {', '.join(dropped)})" if dropped else ""))
        return base

    if not kept.strip() and SHADOWS not in dropped.values():
        return empty()
    root, existing, dists = await _checkout_facts(box, 60)
    kept, dropped = split_diff(diff, protected, existing)
    if not kept.strip():
        return empty()
    base.dropped_files, base.dropped_reasons = list(dropped), dict(dropped)

    # A random folder: code under test cannot guess where the report and the log go.
    scratch = f"/tmp/agentgym-grade-{secrets.token_hex(8)}"
    await box.write_file(f"{scratch}/agent.diff", _encode(kept))
    before = await _tree_state(box, root, f"{scratch}/before.tree", 120)
    applied, output = await _apply(box, root, f"{scratch}/agent.diff", 300)
    if not applied:
        base.reason = "the diff does not apply to base_commit (git apply and patch both failed)"
        base.log_tail = _tail(output)
        return base
    base.applied = True
    # What the diff changed, read from the checkout itself, not from the diff's text: a
    # file that a part the parser did not see (another diff format, say) created or
    # changed is judged by the same rules, and one that is the task's fails the grading.
    after = await _tree_state(box, root, f"{scratch}/after.tree", 120)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    named = set(patch_files(kept))
    unseen = {p: (TEST_FILE if p in protected
                  else task_owned(p, new=p not in before, existing=existing)
                  or "not named by the diff") for p in changed if p not in named}
    if unseen:
        shown = ", ".join(f"{p} ({why})" for p, why in list(unseen.items())[:5])
        base.reason = ("applying the diff changed files its parts do not name, so it is not"
                       f" graded: {shown}" + (f" and {len(unseen) - 5} more"
                                              if len(unseen) > 5 else ""))
        base.dropped_reasons = {**base.dropped_reasons, **unseen}
        base.dropped_files = list(base.dropped_reasons)
        base.log_tail = _tail(output)
        return base
    if instance.test_patch.strip():
        await box.write_file(f"{scratch}/test.diff", _encode(instance.test_patch))
        ok, output = await _apply(box, root, f"{scratch}/test.diff", 300)
        if not ok:
            base.reason = ("the instance's test_patch does not apply on top of the diff (a"
                           " broken instance, or the diff moved files the tests need)")
            base.log_tail = _tail(output)
            return base

    base.command = test_plan.command
    pytest_run = runs_pytest(test_plan)
    base.source = "report" if pytest_run else "log"
    log_path, setup_path = f"{scratch}/test.log", f"{scratch}/setup.log"
    home = f"{scratch}/home"
    report_path = f"{scratch}/out-{secrets.token_hex(8)}/report.json"
    command, setup_lines = test_plan.command, list(test_plan.setup)
    # The environment is the grader's: its own HOME, no user site, no start-up file, no
    # pytest options or plugins from anywhere but this script.
    env = [f"export HOME={shlex.quote(home)} PYTHONNOUSERSITE=1",
           f"unset {' '.join(_UNSET)}"]
    if pytest_run:
        module = f"agentgym_swe_report_{secrets.token_hex(6)}"
        loader = f"{module}_entry_points"
        folder = f"{scratch}/plugin-{secrets.token_hex(6)}"
        nonce = secrets.token_hex(16)
        await box.write_file(f"{folder}/{module}.py", _plugin_source({
            "report": report_path, "nonce": nonce, "root": root, "changed": changed, "dists": dists,
            "test_files": list(test_plan.arguments),
            "runner_root": f"{root}/src/_pytest" if instance.repo.lower() ==
            "pytest-dev/pytest" else ""}).encode())
        await box.write_file(f"{folder}/{loader}.py", (
            "import sys\n\n\ndef pytest_addhooks(pluginmanager):\n"
            f"    sys.modules[{module!r}].load_entry_points(pluginmanager)\n").encode())
        env += [f'export PYTHONPATH={shlex.quote(folder)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
                f"export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTEST_ADDOPTS='-p {module}"
                " -o enable_assertion_pass_hook=true'"
                f" PYTEST_PLUGINS={loader}"]
        command = _with_plugin_path(command, folder)
        setup_lines = [_with_plugin_path(line, folder) for line in setup_lines]
    # One shell: the setup's activation and exports hold for the tests; only the tests'
    # own output is parsed, and each part is a group so "a; b" is logged whole.
    setup = "\n".join([":", *setup_lines])  # ":" so the group is never empty
    await box.write_file(f"{scratch}/run_tests.sh", (
        f"mkdir -p -m 700 {shlex.quote(home)} {shlex.quote(str(Path(report_path).parent))}\n"
        + "\n".join(env) + "\n"
        f"cd {shlex.quote(root)}\n{{\n{setup}\n}} > {shlex.quote(setup_path)} 2>&1\n"
        f"cd {shlex.quote(root)}\n{{\n{command}\n}} > {shlex.quote(log_path)} 2>&1\n"
        "status=$?\n" + _KILL_LEFTOVERS + "exit $status\n").encode())
    run = await box.exec(f"bash {shlex.quote(scratch + '/run_tests.sh')}", timeout)
    log = await _read(box, log_path)
    if log is None:  # the script never got to the tests
        log = (await _read(box, setup_path) or "") + run.output
    report = None
    if pytest_run:
        report = _load_report(await _read(box, report_path), nonce)
        base.tampered = list(report.get("tampered", [])) if report else []
        statuses = log_parser_for(instance.repo)(report_log(report)) if report else {}
    else:
        statuses = log_parser_for(instance.repo)(log)

    tests = {t: statuses.get(t, MISSING) for t in instance.tests}
    if base.tampered:
        tests = dict.fromkeys(instance.tests, FAILED)
    base.tests = tests
    base.exit_code = run.exit_code
    base.missing = missing_reasons(
        [t for t in instance.tests if tests[t] == MISSING], statuses, log,
        test_plan=test_plan, exit_code=run.exit_code, timed_out=run.timed_out,
        timeout=timeout, no_report=pytest_run and report is None)
    base.f2p_passed = sum(tests[t] in PASSING for t in f2p)
    base.p2p_passed = sum(tests[t] in PASSING for t in p2p)
    base.log_tail = _tail(log) if log.strip() else _tail(
        await _read(box, setup_path) or run.output)
    if run.timed_out:
        base.reason = f"the tests ran past the {timeout:g}s timeout"
        return base
    if base.tampered:
        shown = "; ".join(base.tampered[:3]) + (
            f"; and {len(base.tampered) - 3} more" if len(base.tampered) > 3 else "")
        base.reason = (f"the code under test tampered with the test runner, so no test"
                       f" counts as passed: {shown}")
        return base
    failing = [f"{t} ({tests[t]})" for t in instance.tests if tests[t] not in PASSING]
    if failing:
        shown = ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5
                                          else "")
        base.reason = (f"{len(f2p) - base.f2p_passed}/{len(f2p)} FAIL_TO_PASS and"
                       f" {len(p2p) - base.p2p_passed}/{len(p2p)} PASS_TO_PASS tests did not"
                       f" pass: {shown}")
        if base.missing:
            first = next(iter(base.missing.items()))
            base.reason += f"; {first[0]} is MISSING: {first[1]}"
        return base
    base.reward = 1.0
    base.reason = (f"all {len(f2p)} FAIL_TO_PASS and {len(p2p)} PASS_TO_PASS tests passed")
    return base


def _load_report(text: str | None, nonce: str) -> dict | None:
    """The plugin's report, or None when it is absent, not a report (a run cut short), or
    not the plugin's (without this grading's ``nonce``: forged)."""
    if not text:
        return None
    try:
        report = json.loads(text)
    except ValueError:
        return None
    if (not isinstance(report, dict) or not isinstance(report.get("tests"), dict)
            or report.get("nonce") != nonce):
        return None
    return report


#: How git runs for the grader in a repository the agent had: no configuration but this
#: (the system's, the user's, the repository's own are not read where git would honour
#: them: see :func:`diff_of`), so no filter, textconv or external diff driver, no
#: fsmonitor, no hook, no alternate attributes or excludes file can run code or change
#: content.
_SAFE_GIT_ENV = (
    'for v in $(compgen -e | grep "^GIT_"); do unset "$v"; done;'
    ' export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1'
    ' GIT_NO_REPLACE_OBJECTS=1 GIT_TERMINAL_PROMPT=0 GIT_OPTIONAL_LOCKS=0'
    ' GIT_PAGER=cat PAGER=cat;')
_SAFE_GIT = ("git -c safe.directory='*' -c core.autocrlf=false -c core.safecrlf=false"
             " -c core.fsmonitor=false -c core.hooksPath=/dev/null"
             " -c core.attributesFile=/dev/null -c core.excludesFile=/dev/null"
             " -c core.untrackedCache=false -c core.splitIndex=false -c diff.external="
             " -c core.symlinks=true -c core.fileMode=true -c core.ignoreCase=false"
             " -c core.quotePath=false")
#: Attributes of the grader's own git dir, which win over the repository's
#: ``.gitattributes``: no filter, no end-of-line or encoding conversion, no ``ident``, no
#: diff driver; a file is staged as the bytes it holds.
_NO_ATTRIBUTES = "* !filter -text !eol -ident !working-tree-encoding !diff !merge\n"


async def diff_of(box: Sandbox, base: str = "HEAD", *, timeout: float = 120.0) -> str:
    """The change in ``box``'s git workspace since commit ``base``, as a unified diff.

    Everything counts: edits, new untracked files (``.gitignore``d ones excepted), deletions,
    and binary files (as ``git apply``-able binary patches); renames are written as a
    deletion and an addition so each path can be judged on its own. Pass the instance's
    ``base_commit`` as ``base`` if the agent may have committed. The text is decoded with
    ``surrogateescape`` (file content that is not UTF-8 survives :func:`grade`).

    Nothing of the agent's but its files and its object store is used: git runs with a
    git dir, index and configuration of the grader's own (the repository's objects as an
    alternate), every ``GIT_*`` variable unset and the system's and user's configuration
    off, so the repository's ``.git/config``, hooks, ``info/attributes`` and ``info/exclude``
    are not read and its ``.gitattributes`` are overridden: no filter, textconv, external
    diff or fsmonitor the agent configured runs, and no file is staged as other bytes than
    it holds. The diff is written to a folder this call makes (``mktemp``) and read only if
    it is a regular file. The agent's index and shell are left as they were. The caller
    runs this in a session the agent's commands no longer shape
    (:meth:`~agentgym.core.sandbox.Sandbox.fresh_session`): a function the agent defined
    in its shell would otherwise run in place of ``git``.

    Raises:
        GradingError: the workspace is not a git repository, or ``base`` is unknown.
    """
    git = _SAFE_GIT
    mine = f'{git} --git-dir="$s/repo/.git" --work-tree="$root"'
    script = (
        f"set -e; {_SAFE_GIT_ENV} umask 077; s=$(mktemp -d /tmp/agentgym-diff-XXXXXXXXXX);"
        ' echo "AGENTGYM-SCRATCH=$s";'
        f' root=$({git} rev-parse --show-toplevel); cd "$root";'
        f' objects=$(cd "$({git} rev-parse --git-path objects)" && pwd -P);'
        f" commit=$({git} rev-parse --verify --end-of-options {shlex.quote(base + '^{commit}')});"
        f' HOME="$s" XDG_CONFIG_HOME="$s" git init -q --template= "$s/repo";'
        ' mkdir -p "$s/repo/.git/objects/info" "$s/repo/.git/info";'
        ' printf "%s\n" "$objects" > "$s/repo/.git/objects/info/alternates";'
        f' printf {shlex.quote(_NO_ATTRIBUTES)} > "$s/repo/.git/info/attributes";'
        ' export GIT_INDEX_FILE="$s/index" HOME="$s" XDG_CONFIG_HOME="$s";'
        f' {mine} read-tree "$commit";'
        f" {mine} add -A;"
        f" {mine} diff --cached --binary --no-color --no-ext-diff --no-textconv"
        ' --no-renames "$commit" -- > "$s/out.diff";'
        ' [ -f "$s/out.diff" ] && [ ! -L "$s/out.diff" ]'
    )
    result = await box.exec(f"({script})", timeout)
    scratch = next((line.partition("=")[2].strip() for line in result.output.splitlines()
                    if line.startswith("AGENTGYM-SCRATCH=/tmp/agentgym-diff-")), None)
    try:
        if not result.ok or scratch is None:
            output = "\n".join(line for line in result.output.splitlines()
                               if not line.startswith("AGENTGYM-SCRATCH="))
            raise GradingError(
                f"cannot diff the workspace against {base!r}: {output.strip()[-500:]}"
                " (the workspace must be a git repository that has that commit)")
        data = await box.read_file(f"{scratch}/out.diff")
    finally:
        if scratch is not None:
            await box.exec(f"rm -rf {shlex.quote(scratch)}", timeout)
    return data.decode("utf-8", "surrogateescape")


__all__ = [
    "DEFAULT_TEST_CMD",
    "ERROR",
    "FAILED",
    "LOG_PARSERS",
    "LOG_TAIL_CHARS",
    "MAX_IDS_CHARS",
    "MISSING",
    "PASSED",
    "PASSING",
    "REPORT_PLUGIN",
    "SKIPPED",
    "STATUSES",
    "XFAIL",
    "XPASS",
    "GradeResult",
    "GradingError",
    "LogParser",
    "diff_of",
    "filter_diff",
    "grade",
    "log_parser_for",
    "missing_reasons",
    "parse_log_django",
    "parse_log_pytest",
    "parse_log_sympy",
    "protected_files",
    "register_log_parser",
    "report_log",
    "runs_pytest",
    "split_diff",
    "split_node_id",
]
