"""Fixtures shared by the SWE tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentgym.plugins.swe import repo


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
