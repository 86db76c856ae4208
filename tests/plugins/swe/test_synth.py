"""Bug injection: libcst mutations, reading pytest's report, judging mutants, and whole
synthesis runs on a real project (inflection 0.5.1: one module, a 1-second suite).

The synthesis tests skip when the project is not cached and PyPI cannot be reached. They
share the default cache's sdists, repositories and envs, but write tasks to a fresh cache,
so that synthesis really runs.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentgym.plugins.swe import repo
from agentgym.plugins.swe.synth import (
    MUTATION_KINDS,
    SuiteRun,
    apply_mutation,
    candidate_order,
    check_task,
    failure_excerpts,
    judge,
    mutation_sites,
    normalise_output,
    parse_pytest_report,
    problem_statement,
    synthesize,
)
from agentgym.plugins.swe.validation import GRADER_VERSION

PACKAGE, VERSION = "inflection", "0.5.1"

SOURCE = '''\
"""A module."""
LIMIT = 10


def clamp(values: list[int], low: int = 0) -> list[int]:
    """Docstrings are never dropped."""
    out = []
    for value in values:
        # keep the small ones
        if value < LIMIT and value >= low:
            out.append(value)
    total = sum(out) + 1
    return sorted(out, key=abs) if total else out


class Box:
    def ready(self, flag=True):
        return not flag or self.check(3, 2)
'''


def sites_by_change(source: str = SOURCE) -> dict[str, object]:
    sites = {f"{s.kind}: {s.change}": s for s in mutation_sites(source, "mod.py")}
    assert len(sites) == len(mutation_sites(source, "mod.py")), "two sites read the same"
    return sites


def mutated_line(site) -> tuple[str, str]:
    before, after = SOURCE.splitlines(), apply_mutation(SOURCE, site).splitlines()
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    return "|".join(removed).strip(), "|".join(added).strip()


# ---- mutations -----------------------------------------------------------------------------


def test_every_kind_of_mutation_is_offered_inside_functions_only() -> None:
    sites = mutation_sites(SOURCE, "mod.py")
    assert {s.kind for s in sites} == set(MUTATION_KINDS)
    assert {s.function for s in sites} == {"clamp", "Box.ready"}
    changes = sites_by_change()
    # The module-level constant and the annotations are left alone.
    assert "constant: 10 -> 11" not in changes
    assert not any("int" in change for change in changes)
    assert not any("Docstrings" in change for change in changes)


@pytest.mark.parametrize("change, removed, added", [
    ("comparison: < -> >=", "if value < LIMIT and value >= low:",
     "if value >= LIMIT and value >= low:"),
    ("comparison: < -> <=", "if value < LIMIT and value >= low:",
     "if value <= LIMIT and value >= low:"),
    ("operator: and -> or", "if value < LIMIT and value >= low:",
     "if value < LIMIT or value >= low:"),
    ("operator: + -> -", "total = sum(out) + 1", "total = sum(out) - 1"),
    ("constant: 1 -> 0", "total = sum(out) + 1", "total = sum(out) + 0"),
    ("constant: True -> False", "def ready(self, flag=True):", "def ready(self, flag=False):"),
    ("condition: if c -> if not c", "if value < LIMIT and value >= low:",
     "if not (value < LIMIT and value >= low):"),
    ("condition: x if c else y -> x if not c else y",
     "return sorted(out, key=abs) if total else out",
     "return sorted(out, key=abs) if not total else out"),
    ("statement: drop 'out.append(value)'", "out.append(value)", "pass"),
    ("arguments: f(3, 2) swapped", "return not flag or self.check(3, 2)",
     "return not flag or self.check(2, 3)"),
])
def test_each_mutation_changes_one_line_as_described(change: str, removed: str,
                                                     added: str) -> None:
    site = sites_by_change()[change]
    assert mutated_line(site) == (removed, added)
    compile(apply_mutation(SOURCE, site), "mod.py", "exec")


def test_dropping_a_statement_keeps_the_comment_above_it() -> None:
    site = sites_by_change()["statement: drop 'total = sum(out) + 1'"]
    mutated = apply_mutation(SOURCE, site)
    assert "total = sum(out) + 1" not in mutated
    assert "# keep the small ones" in mutated and '"""Docstrings' in mutated


def test_the_candidate_order_depends_only_on_the_seed() -> None:
    sites = mutation_sites(SOURCE, "mod.py")
    first = candidate_order(sites, random.Random("pkg==1#0"))
    assert first == candidate_order(sites, random.Random("pkg==1#0"))
    assert first != candidate_order(sites, random.Random("pkg==1#1"))
    assert sorted(first, key=lambda s: s.index) == sorted(sites, key=lambda s: s.index)
    # Kinds take turns, so that the first tasks are not all of one kind.
    assert len({s.kind for s in first[:len(MUTATION_KINDS)]}) == len(MUTATION_KINDS)


def test_a_site_that_moved_is_refused() -> None:
    site = mutation_sites(SOURCE, "mod.py")[0]
    with pytest.raises(ValueError, match=r"not in mod\.py"):
        apply_mutation("def f():\n    return 0\n", site)


