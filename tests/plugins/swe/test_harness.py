"""Test plans: which files run, in which order, with which command and setup, per the
official harness's specs."""

from __future__ import annotations

import dataclasses

import pytest

from agentgym.plugins.swe import harness
from agentgym.plugins.swe.harness import (
    ACTIVATE_TESTBED,
    DEFAULT_TEST_CMD,
    DJANGO,
    PYTEST,
    SYMPY,
    directives,
    fit,
    plan,
    spec_for,
    version_key,
)


def _diff(path: str, *, new: bool = False, deleted: bool = False) -> str:
    old_side, new_side = ("/dev/null" if new else f"a/{path}"), (
        "/dev/null" if deleted else f"b/{path}")
    return (f"diff --git a/{path} b/{path}\n--- {old_side}\n+++ {new_side}\n@@ -1 +1 @@\n"
            "-a\n+b\n")


def test_files_run_whole_in_collection_order_not_the_ids(make_instance) -> None:
    instance = make_instance(test_patch=_diff("tests/test_new.py", new=True)
                         + _diff("tests/data/expected.json") + _diff("tests/test_old.py",
                                                                      deleted=True))
    result = plan(instance)
    # files of the ids and the test_patch's changed test files (not data, not deleted),
    # folders walked in order: tests/core/ sorts by name among tests/'s files
    assert result.arguments == ["tests/core/test_a.py", "tests/test_new.py",
                                "tests/test_ops.py"]
    assert result.command == (f"{DEFAULT_TEST_CMD} tests/core/test_a.py tests/test_new.py"
                              " tests/test_ops.py")
    assert result.setup == [ACTIVATE_TESTBED] and result.runner is PYTEST
    assert DEFAULT_TEST_CMD.startswith("python3 ")  # an image with only python3 runs it


def test_placeholders_and_overrides(make_instance) -> None:
    instance = make_instance()
    assert plan(instance, "run {files} --ids {tests}").command == (
        "run tests/core/test_a.py tests/test_ops.py --ids tests/test_ops.py::test_clamp"
        " 'tests/test_ops.py::test_add[a b]' tests/core/test_a.py::test_x")
    # an instance's own command is used as given, without the repository's setup
    own = plan(make_instance(repo="django/django", version="3.0", test_cmd="python3 -m mytests",
                         FAIL_TO_PASS=["test_clamp (app.tests.OpsTests)"], PASS_TO_PASS=[]))
    assert own.setup == [ACTIVATE_TESTBED] and own.command == "python3 -m mytests app.tests"
    assert plan(own_instance := make_instance(test_cmd="a"), "b").command.startswith("b ")
    assert own_instance.test_cmd == "a"


def test_the_argument_length_guard_shortens_ids_then_files(
        make_instance, monkeypatch: pytest.MonkeyPatch) -> None:
    many = make_instance(PASS_TO_PASS=[f"tests/t{i % 3}.py::test_{i}" for i in range(40_000)])
    # {tests} would pass the kernel's limit: the files run instead
    assert plan(many, "pytest {tests}").command == (
        "pytest tests/t0.py tests/t1.py tests/t2.py tests/test_ops.py")
    monkeypatch.setattr(harness, "MAX_IDS_CHARS", 30)
    deep = make_instance(PASS_TO_PASS=["a/b/c/test_1.py::t", "a/b/d/test_2.py::t",
                                   "a/test_3.py::t"], FAIL_TO_PASS=["a/b/test_4.py::t"])
    assert directives(deep, PYTEST) == [
        "a/b/c/test_1.py", "a/b/d/test_2.py", "a/b/test_4.py", "a/test_3.py"]
    # folders replace the deepest files one level at a time, and no folder runs
    # inside another
    assert fit(directives(deep, PYTEST), PYTEST, 40) == ["a/b/c", "a/b/d", "a/b/test_4.py",
                                                             "a/test_3.py"]
    assert fit(directives(deep, PYTEST), PYTEST, 20) == ["a/b", "a/test_3.py"]
    assert fit(directives(deep, PYTEST), PYTEST, 12) == ["a"]
    assert fit(["test_top.py", "other_test.py"], PYTEST, 5) == []  # the whole suite
    assert plan(deep).command == f"{DEFAULT_TEST_CMD} a/b a/test_3.py"


def test_django_runs_test_modules_as_labels_with_the_harness_command(make_instance) -> None:
    instance = make_instance(
        repo="django/django", version="3.0",
        FAIL_TO_PASS=["test_clamp (app.tests.OpsTests)"],
        PASS_TO_PASS=["Adding zero is identity.", "test_y (other_app.test_views.Views)",
                      "test_z (forms_tests.widget_tests.test_input.InputTests.test_z)"],
        test_patch=_diff("tests/app/tests.py") + _diff("tests/app/models.py")
        + _diff("tests/templates/x.html") + _diff("tests/forms_tests/tests/__init__.py"))
    result = plan(instance)
    assert result.runner is DJANGO
    # test modules only (not models.py, not templates), a package's __init__ as the package
    assert result.arguments == ["app.tests", "forms_tests.tests",
                                "forms_tests.widget_tests.test_input", "other_app.test_views"]
    assert result.command == (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 app.tests"
        " forms_tests.tests forms_tests.widget_tests.test_input other_app.test_views")
    assert any("LANG=" in line for line in result.setup)  # 3.x: UTF-8 locale
    assert plan(dataclasses.replace(instance, version="4.2")).setup == [
        ACTIVATE_TESTBED]
    old = plan(dataclasses.replace(instance, version="1.9"))
    assert old.command.startswith("./tests/runtests.py --verbosity 2 app.tests")
    assert any("setup.py install" in line and "PYTHONPATH" in line for line in old.setup)


def test_sympy_runs_the_test_patchs_files_with_bin_test(make_instance) -> None:
    instance = make_instance(repo="sympy/sympy", version="1.1",
                         FAIL_TO_PASS=["test_clamp"], PASS_TO_PASS=["test_add"],
                         test_patch=_diff("sympy/core/tests/test_ops.py"))
    result = plan(instance)
    assert result.runner is SYMPY and result.arguments == ["sympy/core/tests/test_ops.py"]
    assert result.command == ("PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning'"
                              " bin/test -C --verbose sympy/core/tests/test_ops.py")


@pytest.mark.parametrize(("repo", "version", "command"), [
    ("astropy/astropy", "1.3", "pytest -rA -vv -o console_output_style=classic --tb=no"),
    ("astropy/astropy", "v5.3", "pytest -rA"),
    ("mwaskom/seaborn", "0.12", "pytest --no-header -rA"),
    ("sphinx-doc/sphinx", "7.1", "tox --current-env -epy39 -v --"),
    ("Pallets/Flask", "2.3", "pytest -rA"),
    ("django/django", "", "./tests/runtests.py --verbosity 2 --settings=test_sqlite"
                          " --parallel 1"),
])
def test_harness_commands_per_repository_and_version(repo: str, version: str,
                                                     command: str) -> None:
    spec = spec_for(repo, version)
    assert spec is not None and spec.test_cmd == command
    assert spec_for("getmoto/moto", "4.1") is None


def test_version_keys() -> None:
    assert version_key("1.10") == (1, 10) > version_key("1.9") == (1, 9)
    assert version_key("v5.3") == (5, 3) and version_key("") is None
