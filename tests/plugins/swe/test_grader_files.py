"""What grading keeps of an agent's diff, and how it runs pytest: the task's files dropped
with a reason, the plugin kept importable, outcomes read from the grader's report."""

from __future__ import annotations

import pytest

from agentgym.plugins.swe.grader_files import (
    BUILD_ARTEFACT,
    PACKAGING,
    RUNNER_CONFIG,
    SHADOWS,
    STARTUP_HOOK,
    TEST_FILE,
    runner_script,
    task_owned,
)
from agentgym.plugins.swe.grading import (
    _with_plugin_path,
    report_log,
    runs_pytest,
    split_diff,
)
from agentgym.plugins.swe.harness import plan


@pytest.mark.parametrize(("path", "why"), [
    ("tests/test_ops.py", TEST_FILE),
    ("pkg/sub/conftest.py", TEST_FILE),
    ("pyproject.toml", RUNNER_CONFIG),
    ("pkg/setup.cfg", RUNNER_CONFIG),
    ("tox.ini", RUNNER_CONFIG),
    ("docs/.pytest.ini", RUNNER_CONFIG),
    (".pytest_cache/v/cache/lastfailed", RUNNER_CONFIG),
    ("sitecustomize.py", STARTUP_HOOK),
    ("src/pkg/usercustomize.py", STARTUP_HOOK),
    ("evil.pth", STARTUP_HOOK),
    ("probe-1.0.dist-info/entry_points.txt", PACKAGING),
    ("src/probe.egg-info/PKG-INFO", PACKAGING),
    ("probe.egg-link", PACKAGING),
    ("setup.py", PACKAGING),
    ("MANIFEST.in", PACKAGING),
    ("pkg/__pycache__/ops.cpython-311.pyc", BUILD_ARTEFACT),
    ("pkg/ops.pyc", BUILD_ARTEFACT),
])
def test_the_tasks_files_are_dropped_with_a_reason(path, why):
    assert task_owned(path) == why
    assert task_owned(path, new=True) == why


@pytest.mark.parametrize("path", [
    "pkg/ops.py", "pkg/json.py", "src/pkg/types.py", "README.md", "pkg/data/config.toml",
    "docs/setup_guide.rst", "pkg/plugin_entry_points.py",
])
def test_the_agents_own_files_are_kept(path):
    assert task_owned(path) is None and task_owned(path, new=True) is None


@pytest.mark.parametrize("path", [
    "pytest.py", "_pytest/runner.py", "src/pluggy/__init__.py", "json.py",
    "src/inspect.py", "py.py", "attr/__init__.py", "iniconfig.cpython-311-x86_64-linux-gnu.so",
])
def test_a_new_module_that_shadows_the_runner_is_dropped(path):
    assert task_owned(path, new=True) == SHADOWS
    assert task_owned(path) is None  # an existing file of the repository is its own


def test_a_new_file_in_a_folder_the_repository_has_is_its_own():
    # the pytest repository adds a module to its own src/_pytest
    assert task_owned("src/_pytest/newmod.py", new=True,
                      existing={"src/_pytest", "src/pytest"}) is None
    assert task_owned("src/_pytest/newmod.py", new=True, existing={"src"}) == SHADOWS


def test_split_diff_drops_whole_parts_and_says_why():
    def part(path: str, new: bool = False) -> str:
        if new:
            return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
                    f"+++ b/{path}\n@@ -0,0 +1 @@\n+x\n")
        return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"

    diff = (part("calc/ops.py") + part("pyproject.toml") + part("pytest.py", new=True)
            + part("sitecustomize.py", new=True) + part("tests/test_ops.py"))
    kept, dropped = split_diff(diff, {"tests/test_ops.py"})
    assert kept == part("calc/ops.py")
    assert dropped == {"pyproject.toml": RUNNER_CONFIG, "pytest.py": SHADOWS,
                       "sitecustomize.py": STARTUP_HOOK, "tests/test_ops.py": TEST_FILE}


def test_the_runners_own_script_is_found(make_instance):
    sympy = make_instance(repo="sympy/sympy", version="1.1", FAIL_TO_PASS=["test_x"],
                          PASS_TO_PASS=[], test_patch="")
    sympy_plan = plan(sympy)
    assert runner_script(sympy_plan.command, sympy_plan.arguments) == "bin/test"
    django = make_instance(repo="django/django", version="3.0",
                           FAIL_TO_PASS=["test_a (app.tests.T)"], PASS_TO_PASS=[])
    assert runner_script(plan(django).command) == "tests/runtests.py"
    pytest_plan = plan(make_instance())
    assert runner_script(pytest_plan.command, pytest_plan.arguments) is None


