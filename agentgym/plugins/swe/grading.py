"""Grading a SWE task: apply the agent's change to a fresh checkout, run the tests, score.

:func:`grade` takes a FRESH :class:`~agentgym.core.sandbox.Sandbox` whose working
directory is the task's git repository at ``base_commit``, the :class:`SWEInstance`, and
the agent's diff (from :func:`diff_of` on the agent's own sandbox). It

1. drops from the diff every file that belongs to the tests: files the ``test_patch``
   touches, files named by ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` ids, and paths
   :func:`is_test_path` matches. Editing, adding or deleting tests therefore never changes
   the reward; the dropped files are reported;
2. applies the rest with ``git apply`` (``patch --fuzz`` as a fallback, as the SWE-bench
   harness does); a diff that does not apply scores 0 and the reason says why;
3. applies ``test_patch``;
4. runs the test *files* of the listed tests, whole and in the project's collection order,
   as the official SWE-bench harness does (:func:`agentgym.plugins.swe.harness.plan`: the
   files of the ids and of the ``test_patch``, the repository's harness command, the
   images' ``testbed`` env activated), never a list of ids that would reorder the suite.
   The output goes to a file in the sandbox so that no output limit cuts it;
5. reads every listed test's status from the log with the repository's parser
   (:func:`~agentgym.plugins.swe.logs.log_parser_for`) and returns a
   :class:`GradeResult`: reward 1.0 iff every ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` test
   passed (``PASSED``, or ``XFAIL`` as in the official harness), else 0.0. A listed test
   the log does not name is :data:`MISSING`, and :attr:`GradeResult.missing` says why
   (:func:`missing_reasons`): the run timed out, its file failed to load (with the error
   line), the runner died or reported nothing, or its file ran without it.

A diff that changes no non-test file scores 0 without running anything: ``FAIL_TO_PASS``
tests fail at ``base_commit`` by definition.

The log parsers and their per-repository registry live in :mod:`agentgym.plugins.swe.logs`
and are re-exported here.

Limits: the tests run the agent's code, and code can do anything its process can,
including printing lines that look like test results. The pytest parser trusts only the
last "short test summary info" section when there is one, which defeats a stray print, not
a determined forger; grading is as trustworthy as the sandbox it runs in is fresh. Unlike
the official harness, a listed test that is skipped (or passes unexpectedly) does not count
as passed: a change that makes a failing test skip has not fixed it.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass, field

from agentgym.core.errors import AgentGymError
from agentgym.core.sandbox import Sandbox
from agentgym.plugins.swe.harness import DEFAULT_TEST_CMD, MAX_IDS_CHARS, Runner, TestPlan, plan
from agentgym.plugins.swe.instance import SWEInstance, is_test_path, patch_files, split_patch
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
        dropped_files: test files removed from the agent's diff before applying it.
        log_tail: the end of the test log (or of the failing ``git apply``'s output).
        reason: one sentence on why the reward is what it is.
        missing: every :data:`MISSING` test -> why (timed out, its file failed to load
            and the error line, the runner crashed or reported nothing, not collected).
        command: the test command that ran ("" when none did).
        exit_code: its exit status (None when it did not run).
    """

    reward: float
    tests: dict[str, str] = field(default_factory=dict)
    f2p_passed: int = 0
    f2p_total: int = 0
    p2p_passed: int = 0
    p2p_total: int = 0
    applied: bool = False
    dropped_files: list[str] = field(default_factory=list)
    log_tail: str = ""
    reason: str = ""
    missing: dict[str, str] = field(default_factory=dict)
    command: str = ""
    exit_code: int | None = None

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
    """``diff`` without the parts that touch a file in ``protected`` or a path that
    :func:`is_test_path` matches; and the dropped paths."""
    kept: list[str] = []
    dropped: list[str] = []
    for part in split_patch(diff):
        if any(p in protected or is_test_path(p) for p in part.paths):
            dropped += [p for p in part.paths if p not in dropped]
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
                    timeout: float) -> dict[str, str]:
    """Why each test of ``missing`` is absent from the parsed ``statuses`` of ``log``.

    In order of precedence: the run timed out; the test's file (module) failed to load,
    with the error line; the runner reported no test at all (it failed before running
    any, or crashed, with its exit status and the log's last line); the runner died
    before reporting the test (a signal, or an uncaught exception ending the log); the
    file ran but did not name the test (not collected: renamed, removed, or another
    parametrization).
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


async def _read(box: Sandbox, path: str) -> str | None:
    try:
        return (await box.read_file(path)).decode("utf-8", "replace")
    except FileNotFoundError:
        return None


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
    kept, dropped = filter_diff(diff, protected_files(instance))
    base = GradeResult(0.0, f2p_total=len(f2p), p2p_total=len(p2p), dropped_files=dropped)
    if not kept.strip():
        base.reason = ("the diff changes no non-test file" + (
            f" (test files dropped: {', '.join(dropped)})" if dropped else ""))
        return base

    top = await box.exec("git -c safe.directory='*' rev-parse --show-toplevel", 60)
    if not top.ok:
        raise GradingError(
            f"cannot grade {instance.instance_id!r}: the sandbox's working directory is not a"
            f" git repository ({top.output.strip()}); open the grading sandbox on the task's"
            " repository at base_commit")
    root = top.output.strip().splitlines()[-1]
    # A random folder: code under test cannot guess where the log goes.
    scratch = f"/tmp/agentgym-grade-{secrets.token_hex(8)}"
    await box.write_file(f"{scratch}/agent.diff", _encode(kept))
    applied, output = await _apply(box, root, f"{scratch}/agent.diff", 300)
    if not applied:
        base.reason = "the diff does not apply to base_commit (git apply and patch both failed)"
        base.log_tail = _tail(output)
        return base
    base.applied = True
    if instance.test_patch.strip():
        await box.write_file(f"{scratch}/test.diff", _encode(instance.test_patch))
        ok, output = await _apply(box, root, f"{scratch}/test.diff", 300)
        if not ok:
            base.reason = ("the instance's test_patch does not apply on top of the diff (a"
                           " broken instance, or the diff moved files the tests need)")
            base.log_tail = _tail(output)
            return base

    test_plan = plan(instance, test_cmd)
    base.command = test_plan.command
    log_path, setup_path = f"{scratch}/test.log", f"{scratch}/setup.log"
    # One shell: the setup's activation and exports hold for the tests; only the tests'
    # own output is parsed, and each part is a group so "a; b" is logged whole.
    setup = "\n".join([":", *test_plan.setup])  # ":" so the group is never empty
    await box.write_file(f"{scratch}/run_tests.sh", (
        f"cd {shlex.quote(root)}\n{{\n{setup}\n}} > {shlex.quote(setup_path)} 2>&1\n"
        f"cd {shlex.quote(root)}\n{{\n{test_plan.command}\n}} > {shlex.quote(log_path)}"
        " 2>&1\n").encode())
    run = await box.exec(f"bash {shlex.quote(scratch + '/run_tests.sh')}", timeout)
    log = await _read(box, log_path)
    if log is None:  # the script never got to the tests
        log = (await _read(box, setup_path) or "") + run.output
    statuses = log_parser_for(instance.repo)(log)

    tests = {t: statuses.get(t, MISSING) for t in instance.tests}
    base.tests = tests
    base.exit_code = run.exit_code
    base.missing = missing_reasons(
        [t for t in instance.tests if tests[t] == MISSING], statuses, log,
        test_plan=test_plan, exit_code=run.exit_code, timed_out=run.timed_out,
        timeout=timeout)
    base.f2p_passed = sum(tests[t] in PASSING for t in f2p)
    base.p2p_passed = sum(tests[t] in PASSING for t in p2p)
    base.log_tail = _tail(log) if log.strip() else _tail(
        await _read(box, setup_path) or run.output)
    if run.timed_out:
        base.reason = f"the tests ran past the {timeout:g}s timeout"
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


async def diff_of(box: Sandbox, base: str = "HEAD", *, timeout: float = 120.0) -> str:
    """The change in ``box``'s git workspace since commit ``base``, as a unified diff.

    Everything counts: edits, new untracked files (``.gitignore``d ones excepted), deletions,
    and binary files (as ``git apply``-able binary patches); renames are written as a
    deletion and an addition so each path can be judged on its own. A throw-away index is
    used, so the agent's own index (and its ``cd``) is left as it was. Pass the instance's
    ``base_commit`` as ``base`` if the agent may have committed. The text is decoded with
    ``surrogateescape`` (file content that is not UTF-8 survives :func:`grade`).

    Raises:
        GradingError: the workspace is not a git repository, or ``base`` is unknown.
    """
    scratch = f"/tmp/agentgym-diff-{secrets.token_hex(8)}"
    git = "git -c safe.directory='*' -c core.autocrlf=false"
    script = (
        f"set -e; mkdir -p {scratch}; cd \"$({git} rev-parse --show-toplevel)\";"
        f" cp \"$({git} rev-parse --git-path index)\" {scratch}/index 2>/dev/null || true;"
        f" export GIT_INDEX_FILE={scratch}/index;"
        f" {git} add -A;"
        f" {git} diff --cached --binary --no-color --no-ext-diff --no-textconv"
        " --no-renames"
        f" {shlex.quote(base)} -- > {scratch}/diff"
    )
    result = await box.exec(f"({script})", timeout)
    if not result.ok:
        raise GradingError(
            f"cannot diff the workspace against {base!r}: {result.output.strip()[-500:]}"
            " (the workspace must be a git repository that has that commit)")
    data = await box.read_file(f"{scratch}/diff")
    await box.exec(f"rm -rf {scratch}", timeout)
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
    "split_node_id",
]
