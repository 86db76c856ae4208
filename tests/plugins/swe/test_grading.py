"""Log parsers, diff filtering, and grade / diff_of in real local sandboxes."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from agentgym.core.errors import AgentGymError
from agentgym.core.registry import open_sandbox
from agentgym.plugins.swe import grading
from agentgym.plugins.swe.grading import (
    ERROR,
    FAILED,
    MISSING,
    PASSED,
    XFAIL,
    XPASS,
    GradeResult,
    diff_of,
    filter_diff,
    grade,
    log_parser_for,
    parse_log_django,
    parse_log_pytest,
    parse_log_sympy,
    protected_files,
    register_log_parser,
    split_node_id,
)
from agentgym.plugins.swe.instance import SWEInstance

# --- parsers -----------------------------------------------------------------------------

PYTEST_RA_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-8.3.3, pluggy-1.5.0
rootdir: /testbed
configfile: setup.cfg
collected 9 items / 1 error

tests/test_core.py ..FEsxX.E                                             [100%]

==================================== ERRORS ====================================
_____________________ ERROR at setup of test_fixture_err _______________________
E   RuntimeError: boom
=================================== FAILURES ===================================
______________________________ test_parse[a - b] _______________________________

    def test_parse(pair):
>       assert 1 == 2
E       assert 1 == 2

tests/test_core.py:12: AssertionError
----------------------------- Captured stdout call -----------------------------
PASSED tests/test_core.py::test_parse[a - b]
==================================== PASSES ====================================
___________________________________ test_ok ____________________________________
----------------------------- Captured stdout call -----------------------------
FAILED tests/test_core.py::test_ok - printed by the test itself
=========================== short test summary info ============================
PASSED tests/test_core.py::test_ok
PASSED tests/test_core.py::TestThing::test_method[x y-[nested]]
PASSED tests/test_core.py::test_teardown
FAILED tests/test_core.py::test_parse[a - b] - assert 1 == 2
ERROR tests/test_core.py::test_fixture_err - RuntimeError: boom
SKIPPED [1] tests/test_core.py:30: needs network
XFAIL tests/test_core.py::test_xfail - known bug
XPASS tests/test_core.py::test_xpass - fixed upstream?
ERROR tests/test_broken.py - ImportError: cannot import name 'x' from 'pkg'
ERROR tests/test_core.py::test_teardown - OSError: teardown failed
===== 1 failed, 3 passed, 1 skipped, 1 xfailed, 1 xpassed, 3 errors in 0.12s =====
"""


def test_pytest_parser_reads_the_ra_summary() -> None:
    assert parse_log_pytest(PYTEST_RA_LOG) == {
        "tests/test_core.py::test_ok": PASSED,
        "tests/test_core.py::TestThing::test_method[x y-[nested]]": PASSED,
        "tests/test_core.py::test_parse[a - b]": FAILED,
        "tests/test_core.py::test_fixture_err": ERROR,
        "tests/test_core.py::test_xfail": XFAIL,
        "tests/test_core.py::test_xpass": XPASS,
        "tests/test_broken.py": ERROR,
        # passed its call, then its teardown failed: the failure sticks
        "tests/test_core.py::test_teardown": ERROR,
    }


def test_pytest_parser_reads_verbose_xdist_colour_and_pytest7_lines() -> None:
    verbose = """\
tests/test_a.py::test_one PASSED                                         [ 25%]
tests/test_a.py::test_two[1 PASSED 2] FAILED                             [ 50%]
tests/test_a.py::TestK::test_three SKIPPED (no reason)                   [ 75%]
tests/test_a.py::test_four XFAIL (flaky)                                 [100%]
tests/test_a.py ... some other line PASSED here
"""
    assert parse_log_pytest(verbose) == {
        "tests/test_a.py::test_one": PASSED,
        "tests/test_a.py::test_two[1 PASSED 2]": FAILED,
        "tests/test_a.py::TestK::test_three": "SKIPPED",
        "tests/test_a.py::test_four": XFAIL,
    }
    xdist = "[gw1] [ 50%] PASSED tests/test_a.py::test_one\n[gw0] [100%] FAILED tests/b.py::t\n"
    assert parse_log_pytest(xdist) == {"tests/test_a.py::test_one": PASSED,
                                       "tests/b.py::t": FAILED}
    colour = "\x1b[32mPASSED\x1b[0m tests/test_a.py::test_one\r\n"
    assert parse_log_pytest(colour) == {"tests/test_a.py::test_one": PASSED}
    pytest7 = ("XFAIL tests/a.py::test_x\n  reason: bug 12\n"
               "XPASS tests/a.py::test_y unexpectedly passing\n")
    assert parse_log_pytest(pytest7) == {"tests/a.py::test_x": XFAIL, "tests/a.py::test_y": XPASS}