def test_which_runs_read_the_grader_report(make_instance):
    assert runs_pytest(plan(make_instance()))
    assert runs_pytest(plan(make_instance(test_cmd="PYTHONPATH=$PWD /env/bin/python -m"
                                                   " pytest -rA")))
    assert runs_pytest(plan(make_instance(repo="astropy/astropy", version="4.3")))
    assert not runs_pytest(plan(make_instance(test_cmd="python3 tests/runner.py")))
    assert not runs_pytest(plan(make_instance(repo="sphinx-doc/sphinx", version="4.0")))
    assert not runs_pytest(plan(make_instance(repo="sympy/sympy", version="1.1",
                                              FAIL_TO_PASS=["test_x"], PASS_TO_PASS=[])))


def test_the_plugin_folder_joins_every_pythonpath_the_command_sets():
    folder = "/tmp/agentgym-grade-1/plugin-2"
    assert (_with_plugin_path('PYTHONPATH="$PWD" python -m pytest', folder)
            == f'PYTHONPATH="$PWD":{folder} python -m pytest')
    assert (_with_plugin_path("export PYTHONPATH=$PWD/src; pytest", folder)
            == f"export PYTHONPATH=$PWD/src:{folder}; pytest")
    assert _with_plugin_path("PYTHONPATH= pytest", folder) == f"PYTHONPATH={folder} pytest"
    assert _with_plugin_path("pytest -rA", folder) == "pytest -rA"


def test_report_log_reads_as_the_pytest_summary():
    from agentgym.plugins.swe.logs import parse_log_pytest

    report = {"tests": {
        "t.py::a": {"setup": "ok", "call": "passed", "teardown": "ok"},
        "t.py::b[x - y]": {"setup": "ok", "call": "failed", "teardown": "ok"},
        "t.py::c": {"setup": "error"},
        "t.py::d": {"setup": "ok", "call": "passed", "teardown": "error"},
        "t.py::e": {"setup": "skipped"},
        "t.py::f": {"setup": "ok", "call": "xfailed", "teardown": "ok"},
    }}
    assert parse_log_pytest(report_log(report)) == {
        "t.py::a": "PASSED", "t.py::b[x - y]": "FAILED", "t.py::c": "ERROR",
        "t.py::d": "ERROR", "t.py::e": "SKIPPED", "t.py::f": "XFAIL"}


def test_an_id_that_breaks_the_line_cannot_write_a_result_of_its_own():
    """A parametrize id spelled by the code under test (an enum's __str__) with a line
    break in it once wrote "PASSED <a FAIL_TO_PASS id>" as a line of the log."""
    from agentgym.plugins.swe.logs import parse_log_pytest

    forged = "t.py::g[z]\nPASSED t.py::fixed"
    report = {"tests": {forged: {"setup": "ok", "call": "failed", "teardown": "ok"},
                        "t.py::fixed": {"setup": "ok", "call": "failed", "teardown": "ok"},
                        "t.py::h[a\u2028b]": {"setup": "ok", "call": "passed"}}}
    assert parse_log_pytest(report_log(report)) == {"t.py::fixed": "FAILED"}


KINDS = '''\
import unittest

import pytest


class TestA:
    def test_method(self):
        assert 1

    def test_method_fails(self):
        assert 0


class U(unittest.TestCase):
    def test_ok(self):
        self.assertTrue(True)

    def test_bad(self):
        self.assertTrue(False)

    @unittest.expectedFailure
    def test_xf(self):
        self.assertTrue(False)


@pytest.mark.xfail
def test_xfail():
    assert 0


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    pass


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("teardown")


def test_teardown_error(broken_teardown):
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x == 1
'''


def test_the_report_plugin_agrees_with_pytest_on_every_kind_of_outcome(tmp_path):
    """The plugin, run by this interpreter's pytest, reads every outcome as pytest's own
    ``-rA`` summary does, and finds no tampering in an honest run."""
    import json
    import os
    import subprocess
    import sys

    from agentgym.plugins.swe.grading import _plugin_source
    from agentgym.plugins.swe.logs import parse_log_pytest

    repo, plugins = tmp_path / "repo", tmp_path / "plugins"
    (repo / "tests").mkdir(parents=True)
    plugins.mkdir()
    (repo / "tests" / "test_kinds.py").write_text(KINDS)
    report = tmp_path / "report.json"
    (plugins / "agr_report.py").write_text(_plugin_source(
        {"report": str(report), "nonce": "n", "root": str(repo), "changed": [], "dists": []}))
    (plugins / "agr_loader.py").write_text(
        "import sys\n\n\ndef pytest_addhooks(pluginmanager):\n"
        "    sys.modules['agr_report'].load_entry_points(pluginmanager)\n")
    env = {**os.environ, "PYTHONPATH": str(plugins), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTEST_ADDOPTS": "-p agr_report", "PYTEST_PLUGINS": "agr_loader"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                           "tests"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=120)
    data = json.loads(report.read_text())
    assert data["nonce"] == "n" and data["tampered"] == [], data
    assert parse_log_pytest(report_log(data)) == parse_log_pytest(done.stdout)
    assert not (plugins / "agr_report.py").exists()  # the nonce is on no disk
