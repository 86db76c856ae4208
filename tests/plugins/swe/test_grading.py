"""Diff filtering, and grade / diff_of in real local sandboxes: scores, what a result
reports (missing tests and why), and grading a suite whose tests depend on their order."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.plugins.swe import grading
from agentgym.plugins.swe.grading import (
    FAILED,
    MISSING,
    PASSED,
    GradeResult,
    diff_of,
    filter_diff,
    grade,
    parse_log_pytest,
    protected_files,
)
from agentgym.plugins.swe.instance import SWEInstance

# --- diff filtering ----------------------------------------------------------------------


def _file_diff(path: str, old: str = "a\n", new: str = "b\n") -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n"
            f"-{old}+{new}")


def test_filter_diff_drops_every_kind_of_test_file(make_instance) -> None:
    instance = make_instance(
        test_patch=_file_diff("data/expected.json"),
        PASS_TO_PASS=["tests/test_ops.py::test_add", "checks/check_more.py::test_x"])
    protected = protected_files(instance)
    assert protected == {"data/expected.json", "tests/test_ops.py", "checks/check_more.py"}
    diff = "".join(_file_diff(p) for p in (
        "calc/ops.py", "tests/test_ops.py", "data/expected.json", "checks/check_more.py",
        "conftest.py", "calc/helpers_test.py", "README.md"))
    kept, dropped = filter_diff(diff, protected)
    assert dropped == ["tests/test_ops.py", "data/expected.json", "checks/check_more.py",
                       "conftest.py", "calc/helpers_test.py"]
    assert kept == _file_diff("calc/ops.py") + _file_diff("README.md")


# --- grade and diff_of in local sandboxes -------------------------------------------------


def _local_sandbox_missing() -> str | None:
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() != 0:
        return "the local sandbox needs root"
    return None


needs_sandbox = pytest.mark.skipif(
    _local_sandbox_missing() is not None,
    reason=f"local sandbox unavailable: {_local_sandbox_missing()}")

OPS = """\
def add(a, b):
    return a + b


def clamp(x, lo, hi):
    return max(lo, min(x, lo))
"""
TESTS = """\
from calc.ops import add


def test_add():
    assert add(2, 3) == 5


def test_add_neg():
    assert add(-1, 1) == 0
"""
NEW_TEST = """

def test_clamp():
    from calc.ops import clamp
    assert (clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3)) == (3, 0, 2)
"""
# A stand-in for `pytest -rA` (pytest is not installed inside sandboxes): runs the named
# test functions, or every test function of a named file in file order, and prints
# pytest's short summary.
RUNNER = """\
import importlib.util, os, sys

sys.path.insert(0, os.getcwd())
modules, results = {}, []
for arg in sys.argv[1:]:
    path, _, name = arg.partition("::")
    if path not in modules:
        spec = importlib.util.spec_from_file_location(path[:-3].replace("/", "."), path)
        modules[path] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[path])
    names = [name] if name else [n for n in vars(modules[path]) if n.startswith("test_")]
    for name in names:
        node = f"{path}::{name}"
        try:
            getattr(modules[path], name)()
            results.append(f"PASSED {node}")
        except Exception as e:
            results.append(f"FAILED {node} - {type(e).__name__}: {e}")
