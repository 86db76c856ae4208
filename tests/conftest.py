"""Shared fixtures: installing throw-away plugin distributions onto sys.path, the sandbox
backends (each skipped only where it is absent), and a small git repository in a local
sandbox for the file tools (tests/toolkits, tests/plugins/swe).

Markers (registered in pyproject.toml) say what a test needs, so that a developer can
leave it out: ``slow`` (over ~5 s by nature: whole task sets, soaks, many pages), ``docker``
(a Docker engine), ``browser`` (Chromium), ``gpu`` (a CUDA GPU). ``docker`` and
``browser`` are added here from the fixtures a test uses (:data:`NEEDS`) and from a
``backend`` parameter of ``"docker"``; the others are written on the tests. E.g.
``pytest -m "not slow"``, ``pytest -m "not docker and not browser"``.

**Samples.** Tests over a whole task set (every task valid, every family's page) play a
sample of it (:func:`sample`), drawn afresh each day so that successive CI runs cover the
set, and reproducible from the seed the run's header prints: ``AGENTGYM_TEST_SEED=N``
replays a run's sample, ``AGENTGYM_TEST_FULL=1`` plays every item.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentgym.core.plugins import set_plugin_host
from agentgym.core.registry import open_sandbox
from agentgym.core.sandbox import Sandbox
from agentgym.core.tools import ToolError
from agentgym.toolkits import BashTools, EditorTools


@pytest.fixture
def fake_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Install a real (if tiny) distribution with an ``agentgym`` entry point.

    ``fake_plugin(name, source)`` writes module ``<name>_plugin`` with ``source`` and a
    ``.dist-info`` declaring ``[agentgym] name = <name>_plugin``, on a sys.path entry, so
    ``importlib.metadata`` (and pluggy) discover it exactly as a pip-installed plugin.
    Subprocesses see it through PYTHONPATH.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))

    def install(name: str, source: str) -> Path:
        module = f"{name.replace('-', '_')}_plugin"
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[agentgym]\n{name} = {module}\n")
        set_plugin_host(None)
        return site

    yield install
    set_plugin_host(None)
    for module in [m for m in sys.modules if m.endswith("_plugin")]:
        del sys.modules[module]


#: The marker a test gets for using one of these fixtures (in this folder's conftests or
#: its modules): the docker engine's, and the real browser's.
NEEDS = {
    "docker": frozenset({"engine", "docker"}),
    "browser": frozenset({"chromium", "browser"}),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with what it needs (:data:`NEEDS`): a test run on the ``docker``
    backend (a ``backend`` parameter, of a fixture or of ``parametrize``) needs docker."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        for marker, names in NEEDS.items():
            if fixtures & names:
                item.add_marker(marker)
        if callspec is not None and callspec.params.get("backend") == "docker":
            item.add_marker("docker")


#: Whole sets instead of samples (:func:`sample`).
FULL = os.environ.get("AGENTGYM_TEST_FULL", "") not in ("", "0")
#: The seed of this run's samples: the day, unless given.
SAMPLE_SEED = int(os.environ.get("AGENTGYM_TEST_SEED")
                  or datetime.date.today().strftime("%Y%m%d"))


def pytest_report_header() -> str:
    if FULL:
        return "agentgym samples: whole sets (AGENTGYM_TEST_FULL)"
    return (f"agentgym samples: seed {SAMPLE_SEED} (AGENTGYM_TEST_SEED={SAMPLE_SEED} replays"
            " them, AGENTGYM_TEST_FULL=1 plays whole sets)")


@pytest.fixture
def sample(request: pytest.FixtureRequest) -> Callable[..., list]:
    """``sample(items, k)``: ``k`` of ``items`` in their order, drawn with this run's seed
    and the test's id (every item under ``AGENTGYM_TEST_FULL=1``); the run's header prints
    the seed that plays the same items again. ``sample.full`` says whether whole sets play
    (a soak's length, say)."""

    def draw(items: Any, k: int) -> list:
        items = list(items)
        if FULL or k >= len(items):
            return items
        rng = random.Random(f"{SAMPLE_SEED}/{request.node.nodeid}")
        chosen = sorted(rng.sample(range(len(items)), k))
        return [items[i] for i in chosen]

    draw.full = FULL
    return draw


@pytest.fixture(scope="session")
def agentgym_cli() -> str:
    """The installed ``agentgym`` console script (beside this interpreter, activated or not)."""
    script = Path(sys.executable).with_name("agentgym")
    assert script.exists(), f"the console script {script} is missing: pip install -e ."
    return str(script)


@pytest.fixture(scope="session")
def content_only_template() -> str:
    """A ChatML template that writes each message's content and nothing else, so an
    assistant turn's ``tool_calls`` vanish (as SmolLM2's template does)."""
    return (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


# ---- sandbox backends -------------------------------------------------------------------------

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
    """Each sandbox backend in turn; skipped only where its component is absent."""
    missing = backend_missing(request.param)
    if missing:
        pytest.skip(f"{request.param} backend unavailable: {missing}")
    return request.param


@pytest.fixture
def local() -> None:
    """The local backend, for a test that needs it; skipped only where it is absent."""
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"local backend unavailable: {missing}")


@pytest.fixture
def docker() -> None:
    """The docker backend (an engine), for a test that needs it; skipped only where it is
    absent. A test using it is marked ``docker``."""
    missing = backend_missing("docker")
    if missing:
        pytest.skip(f"docker backend unavailable: {missing}")


# ---- a repository in a local sandbox, for the file tools ------------------------------------

SHAPES = '''\
"""Shapes and their areas."""

from abc import ABC, abstractmethod

UNIT = 1.0


class Shape(ABC):
    """A plane figure."""

    def __init__(self, name: str):
        self.name = name

    @abstractmethod
    def area(self) -> float:
        """The area, in square units."""


class Square(Shape):
    def __init__(self, side: float):
        super().__init__("square")
        self.side = side

    def area(self) -> float:
        return self.side * self.side * UNIT


class Circle(Shape):
    def __init__(self, radius: float):
        super().__init__("circle")
        self.radius = radius

    def area(self) -> float:
        return 3.14159 * self.radius**2


def total_area(shapes: list[Shape]) -> float:
    # the area of all shapes together
    return sum(shape.area() for shape in shapes)
'''

UTIL = '''\
from geometry.shapes import Shape


def area(width, height):
    return width * height


def describe(shape: Shape) -> str:
    label = "area"  # a string and a comment about area, not code
    return f"{shape.name}: {label} {shape.area()}"
'''

SHAPE_TESTS = '''\
from geometry.shapes import Circle, Square, total_area


def test_square():
    assert Square(2).area() == 4


def test_total():
    assert total_area([Square(1), Square(2)]) == 5
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="session")
def sample_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small committed git repository: a package, tests, docs, an ignored build folder,
    a hidden folder and a binary file."""
    repo = tmp_path_factory.mktemp("repo")
    files = {
        "geometry/__init__.py": "from geometry.shapes import Circle, Square\n",
        "geometry/shapes.py": SHAPES,
        "geometry/util.py": UTIL,
        "geometry/deep/er/nested.py": "def nested_helper():\n    return 1\n",
        "tests/test_shapes.py": SHAPE_TESTS,
        "README.md": "# geometry\n\nCompute the area of shapes.\n",
        "notes.txt": "x = 1\ny = 2\nx = 1\n",
        ".gitignore": "build/\n",
        "build/generated.py": "def area():\n    return 0\n",
        ".hidden/secret.py": "SECRET = 1\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / "data.bin").write_bytes(b"\x00\x01area\x00binary")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


@dataclass
class RepoSession:
    """A fresh local sandbox on :func:`sample_repo`, the shared toolkits over it, and the
    event loop their coroutines run on."""

    box: Sandbox
    run: Callable[..., Any]

    def __post_init__(self) -> None:
        self.bash_tools = BashTools(self.box)
        self.editor_tools = EditorTools(self.box)

    def bash(self, command: str) -> str:
        return self.run(self.bash_tools.bash(command))

    def edit(self, **arguments: Any) -> str:
        return self.run(self.editor_tools.str_replace_editor(**arguments))

    def read(self, path: str) -> str:
        return self.run(self.box.read_file(path)).decode()

    def fails(self, call: Callable[..., Any], **arguments: Any) -> str:
        """The ToolError message of a call that must fail."""
        with pytest.raises(ToolError) as caught:
            self.run(call(**arguments))
        return str(caught.value)


@pytest.fixture
def ws(sample_repo: Path) -> Iterator[RepoSession]:
    """A :class:`RepoSession`; skips where the local sandbox cannot run."""
    missing = backend_missing("local")
    if missing:
        pytest.skip(f"local sandbox unavailable: {missing}")
    loop = asyncio.new_event_loop()
    box = loop.run_until_complete(open_sandbox("local", template=str(sample_repo)))
    try:
        yield RepoSession(box, loop.run_until_complete)
    finally:
        loop.run_until_complete(box.close())
        loop.close()
