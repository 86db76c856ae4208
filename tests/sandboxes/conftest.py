"""Fixtures for sandbox tests (the ``backend`` fixture, parametrized over the backends and
skipped only when one is absent, is in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import Sandbox, SandboxError, SandboxLimits


@pytest.fixture(scope="module")
def engine():
    """The docker client, with the default image built; skips where no engine runs."""
    pytest.importorskip("docker", reason="the docker SDK is not installed: pip install docker")
    from agentgym.sandboxes.image import DEFAULT_IMAGE, docker_client, ensure_image

    try:
        client = docker_client()
    except SandboxError as error:
        pytest.skip(f"no Docker engine reachable: {error}")
    ensure_image(DEFAULT_IMAGE, client)
    return client


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