def test_pytest_parser_prefers_the_summary_over_earlier_lines() -> None:
    log = ("tests/a.py::test_f PASSED\nPASSED tests/a.py::test_g\n"
           "==== short test summary info ====\nFAILED tests/a.py::test_f - boom\n"
           "FAILED tests/a.py::test_g\n")
    assert parse_log_pytest(log) == {"tests/a.py::test_f": FAILED, "tests/a.py::test_g": FAILED}


@pytest.mark.parametrize(("text", "node", "rest"), [
    ("tests/a.py::test_b - AssertionError: x", "tests/a.py::test_b", "AssertionError: x"),
    ("tests/a.py::T::test_b[a - b] - E", "tests/a.py::T::test_b[a - b]", "E"),
    ("tests/a.py::test_b[x[1]-y] extra", "tests/a.py::test_b[x[1]-y]", "extra"),
    ("tests/a.py::test_b[unbalanced[] - msg", "tests/a.py::test_b[unbalanced[]", "msg"),
    ("tests/a.py - ImportError", "tests/a.py", "ImportError"),
    ("tests/a.py::test_b", "tests/a.py::test_b", ""),
])
def test_split_node_id(text: str, node: str, rest: str) -> None:
    assert split_node_id(text) == (node, rest)


def test_django_parser() -> None:
    log = """\
Testing against Django installed in '/testbed/django'
test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests) ... ok
test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests) ... FAIL
test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)
Validator help text is translated. ... ok
test_path (model_fields.test_filepathfield.FilePathFieldTests) ... Importing application x
System check identified no issues (0 silenced).
ok
test_skip (x.tests.Y) ... skipped 'Requires PIL'
test_xf (x.tests.Y) ... expected failure
test_new (x.tests.Y.test_new) ... ERROR
test_never_finished (x.tests.Z) ...

======================================================================
FAIL: test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)
----------------------------------------------------------------------
Ran 8 tests in 0.011s

OK
"""
    assert parse_log_django(log) == {
        "test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)": PASSED,
        "test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)": FAILED,
        "test_help_text (auth_tests.test_validators.UserAttributeSimilarityValidatorTest)":
            PASSED,
        "test_path (model_fields.test_filepathfield.FilePathFieldTests)": PASSED,
        "test_skip (x.tests.Y)": "SKIPPED",
        "test_xf (x.tests.Y)": XFAIL,
        "test_new (x.tests.Y.test_new)": ERROR,
        "test_new (x.tests.Y)": ERROR,
    }


def test_sympy_parser() -> None:
    log = """\
============================= test process starts ==============================
sympy/printing/tests/test_mathml.py[4]
test_presentation_symbol ok
test_mathml_printer F
test_print_basic E
test_known_bug f                                                            [OK]
________________________________ xpassed tests _________________________________
"""
    assert parse_log_sympy(log) == {
        "test_presentation_symbol": PASSED, "test_mathml_printer": FAILED,
        "test_print_basic": ERROR, "test_known_bug": XFAIL}


