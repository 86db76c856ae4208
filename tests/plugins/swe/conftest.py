"""Fixtures shared by the SWE tests."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import tarfile
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


STANDIN_PYPROJECT = '''\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{{version}}"

[tool.setuptools]
packages = ["{package}"]
'''


def standin_sdist(name: str, files: dict[str, str]) -> tuple[str, str]:
    """A tiny project built here as an sdist, put where :func:`repo.download_sdist` finds
    it (the default cache): ``files`` (its package ``name`` with ``_`` for ``-``, and its
    tests) plus a pyproject and PKG-INFO. Its version is a digest of its files, so a cached
    build is never stale. Returns ``(name, version)``; skips when its env cannot be built
    (the env installs pytest from PyPI)."""
    package = name.replace("-", "_")
    pyproject = STANDIN_PYPROJECT.format(name=name, package=package)
    digest = hashlib.sha256(("".join(files.values()) + pyproject).encode())
    version = f"1.0.{int(digest.hexdigest()[:7], 16)}"
    every = {**files, "pyproject.toml": pyproject.format(version=version),
             "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    folder = repo.cache_dir() / "sdists" / f"{name}-{version}"
    archive = folder / f"{package}-{version}.tar.gz"
    if not archive.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz") as tar:
            for path, text in sorted(every.items()):
                content = text.encode()
                info = tarfile.TarInfo(f"{package}-{version}/{path}")
                info.size, info.mode, info.mtime = len(content), 0o644, 946684800
                tar.addfile(info, io.BytesIO(content))
        staging = archive.with_name(archive.name + f".{os.getpid()}")
        staging.write_bytes(data.getvalue())
        staging.replace(archive)
    ready_or_reachable(name, version)
    return name, version


def ready_or_reachable(package: str, version: str) -> None:
    """Skip unless ``package==version``'s env is built or PyPI can be reached to build it."""
    env = repo.cache_dir() / "envs" / f"{repo.canonical(package)}-{version}" / repo.ENV_READY
    if env.is_file():
        return
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError as error:
        pytest.skip(f"PyPI is unreachable ({error}) and {package}=={version} is not cached")


SCALES_MODULE = '''\
"""Small numeric helpers whose tests check values."""


def scale(values, factor):
    out = []
    for value in values:
        out.append(value * factor)
    return out


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def mean(values):
    total = 0
    for value in values:
        total += value
    return total / len(values)
'''
SCALES_TESTS = '''\
from scales_standin import clamp, mean, scale


def test_scale():
    assert scale([1, 2, 3], 3) == [3, 6, 9]


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_mean():
    assert mean([1, 2, 3, 6]) == 3
'''


@pytest.fixture(scope="session")
def scales_standin() -> tuple[str, str]:
    """A three-function project whose tests check values: many mutants per function, a
    suite that runs in a blink (``(name, version)``)."""
    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("synthesizing tasks needs the local sandbox: bubblewrap"
                    " (apt-get install bubblewrap) and root")
    return standin_sdist("scales-standin", {"scales_standin/__init__.py": SCALES_MODULE,
                                            "tests/test_scales.py": SCALES_TESTS})


@pytest.fixture(scope="session")
def make_standin() -> Callable[[str, dict[str, str]], tuple[str, str]]:
    """:func:`standin_sdist`."""
    return standin_sdist


@pytest.fixture(scope="session")
def require_project() -> Callable[[str, str], None]:
    """:func:`ready_or_reachable`."""
    return ready_or_reachable


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