# ---- pytest's report ----------------------------------------------------------------------

REPORT = """\
============================= test session starts ==============================
collected 5 items

tests/test_a.py .F.E                                                     [100%]

==================================== ERRORS ====================================
___________________________ ERROR at setup of test_d ___________________________
E   RuntimeError: fixture broke
=================================== FAILURES ===================================
______________________________ TestB.test_b[x-1] _______________________________
tests/test_a.py:12: in test_b
    assert f(1) == 2
E   assert 3 == 2
E    +  where 3 = <function f at 0x7f225ecbbba0>(1)
E   Use -v to get more diff
=========================== short test summary info ============================
PASSED tests/test_a.py::test_a
PASSED tests/test_a.py::test_c[a b]
FAILED tests/test_a.py::TestB::test_b[x-1] - assert 3 == 2
ERROR tests/test_a.py::test_d - RuntimeError: fixture broke
ERROR tests/test_broken.py - ImportError: cannot import name 'g'
SKIPPED [1] tests/test_a.py:30: no network
XFAIL tests/test_a.py::test_e - known
==================== 1 failed, 2 passed, 1 error in 0.12s =====================
"""


def test_status_lines_are_read_by_node_id() -> None:
    assert parse_pytest_report(REPORT) == {
        "tests/test_a.py::test_a": "PASSED",
        "tests/test_a.py::TestB::test_b[x-1]": "FAILED",
        "tests/test_a.py::test_d": "ERROR",
        "tests/test_a.py::test_e": "XFAIL",
    }  # ids with spaces and file-level collection errors are left out


def test_failure_messages_are_excerpted_without_addresses_or_noise() -> None:
    assert failure_excerpts(REPORT) == {
        "test_d": ["RuntimeError: fixture broke"],
        "TestB.test_b[x-1]": ["assert 3 == 2", "+  where 3 = <function f at 0x...>(1)"],
    }


def test_the_problem_statement_names_tests_and_messages_not_the_fix() -> None:
    failing = ["tests/test_a.py::TestB::test_b[x-1]", "tests/test_a.py::test_d"]
    text = problem_statement("pkg", "1.0", failing, failure_excerpts(REPORT))
    assert "2 tests" in text and all(f"`{t}`" in text for t in failing)
    assert "assert 3 == 2" in text and "RuntimeError: fixture broke" in text
    assert "assert f(1) == 2" not in text  # source lines of tracebacks stay out


def test_mutants_are_judged_against_the_clean_run() -> None:
    passing = ["t::a", "t::b", "t::c"]

    def run(statuses: dict[str, str], timed_out: bool = False) -> SuiteRun:
        return SuiteRun(statuses, "", timed_out, 1.0)

    kept = judge(run({"t::a": "FAILED", "t::b": "PASSED", "t::c": "XFAIL"}), passing, 10)
    assert kept == ("kept", ["t::a"], ["t::b", "t::c"])
    assert judge(run({t: "PASSED" for t in passing}), passing, 10)[0] == "uncaught"
    assert judge(run({"t::a": "FAILED", "t::b": "ERROR", "t::c": "PASSED"}), passing,
                 1)[0] == "too broad"
    assert judge(run({"t::a": "FAILED", "t::b": "PASSED"}), passing, 10)[0] == (
        "broke collection")
    assert judge(run({"t::a": "FAILED", "t::b": "SKIPPED", "t::c": "PASSED"}), passing,
                 10)[0] == "broke collection"
    assert judge(run({}, timed_out=True), passing, 10)[0] == "timed out"


# ---- synthesis on a real project ----------------------------------------------------------


@pytest.fixture(scope="module")
def tasks(fresh_task_cache) -> tuple[list[dict], Path]:
    ready = repo.cache_dir() / "envs" / f"{PACKAGE}-{VERSION}" / ".agentgym-ready.json"
    if not ready.is_file():
        try:
            socket.create_connection(("pypi.org", 443), timeout=5).close()
        except OSError as error:
            pytest.skip(f"PyPI is unreachable ({error}) and {PACKAGE}=={VERSION} is not"
                        " cached")
    cache = fresh_task_cache()
    return synthesize(PACKAGE, VERSION, 2, seed=0, progress=False, cache=cache), cache