print("=" * 20, "short test summary info", "=" * 20)
print("\\n".join(results))
sys.exit(any(not r.startswith("PASSED") for r in results))
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, files: dict[str, str]) -> str:
    """A new git repository at ``repo`` holding ``files`` in one commit; its hash."""
    for path, content in {**files, ".gitignore": "__pycache__/\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    return _git(repo, "rev-parse", "HEAD").strip()


def _diff(repo: Path, changes: dict[str, str | None]) -> str:
    """The git diff that makes ``changes`` (path -> content, None deletes) to ``repo``."""
    for path, content in changes.items():
        if content is None:
            (repo / path).unlink()
        else:
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(content)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    _git(repo, "clean", "-qfd")
    return diff


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SWEInstance]:
    """A git repository with a bug in ``clamp`` and the instance that fixes it."""
    repo = tmp_path_factory.mktemp("swe-grading") / "repo"
    base = _commit(repo, {"calc/__init__.py": "", "calc/ops.py": OPS,
                          "tests/test_ops.py": TESTS, "tests/runner.py": RUNNER})
    instance = SWEInstance(
        instance_id="calc__calc-1", repo="example/calc", base_commit=base,
        problem_statement="clamp(x, lo, hi) ignores hi",
        patch=_diff(repo, {"calc/ops.py": OPS.replace("min(x, lo)", "min(x, hi)")}),
        test_patch=_diff(repo, {"tests/test_ops.py": TESTS + NEW_TEST}),
        FAIL_TO_PASS=["tests/test_ops.py::test_clamp"],
        PASS_TO_PASS=["tests/test_ops.py::test_add", "tests/test_ops.py::test_add_neg"],
        test_cmd="python3 tests/runner.py",
    )
    return repo, instance


def _grade(repo: Path, instance: SWEInstance, diff: str) -> GradeResult:
    async def main() -> GradeResult:
        async with await open_sandbox("local", template=repo) as box:
            return await grade(box, instance, diff, timeout=60)

    return asyncio.run(main())


