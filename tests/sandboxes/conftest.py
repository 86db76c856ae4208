"""Fixtures for sandbox tests: backends that skip only when their component is absent."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from agentgym.core.sandbox import Sandbox, SandboxLimits, open_sandbox

BACKENDS = ["local", "docker"]


def backend_missing(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or None when it can."""
    if backend == "local":
        if shutil.which("bwrap") is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        if os.geteuid() != 0:
            return "the local sandbox needs root"
        return None
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as e:
        return f"no Docker engine reachable ({type(e).__name__}): start dockerd"
    return None


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    missing = backend_missing(request.param)
    if missing:
        pytest.skip(f"{request.param} backend unavailable: {missing}")
    return request.param


@pytest.fixture
def run() -> Callable[..., Any]:
    """Run a coroutine to completion (one event loop per test)."""
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


@pytest.fixture
def make_sandbox(backend: str, run: Callable[..., Any]) -> Callable[..., Sandbox]:
    """Open sandboxes of ``backend``; closes them after the test, then proves the host is
    unharmed by opening one more and running a command in it."""
    boxes: list[Sandbox] = []

    def make(**kwargs: Any) -> Sandbox:
        box = run(open_sandbox(backend, **kwargs))
        boxes.append(box)
        return box

    yield make
    for box in boxes:
        run(box.close())
    after = run(open_sandbox(backend, limits=SandboxLimits(timeout_s=30)))
    try:
        assert run(after.exec("echo ok")).output == "ok\n", "the next sandbox does not work"
    finally:
        run(after.close())


@pytest.fixture
def host_processes() -> Callable[[str], list[str]]:
    """Host processes whose command line matches a pattern (pgrep -af)."""

    def find(pattern: str) -> list[str]:
        out = subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True)
        return [line for line in out.stdout.splitlines() if "pgrep" not in line]

    return find