def test_tasks_have_the_instance_schema_and_are_validated(tasks) -> None:
    made, _ = tasks
    assert len(made) == 2
    project = repo.prepare(PACKAGE, VERSION)
    for task in made:
        assert task["repo"] == "pypi/inflection" and task["version"] == VERSION
        assert task["package"] == PACKAGE and task["package_version"] == VERSION
        assert task["environment_setup_commit"] == project.commit
        assert task["instance_id"].startswith("pypi__inflection-0.5.1-")
        assert task["test_patch"] == "" and task["hints_text"] == ""
        assert task["FAIL_TO_PASS"] and task["PASS_TO_PASS"]
        assert not set(task["FAIL_TO_PASS"]) & set(task["PASS_TO_PASS"])
        assert task["patch"].startswith("diff --git a/inflection/__init__.py"
                                        " b/inflection/__init__.py\n")
        assert task["test_cmd"] == project.test_cmd(targets=())
        assert task["validation"] == {"backend": "local", "gold": 1.0, "empty": 0.0,
                                      "no_op": 0.0, "grader": GRADER_VERSION}
        # The statement names what fails, never the lines the fix changes.
        changed = [line[1:].strip() for line in task["patch"].splitlines()
                   if line[:1] in "+-" and line[:3] not in ("+++", "---") and line[1:].strip()]
        assert all(line not in task["problem_statement"] for line in changed)
        assert task["FAIL_TO_PASS"][0] in task["problem_statement"]
    assert made[0]["instance_id"] != made[1]["instance_id"]


def test_a_task_is_rebuilt_from_its_file_and_its_patch_fixes_it(tasks, tmp_path) -> None:
    made, _ = tasks
    task = made[0]
    check_task(task)
    work = tmp_path / "repo"
    assert repo.build_task_repo(PACKAGE, VERSION, task["patch"], work) == task["base_commit"]
    project = repo.prepare(PACKAGE, VERSION)
    command = project.test_cmd(python=str(project.env / "bin" / "python"),
                               targets=tuple(task["FAIL_TO_PASS"]))

    def statuses() -> dict[str, str]:
        out = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True,
                             text=True, timeout=120)
        return parse_pytest_report(out.stdout)

    assert set(statuses().values()) <= {"FAILED", "ERROR"}
    subprocess.run(["git", "apply", "-"], input=task["patch"], text=True, cwd=work, check=True)
    assert set(statuses().values()) == {"PASSED"}


def test_the_same_arguments_give_the_same_tasks(tasks, fresh_task_cache) -> None:
    made, cache = tasks
    # From the cache: immediate, and a prefix for fewer tasks.
    assert synthesize(PACKAGE, VERSION, 1, seed=0, progress=False, cache=cache) == made[:1]
    # From scratch in another cache: the same rows.
    other = fresh_task_cache()
    assert synthesize(PACKAGE, VERSION, 1, seed=0, progress=False, cache=other) == made[:1]


def test_rows_are_byte_identical_whatever_the_cache_folder_working_dir_and_runner(
        tasks, fresh_task_cache, tmp_path, agentgym_cli) -> None:
    outputs = []
    for name, runner in (("one", "sandbox"), ("two", "subprocess")):
        cache, cwd = fresh_task_cache(), tmp_path / name
        cwd.mkdir()
        env = {**os.environ, "AGENTGYM_SWE_CACHE": str(cache)}
        done = subprocess.run([agentgym_cli, "swe", "synth", f"{PACKAGE}=={VERSION}", "-n", "3",
                               "--seed", "1", "--runner", runner, "--out", "tasks.jsonl",
                               "--quiet"], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        outputs.append((cwd / "tasks.jsonl").read_bytes())
        text = outputs[-1].decode()
        for leak in (str(cache), str(cwd), str(repo.cache_dir()), "/workspace", "/tmp/",
                     str(Path.home())):
            assert leak not in text, f"{leak!r} leaked into a row"
        assert not re.search(r"0x[0-9a-f]{6,}|\d\.\d\ds\b", text)
    assert outputs[0] == outputs[1]
    assert len(outputs[0].splitlines()) == 3


def test_test_output_is_normalised_for_problem_statements() -> None:
    output = ("E   FileNotFoundError: '/workspace/pkg/data.txt' in /workspace\n"
              "E   at <Thing object at 0x7f225ecbbba0>: /tmp/pytest-of-root/pytest-12/x0/a"
              " /tmp/tmpab_c9x12/b took 0.123s\n")
    assert normalise_output(output) == (
        "E   FileNotFoundError: 'pkg/data.txt' in .\n"
        "E   at <Thing object at 0x...>: /tmp/pytest/x0/a /tmp/tmpXXXXXXXX/b took N.NNs\n")
    # Not a workspace path: another folder that starts alike, or a word.
    assert normalise_output("/workspaces/x /my/workspace/y") == "/workspaces/x /my/workspace/y"


def test_the_cli_writes_the_tasks(tasks, tmp_path, monkeypatch) -> None:
    from agentgym.cli import main

    made, cache = tasks
    monkeypatch.setenv("AGENTGYM_SWE_CACHE", str(cache))
    out = tmp_path / "tasks.jsonl"
    result = CliRunner().invoke(main, ["swe", "synth", f"{PACKAGE}=={VERSION}", "-n", "2",
                                       "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in out.read_text().splitlines()] == made
    assert re.fullmatch(r"2 tasks written; 0 candidates rejected by the grader \(0: gold patch"
                        r" < 1\.0, 0: no change > 0\.0\), \d+ candidates tried .*",
                        result.output.splitlines()[-1]), result.output
    bad = CliRunner().invoke(main, ["swe", "synth", PACKAGE, "--out", str(out)])
    assert bad.exit_code != 0 and "PACKAGE==VERSION" in bad.output