def test_log_parsers_are_chosen_and_registered_per_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading, "LOG_PARSERS", dict(grading.LOG_PARSERS))
    assert log_parser_for("Django/Django") is parse_log_django
    assert log_parser_for("psf/requests") is parse_log_pytest

    def parse_mine(log: str) -> dict[str, str]:
        return {"only": PASSED}

    register_log_parser("me/mine", parse_mine)
    assert log_parser_for("me/mine") is parse_mine
    with pytest.raises(AgentGymError, match=r"already has the log parser.*replace=True"):
        register_log_parser("django/django", parse_mine)
    register_log_parser("django/django", parse_mine, replace=True)
    assert log_parser_for("django/django") is parse_mine


# --- diff filtering ----------------------------------------------------------------------


def _instance(**overrides: object) -> SWEInstance:
    data: dict[str, object] = {
        "instance_id": "calc__calc-1", "repo": "example/calc", "base_commit": "HEAD",
        "problem_statement": "clamp ignores its upper bound",
        "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp"],
        "PASS_TO_PASS": ["tests/test_ops.py::test_add", "checks/check_more.py::test_x"],
    }
    data.update(overrides)
    return SWEInstance(**data)  # type: ignore[arg-type]


def _file_diff(path: str, old: str = "a\n", new: str = "b\n") -> str:
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n"
            f"-{old}+{new}")


def test_filter_diff_drops_every_kind_of_test_file() -> None:
    instance = _instance(test_patch=_file_diff("data/expected.json"))
    protected = protected_files(instance)
    assert protected == {"data/expected.json", "tests/test_ops.py", "checks/check_more.py"}
    diff = "".join(_file_diff(p) for p in (
        "calc/ops.py", "tests/test_ops.py", "data/expected.json", "checks/check_more.py",
        "conftest.py", "calc/helpers_test.py", "README.md"))
    kept, dropped = filter_diff(diff, protected)
    assert dropped == ["tests/test_ops.py", "data/expected.json", "checks/check_more.py",
                       "conftest.py", "calc/helpers_test.py"]
    assert kept == _file_diff("calc/ops.py") + _file_diff("README.md")


def test_command_fills_ids_or_files() -> None:
    instance = _instance(PASS_TO_PASS=["tests/test_ops.py::test_add[a b]"])
    command = grading._command("python -m pytest -rA", instance)
    assert command == ("python -m pytest -rA tests/test_ops.py::test_clamp"
                       " 'tests/test_ops.py::test_add[a b]'")
    assert grading._command("run {files} --ids {tests}", instance) == (
        "run tests/test_ops.py --ids tests/test_ops.py::test_clamp"
        " 'tests/test_ops.py::test_add[a b]'")
    many = _instance(PASS_TO_PASS=[f"tests/t{i % 3}.py::test_{i}" for i in range(40_000)])
    assert grading._command("pytest", many) == (
        "pytest tests/test_ops.py tests/t0.py tests/t1.py tests/t2.py")


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
# test functions and prints pytest's short summary.
RUNNER = """\
import importlib.util, os, sys

sys.path.insert(0, os.getcwd())
modules, results = {}, []
for node in sys.argv[1:]:
    path, _, name = node.partition("::")
    try:
        if path not in modules:
            spec = importlib.util.spec_from_file_location(path[:-3].replace("/", "."), path)
            modules[path] = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(modules[path])
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
    for path, content in {"calc/__init__.py": "", "calc/ops.py": OPS,
                          "tests/test_ops.py": TESTS, "tests/runner.py": RUNNER,
                          ".gitignore": "__pycache__/\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    instance = SWEInstance(
        instance_id="calc__calc-1", repo="example/calc", base_commit=_git(
            repo, "rev-parse", "HEAD").strip(),
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


@needs_sandbox
def test_a_test_run_past_the_timeout_scores_zero(task: tuple[Path, SWEInstance]) -> None:
    repo, instance = task

    async def main() -> GradeResult:
        async with await open_sandbox("local", template=repo) as box:
            return await grade(box, instance, instance.patch, test_cmd="sleep 30;", timeout=1)

    result = asyncio.run(main())
    assert result.reward == 0.0 and result.applied and "past the 1s timeout" in result.reason


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
