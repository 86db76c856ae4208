"""Fixtures shared by the SWE tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgym.plugins.swe import repo
from agentgym.plugins.swe.instance import SWEInstance


def cache_sharing_builds(root: Path) -> Path:
    """A cache at ``root`` whose sdists, repositories and envs are the default cache's
    (built once, shared by every test run), and whose tasks start empty: synthesis there
    really runs."""
    shared = repo.cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    for name in ("sdists", "repos", "envs"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(shared / name)
    return root


@pytest.fixture(scope="session")
def fresh_task_cache(tmp_path_factory):
    """Makes a new :func:`cache_sharing_builds` cache each call."""
    return lambda: cache_sharing_builds(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def toolz_tasks(tmp_path_factory) -> Path:
    """A task file of three swe-synth tasks of toolz 1.2.0 (synthesis validates mutants in
    local sandboxes, so it needs bubblewrap and root; the first run downloads from PyPI)."""
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("synthesizing tasks needs the local sandbox: bubblewrap"
                    " (apt-get install bubblewrap) and root")
    from agentgym.plugins.swe.synth import synthesize, write_jsonl

    try:
        rows = synthesize("toolz", "1.2.0", 3, progress=False)
    except Exception as e:
        pytest.skip(f"cannot synthesize toolz tasks here (PyPI unreachable?): {e}")
    path = tmp_path_factory.mktemp("swe-synth") / "tasks.jsonl"
    write_jsonl(rows, path)
    return path


@pytest.fixture
def make_instance() -> Callable[..., SWEInstance]:
    """Makes an instance of a small calc repository (no repository behind it); keyword
    arguments override its fields."""

    def make(**overrides: object) -> SWEInstance:
        data: dict[str, object] = {
            "instance_id": "calc__calc-1", "repo": "example/calc", "base_commit": "HEAD",
            "problem_statement": "clamp ignores its upper bound",
            "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp"],
            "PASS_TO_PASS": ["tests/test_ops.py::test_add[a b]",
                             "tests/core/test_a.py::test_x"],
        }
        data.update(overrides)
        return SWEInstance(**data)  # type: ignore[arg-type]

    return make