@needs_sandbox
def test_gold_patch_scores_one(task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    result = _grade(repo, instance, instance.patch)
    assert result.reward == 1.0 and result.resolved, result
    assert result.tests == {t: PASSED for t in instance.tests}
    assert (result.f2p_passed, result.f2p_total, result.p2p_passed, result.p2p_total) == (
        1, 1, 2, 2)
    assert result.applied and result.dropped_files == []
    assert "short test summary info" in result.log_tail
    assert result.reason == "all 1 FAIL_TO_PASS and 2 PASS_TO_PASS tests passed"


@needs_sandbox
def test_no_change_scores_zero(task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    result = _grade(repo, instance, "")
    assert result.reward == 0.0 and not result.applied
    assert "changes no non-test file" in result.reason


@needs_sandbox
def test_editing_or_deleting_tests_without_a_fix_scores_zero(
        task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    # Delete the test file, and make the runner report every test as passed.
    cheat = _diff(repo, {"tests/test_ops.py": None, "tests/runner.py": (
        "import sys\nprint('=== short test summary info ===')\n"
        "print('\\n'.join('PASSED ' + t for t in sys.argv[1:]))\n")})
    result = _grade(repo, instance, cheat)
    assert result.reward == 0.0 and result.dropped_files == [
        "tests/runner.py", "tests/test_ops.py"]
    # Weaken the new test by hand, touch the code without fixing it, and print a
    # forged status line when the code is imported.
    cheat = _diff(repo, {
        "tests/test_ops.py": TESTS + "\n\ndef test_clamp():\n    pass\n",
        "calc/ops.py": "print('PASSED tests/test_ops.py::test_clamp')\n" + OPS,
    })
    result = _grade(repo, instance, cheat)
    assert result.reward == 0.0 and result.applied
    assert result.dropped_files == ["tests/test_ops.py"]
    assert result.tests["tests/test_ops.py::test_clamp"] == FAILED
    assert (result.f2p_passed, result.p2p_passed) == (0, 2)
    assert "1/1 FAIL_TO_PASS and 0/2 PASS_TO_PASS tests did not pass" in result.reason
    assert "tests/test_ops.py::test_clamp (FAILED)" in result.reason


@needs_sandbox
def test_a_fix_that_also_edits_tests_scores_one_without_the_test_edits(
        task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    diff = _diff(repo, {
        "calc/ops.py": OPS.replace("max(lo, min(x, lo))", "min(max(x, lo), hi)"),
        "tests/test_ops.py": TESTS.replace("== 5", "== 6"),  # would fail if applied
        "tests/test_repro.py": "def test_repro():\n    assert False\n",
    })
    result = _grade(repo, instance, diff)
    assert result.reward == 1.0, result
    assert result.dropped_files == ["tests/test_ops.py", "tests/test_repro.py"]


@needs_sandbox
def test_a_diff_that_does_not_apply_scores_zero_with_the_reason(
        task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    stale = _file_diff("calc/ops.py", old="def nothing_like_this():\n", new="pass\n")
    result = _grade(repo, instance, stale)
    assert result.reward == 0.0 and not result.applied and result.tests == {}
    assert "does not apply" in result.reason
    assert "calc/ops.py" in result.log_tail


@needs_sandbox
def test_missing_tests_are_reported(task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task
    quiet = SWEInstance(**{**instance.__dict__, "test_cmd": "true"})
    result = _grade(repo, quiet, instance.patch)
    assert result.reward == 0.0 and set(result.tests.values()) == {MISSING}
    assert result.command == "true tests/test_ops.py" and result.exit_code == 0
    assert set(result.missing) == set(instance.tests)
    assert all(reason.startswith("the test runner reported no test (exit status 0)")
               for reason in result.missing.values()), result.missing
    assert "is MISSING: the test runner reported no test" in result.reason


@needs_sandbox
def test_a_test_run_past_the_timeout_scores_zero(task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task

    async def main() -> GradeResult:
        async with await open_sandbox("local", template=repo) as box:
            return await grade(box, instance, instance.patch, test_cmd="sleep 30;", timeout=1)

    result = asyncio.run(main())
    assert result.reward == 0.0 and result.applied and "past the 1s timeout" in result.reason
    assert result.missing == {t: "timed out: the run passed the 1s timeout before reporting it"
                              for t in instance.tests}


@needs_sandbox
def test_diff_of_captures_the_agents_work_and_grades_it(
        task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task

    async def main() -> tuple[str, str, GradeResult]:
        async with await open_sandbox("local", template=repo) as box:
            for command in (
                "sed -i 's/min(x, lo)/min(x, hi)/' calc/ops.py",
                "printf 'NOTE = 1\\n' > calc/notes.py",
                "printf '\\x00\\x01\\xff\\xfe' > calc/blob.bin",
                "printf 'caf\\xe9 = 1\\n' > calc/latin1.py",  # not UTF-8
                "git rm -q --cached calc/__init__.py && rm calc/__init__.py",
                "python3 tests/runner.py tests/test_ops.py::test_add >/dev/null",
                "mkdir -p sub && cd sub",
            ):
                assert (await box.exec(command)).ok, command
            diff = await diff_of(box, instance.base_commit)
            status = (await box.exec("pwd; git status --porcelain")).output
        async with await open_sandbox("local", template=repo) as fresh:
            result = await grade(fresh, instance, diff, timeout=60)
            latin1 = await fresh.read_file("calc/latin1.py")
        assert latin1 == b"caf\xe9 = 1\n"
        return diff, status, result

    diff, status, result = asyncio.run(main())
    assert "calc/notes.py" in diff and "GIT binary patch" in diff
    assert "deleted file mode" in diff and "__pycache__" not in diff
    # The agent's shell stays where it was, and its index is untouched.
    assert status.startswith("/workspace/sub\n") and "?? calc/notes.py" in status
    assert result.reward == 1.0, result


@needs_sandbox
def test_a_file_the_diff_parser_does_not_see_fails_the_grading(
        task: tuple[Path, SWEInstance]) -> None:
    """A part git apply refuses but patch --fuzz applies, then a context-format diff that
    creates conftest.py: the parser of unified diffs does not see it, the checkout does."""
    repo, instance = task
    fuzzy = ("diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
             "@@ -5,2 +5,2 @@\n def clamp(x, low, high):\n-    return max(lo, min(x, lo))\n"
             "+    return max(lo, min(x, hi))\n")
    smuggled = ("*** a/conftest.py\t2020-01-01 00:00:00\n--- b/conftest.py\t2020-01-01"
                " 00:00:00\n***************\n*** 0 ****\n--- 1,1 ----\n+ SMUGGLED = 1\n")
    result = _grade(repo, instance, fuzzy + smuggled)
    assert result.reward == 0.0, result
    assert result.dropped_reasons.get("conftest.py") == "test file", result
    assert "conftest.py" in result.reason
    # the same fuzzy part alone is graded (patch's fallback still works)
    assert _grade(repo, instance, fuzzy).reward == 1.0


@needs_sandbox
def test_diff_of_runs_no_git_configuration_of_the_agents(
        task: tuple[Path, SWEInstance], tmp_path: Path) -> None:
    """Filter, fsmonitor and external diff drivers the agent configured (in .git/config,
    ~/.gitconfig, .git/info/attributes, .gitattributes) neither run nor change the diff."""
    repo, instance = task
    marker = "/tmp/agentgym-test-driver-ran"

    async def main() -> tuple[str, str]:
        async with await open_sandbox("local", template=repo) as box:
            for command in (
                f"printf '#!/bin/sh\\ntouch {marker}\\necho FORGED\\n' > /tmp/drv.sh",
                "chmod +x /tmp/drv.sh",
                "git config filter.x.clean /tmp/drv.sh",
                "git config --global filter.x.clean /tmp/drv.sh",
                "git config core.fsmonitor /tmp/drv.sh",
                "git config diff.external /tmp/drv.sh",
                "git config diff.x.textconv /tmp/drv.sh",
                "echo '* filter=x diff=x' >> .git/info/attributes",
                "printf '* filter=x diff=x text eol=crlf ident\\n' > .gitattributes",
                "sed -i 's/min(x, lo)/min(x, hi)/' calc/ops.py",
                "printf 'NOTE = 1  # $Id$\\n' > calc/notes.py",
            ):
                assert (await box.exec(command)).ok, command
            diff = await diff_of(box, instance.base_commit)
            ran = (await box.exec(f"ls {marker} 2>&1; true")).output
        return diff, ran

    diff, ran = asyncio.run(main())
    assert "No such file" in ran, ran
    assert "FORGED" not in diff and "\r" not in diff
    assert "+    return max(lo, min(x, hi))\n" in diff
    assert "+NOTE = 1  # $Id$\n" in diff


@needs_sandbox
def test_diff_of_outside_a_repository_raises(tmp_path: Path) -> None:
    async def main() -> None:
        async with await open_sandbox("local", template=tmp_path) as box:
            await diff_of(box)

    with pytest.raises(grading.GradingError, match="git repository"):
        asyncio.run(main())


def test_runner_stand_in_matches_the_pytest_parser() -> None:
    out = "==================== short test summary info ====================\n" + textwrap.dedent(
        """\
        PASSED tests/test_ops.py::test_add
        FAILED tests/test_ops.py::test_clamp - AssertionError: \n""")
    assert parse_log_pytest(out) == {"tests/test_ops.py::test_add": PASSED,
                                     "tests/test_ops.py::test_clamp": FAILED}


# --- a suite whose tests depend on their order, with the real pytest -----------------------

REGISTRY = """\
_ITEMS = {}


def register(name, value):
    _ITEMS[name] = value


def count():
    return len(_ITEMS)


def lookup(name):
    return _ITEMS.get(name.strip() + "_")
"""
# test B needs state that test A, earlier in the project's order, sets: once from an
# earlier file, once from earlier in the same file
SETUP_TESTS = """\
from pkg import registry


def test_register():
    registry.register("answer", 42)
    assert registry.count() >= 1
"""
USE_TESTS = """\
from pkg import registry


def test_configure():
    registry.register("mode", "fast")


def test_mode_after_configure():
    assert registry.lookup("mode") == "fast"


def test_lookup_registered():
    assert registry.lookup("answer") == 42
"""


@pytest.fixture(scope="module")
def pytest_env() -> dict[str, str]:
    """Mounts that give the local sandbox a real pytest: a swe-synth project's test env
    (built once and cached; the first run downloads toolz from PyPI)."""
    from agentgym.plugins.swe import repo

    try:
        return repo.prepare("toolz", "1.2.0").mounts
    except Exception as e:
        pytest.skip(f"cannot build a test env with pytest here (PyPI unreachable?): {e}")


@pytest.fixture(scope="module")
def ordered_task(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SWEInstance]:
    """A repository whose FAIL_TO_PASS tests pass only after PASS_TO_PASS tests that come
    earlier in the suite; the instance lists them FAIL_TO_PASS first, as datasets do."""
    from agentgym.plugins.swe.repo import ENV_PYTHON

    repo = tmp_path_factory.mktemp("swe-ordered") / "repo"
    base = _commit(repo, {"pkg/__init__.py": "", "pkg/registry.py": REGISTRY,
                          "tests/test_a_setup.py": SETUP_TESTS,
                          "tests/test_b_use.py": USE_TESTS})
    instance = SWEInstance(
        instance_id="pkg__pkg-2", repo="example/pkg", base_commit=base,
        problem_statement="lookup never finds a registered name",
        patch=_diff(repo, {"pkg/registry.py": REGISTRY.replace(
            'name.strip() + "_"', "name")}),
        FAIL_TO_PASS=["tests/test_b_use.py::test_lookup_registered",
                      "tests/test_b_use.py::test_mode_after_configure"],
        PASS_TO_PASS=["tests/test_a_setup.py::test_register",
                      "tests/test_b_use.py::test_configure"],
        # what `agentgym swe synth` writes: the project's env, the checkout importable
        test_cmd=f'PYTHONPATH="$PWD" {ENV_PYTHON} -m pytest -rA -p no:cacheprovider',
    )
    return repo, instance


def _grade_with(repo: Path, instance: SWEInstance, diff: str, mounts: dict[str, str],
                **options: object) -> GradeResult:
    async def main() -> GradeResult:
        async with await open_sandbox("local", template=repo, mounts=mounts) as box:
            return await grade(box, instance, diff, timeout=120, **options)  # type: ignore[arg-type]

    return asyncio.run(main())


@needs_sandbox
def test_order_dependent_suite_grades_in_the_projects_order(
        ordered_task: tuple[Path, SWEInstance], pytest_env: dict[str, str]) -> None:
    repo, instance = ordered_task
    result = _grade_with(repo, instance, instance.patch, pytest_env)
    assert result.reward == 1.0, (result.reason, result.log_tail)
    assert result.command.endswith(" tests/test_a_setup.py tests/test_b_use.py")
    assert result.tests == {t: PASSED for t in instance.tests} and result.missing == {}
    # Running the listed ids, FAIL_TO_PASS first, fails the very same gold patch: the
    # suite is order-dependent, so the test above can tell the two ways apart.
    by_ids = _grade_with(repo, instance, instance.patch, pytest_env,
                         test_cmd=instance.test_cmd + " {tests}")
    assert by_ids.reward == 0.0
    assert by_ids.tests["tests/test_b_use.py::test_lookup_registered"] == FAILED
    # and doing nothing fails in the project's order too
    assert _grade_with(repo, instance, "", pytest_env).reward == 0.0


@needs_sandbox
def test_missing_tests_say_why(ordered_task: tuple[Path, SWEInstance],
                               pytest_env: dict[str, str]) -> None:
    repo, instance = ordered_task
    # A change that breaks the import of the tests' module: every test file fails to load.
    broken = _diff(repo, {"pkg/registry.py": REGISTRY + "\ndef broken(:\n"})
    result = _grade_with(repo, instance, broken, pytest_env)
    assert result.reward == 0.0 and set(result.tests.values()) == {MISSING}
    for test, reason in result.missing.items():
        file = test.split("::")[0]
        assert reason.startswith(f"collection error in {file}: "), reason
        assert "SyntaxError" in reason, reason
    # A listed test the suite does not have is not collected; the others pass.
    renamed = SWEInstance(**{**instance.__dict__, "PASS_TO_PASS": [
        *instance.PASS_TO_PASS, "tests/test_b_use.py::test_renamed_away"]})
    result = _grade_with(repo, renamed, instance.patch, pytest_env)
    assert result.reward == 0.0
    assert result.tests["tests/test_b_use.py::test_renamed_away"] == MISSING
    assert result.missing == {"tests/test_b_use.py::test_renamed_away": (
        "not collected: tests/test_b_use.py ran, but the log does not name this test"
        " (renamed, removed, or another parametrization)")}
