"""The real grader has the last word on synthesized tasks.

Acceptance: tasks synthesized from three real projects with different test layouts (toolz:
tests inside the package; inflection: one test file at the root; cachetools: a src layout
with tests/) on both backends each score 1.0 with their gold patch and 0.0 with no change
through ``gym.make("swe-synth", tasks=FILE, backend=B)``. And an order-dependent stand-in
(a tiny project built here as an sdist, whose later tests read state the earlier ones set)
shows that candidates whose verdict depends on the order the tests run in are either
rejected by the grader, and counted, or written and graded correctly, whatever order
grading uses.

The projects' sdists, repositories and envs are shared with the default cache (built
once); tasks go to fresh caches, so synthesis and validation really run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.plugins.swe import repo
from agentgym.plugins.swe.instance import SWEInstance
from agentgym.plugins.swe.synth import synthesize_report, write_jsonl
from agentgym.plugins.swe.validation import (
    GOLD_BELOW_ONE,
    GRADER_VERSION,
    NO_CHANGE_ABOVE_ZERO,
    NO_OP_FILE,
)
from agentgym.testing import play_turns

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="synthesis runs mutants in the local sandbox: bubblewrap and root needed")

PROJECTS = {  # three test layouts
    "toolz==1.2.0": "tests inside the package",
    "inflection==0.5.1": "one test file at the root",
    "cachetools==8.0.0": "src layout, tests/ beside it",
}
SUBMIT = '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'


def bash(command: str) -> str:
    return ('<tool_call>\n' + json.dumps({"name": "bash", "arguments": {"command": command}})
            + '\n</tool_call>')


def assert_graded_correctly(task_file: Path, backend: str) -> int:
    """Every task of ``task_file`` scores 1.0 with its gold patch and 0.0 with no change
    (nothing, or a new text file) in the env on ``backend``; returns how many there are."""
    env = gym.make("swe-synth", tasks=str(task_file), backend=backend)
    try:
        raw = env.unwrapped
        for task in raw.tasks:
            options = {"task_id": task.id}
            env.reset(options=options)
            reward, info = play_turns(env, list(raw.task.solution), options=options)
            assert reward == 1.0, (task.id, info["reward_metrics"])
            reward, info = play_turns(env, [SUBMIT], options=options)
            assert reward == 0.0, (task.id, info["reward_metrics"])
            reward, info = play_turns(env, [bash(f"echo note > {NO_OP_FILE}"), SUBMIT],
                                      options=options)
            assert reward == 0.0, (task.id, info["reward_metrics"])
        return len(raw.tasks)
    finally:
        env.close()


def _docker_missing() -> str | None:
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as error:
        return f"no Docker engine reachable ({type(error).__name__}): start dockerd"
    return None


@pytest.fixture(scope="module", params=["local", "docker"])
def backend(request) -> str:
    if request.param == "docker":
        missing = _docker_missing()
        if missing:
            pytest.skip(missing)
        import docker

        from agentgym.sandboxes.image import DEFAULT_IMAGE, ensure_image

        ensure_image(DEFAULT_IMAGE, docker.from_env())
    return request.param


@pytest.mark.slow
def test_every_task_written_scores_gold_one_and_no_change_zero(backend, fresh_task_cache, sample,
                                                               tmp_path, require_project) -> None:
    """Two tasks synthesized from a project (one of PROJECTS a run, each of them under
    ``AGENTGYM_TEST_FULL=1``) on each backend."""
    for spec in sample(sorted(PROJECTS), 1):
        check_tasks_written(spec, backend, fresh_task_cache, tmp_path / spec, require_project)


def check_tasks_written(spec, backend, fresh_task_cache, tmp_path, require_project) -> None:
    tmp_path.mkdir()
    package, version = repo.split_spec(spec)
    require_project(package, version)
    report = synthesize_report(package, version, 2, progress=False, backend=backend, jobs=2,
                               cache=fresh_task_cache())
    assert len(report.tasks) == 2, report.summary()
    assert report.summary().startswith(
        f"2 tasks written; {report.grader_rejected} candidates rejected by the grader"
        f" ({report.rejected.get(GOLD_BELOW_ONE, 0)}: gold patch < 1.0,"
        f" {report.rejected.get(NO_CHANGE_ABOVE_ZERO, 0)}: no change > 0.0)")
    assert report.graded == 2 + report.grader_rejected and report.grading_seconds > 0
    assert 0 < report.validated_fraction <= 1
    for row in report.tasks:
        assert row["validation"] == {"backend": backend, "gold": 1.0, "empty": 0.0,
                                     "no_op": 0.0, "grader": GRADER_VERSION}
        assert SWEInstance.from_dict(row).to_dict()["validation"] == row["validation"]
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(report.tasks, task_file)
    assert assert_graded_correctly(task_file, backend) == 2


# ---- an order-dependent suite ------------------------------------------------------------

STANDIN = "orderdep-standin"
STANDIN_MODULE = '''\
"""A registry whose tests share its state."""

_registry = {}


def register(name, value):
    _registry[name] = value
    return value


def lookup(name):
    if name not in _registry:
        raise KeyError(name)
    return _registry[name]


def lookup_or_none(name):
    return _registry.get(name)


def describe(name, upper=False):
    text = name + "=" + str(lookup(name))
    if upper:
        text = text.upper()
    return text


def clear():
    _registry.clear()
    return len(_registry)
'''
# test_2 reads what test_1 registered, and test_9 sees a cleared registry only because it
# clears what test_1 left. Every mutant of describe fails test_2 alone (whose gold patch
# fails when test_2 runs before test_1); the one caught mutant of clear (the dropped
# `_registry.clear()`; its `return` keeps the body from being a giveaway `pass`) fails
# test_9 alone (which passes, unfixed, when it runs first).
STANDIN_TESTS = '''\
from orderdep_standin import clear, describe, lookup, lookup_or_none, register


def test_1_register():
    assert register("k", 5) == 5
    assert lookup("k") == 5


def test_2_describe():
    assert describe("k") == "k=5"
    assert describe("k", upper=True) == "K=5"


def test_3_missing():
    assert lookup_or_none("nope") is None


def test_9_clear():
    clear()
    assert lookup_or_none("k") is None
'''


@pytest.mark.slow
def test_order_dependent_candidates_are_rejected_or_graded_correctly(fresh_task_cache,
                                                                     tmp_path,
                                                                     make_standin) -> None:
    package, version = make_standin(STANDIN, {"orderdep_standin/__init__.py": STANDIN_MODULE,
                                              "tests/test_registry.py": STANDIN_TESTS})
    report = synthesize_report(package, version, 20, progress=False, backend="local",
                               cache=fresh_task_cache())
    assert report.exhausted  # every candidate was tried
    reasons: dict[str, list[str]] = {}
    for function, reason in report.outcomes:
        reasons.setdefault(function.split("::")[1], []).append(reason)
    # Candidates that pass the suite in its own order reach the grader; those whose
    # verdict depends on the order are kept only if the grader agrees, else counted.
    assert set(reasons["describe"]) & {"kept", GOLD_BELOW_ONE}, reasons
    assert set(reasons["clear"]) & {"kept", NO_CHANGE_ABOVE_ZERO}, reasons
    assert "kept" in reasons["lookup"] and "kept" in reasons["register"], reasons
    assert report.grader_rejected == (reasons["describe"].count(GOLD_BELOW_ONE)
                                      + reasons["clear"].count(NO_CHANGE_ABOVE_ZERO))
    task_file = tmp_path / "tasks.jsonl"
    write_jsonl(report.tasks, task_file)
    assert assert_graded_correctly(task_file, "local") == len(report.tasks)
