"""Which paths of an agent's diff belong to the task, not the agent, when a SWE task is graded.

Grading (:func:`agentgym.plugins.swe.grading.grade`) applies the agent's diff to a fresh
checkout at ``base_commit``, minus every file that decides *how* the tests run rather than
*what* the code does. Those files are the task's, restored as the task has them, exactly as
the SWE-bench harness applies the model patch and then the test patch in a fresh container:

* **tests** (:func:`~agentgym.plugins.swe.instance.is_test_path`, the files the
  ``test_patch`` touches, the files named by the listed test ids): the checks themselves.
* **test-runner configuration**: ``pytest.ini``, ``.pytest.ini``, ``pyproject.toml``,
  ``setup.cfg``, ``tox.ini`` (each can hold pytest's options, ``addopts`` with ``-p PLUGIN``
  included, and pytest reads the nearest one *anywhere* above the tests it runs),
  ``conftest.py`` anywhere, and pytest's ``.pytest_cache``.
* **interpreter start-up hooks**: ``sitecustomize.py`` and ``usercustomize.py`` anywhere
  (the checkout is on ``sys.path``, so one there runs before the test runner), ``*.pth``.
* **packaging metadata**: ``*.dist-info``, ``*.egg-info`` and ``*.egg`` folders,
  ``*.egg-link``, ``entry_points.txt``, ``PKG-INFO``, ``MANIFEST.in``, and ``setup.py``. A
  distribution's metadata on ``sys.path`` can declare a ``pytest11`` entry point, a plugin
  pytest loads at start-up; ``setup.py`` is run before the tests by the harness of some
  repositories (Django <= 2.2 and requests reinstall the checkout) and by any
  ``pip install .``. SWE-bench gold patches rarely touch ``setup.py`` (dependency pins,
  which a prebuilt environment ignores anyway), so it is restored too.
* **build artefacts**: ``__pycache__`` folders and ``*.pyc`` / ``*.pyo`` files (an
  unchecked hash-based ``.pyc`` is imported instead of its source).
* **modules that shadow the runner**: a *new* top-level module or package at an import
  root (the repository's root or ``src/``) named like a module of the standard library or
  of the test runner and its dependencies (:data:`RUNNER_MODULES`): the checkout comes
  first on ``sys.path``, so ``pytest.py`` or ``_pytest/`` there would *be* the test runner.
  Files the repository already has are not new: the pytest repository edits its own
  ``src/_pytest``.
* **the runner's own script**: a repository path the test command runs
  (``bin/test``, ``./tests/runtests.py``).

No legitimate fix needs one of these: a bug fix is a change to the code under test. A gold
patch that also touches one (a version bump in ``pyproject.toml``) is graded without that
part, as the agent's is.

:func:`task_owned` gives the reason a path is the task's, or None.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import PurePosixPath

from agentgym.plugins.swe.instance import is_test_path

#: Why a path is the task's (the values :func:`task_owned` returns).
TEST_FILE = "test file"
RUNNER_CONFIG = "test-runner configuration"
STARTUP_HOOK = "interpreter start-up hook"
PACKAGING = "packaging metadata"
BUILD_ARTEFACT = "build artefact"
SHADOWS = "shadows a module the test runner imports"
RUNNER_SCRIPT = "the test runner's own script"

#: Modules of the test runner and its dependencies that a new top-level module of the
#: checkout must not shadow (with the standard library's, :data:`sys.stdlib_module_names`).
RUNNER_MODULES = frozenset({
    "pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "exceptiongroup",
    "tomli", "colorama", "pygments", "attr", "attrs", "more_itertools", "atomicwrites",
    "six", "importlib_metadata", "zipp", "typing_extensions", "coverage", "setuptools",
    "pkg_resources", "_distutils_hack", "pip", "wcwidth", "hypothesis", "xdist",
    "pytest_cov", "nose", "tox", "virtualenv", "conda",
})
SHADOWED = RUNNER_MODULES | frozenset(sys.stdlib_module_names) | {"sitecustomize",
                                                                  "usercustomize"}
#: Folders whose top-level modules are importable as such (the import roots of a checkout).
IMPORT_ROOTS = ("", "src")

_CONFIG_NAMES = frozenset({"pytest.ini", ".pytest.ini", "pyproject.toml", "setup.cfg",
                           "tox.ini", "conftest.py"})
_STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py"})
_PACKAGING_NAMES = frozenset({"entry_points.txt", "pkg-info", "manifest.in", "setup.py"})
_PACKAGING_DIR = re.compile(r".*\.(dist-info|egg-info|egg)$", re.IGNORECASE)
_MODULE_FILE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_.-]*)?\.(py|pyc|so|pyd)$")


def task_owned(path: str, *, new: bool = False,
               existing: set[str] | frozenset[str] | None = None) -> str | None:
    """Why ``path`` (relative to the repository root) is the task's and is left out of the
    agent's diff when grading (see the module docstring), or None when it is the agent's.

    Args:
        new: the diff creates the file (only a new module can shadow the runner).
        existing: the entries of the import roots at ``base_commit`` (``name`` and
            ``src/name``): a new file inside one of them adds to a module the repository
            already has. None: nothing is known to exist.
    """
    parts = PurePosixPath(path).parts
    if not parts:
        return None
    name = parts[-1]
    lower = name.lower()
    folders = [p.lower() for p in parts[:-1]]
    if is_test_path(path):
        return TEST_FILE
    if lower in _CONFIG_NAMES or ".pytest_cache" in folders:
        return RUNNER_CONFIG
    if lower in _STARTUP_NAMES or lower.endswith(".pth"):
        return STARTUP_HOOK
    if (lower in _PACKAGING_NAMES or lower.endswith(".egg-link")
            or any(_PACKAGING_DIR.match(p) for p in parts)):
        return PACKAGING
    if "__pycache__" in folders or lower.endswith((".pyc", ".pyo")):
        return BUILD_ARTEFACT
    if new and _shadowed_module(parts, existing or frozenset()) is not None:
        return SHADOWS
    return None


def _shadowed_module(parts: tuple[str, ...], existing: set[str] | frozenset[str],
                     ) -> str | None:
    """The module name ``parts`` would define at an import root, when it shadows one the
    runner imports and the repository did not have it."""
    for root in IMPORT_ROOTS:
        depth = len(PurePosixPath(root).parts) if root else 0
        if len(parts) <= depth or tuple(parts[:depth]) != PurePosixPath(root).parts:
            continue
        top, rest = parts[depth], parts[depth + 1:]
        if "/".join((*parts[:depth], top)) in existing:
            continue
        match = _MODULE_FILE.match(top)
        module = top if rest else (match.group(1) if match else None)
        if module in SHADOWED:
            return module
    return None


def runner_script(command: str, arguments: list[str] | tuple[str, ...] = ()) -> str | None:
    """The repository path a test command runs as its program (``bin/test``,
    ``./tests/runtests.py``): the first word that is a relative path with a folder, not an
    assignment, an option or one of the test ``arguments``; None when there is none."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for word in words:
        if "=" in word.split("/")[0]:  # an assignment, FOO=bar
            continue
        if word.startswith(("-", "/", "$", "{", "~")) or "/" not in word:
            continue
        return None if word in arguments else word.removeprefix("./")
    return None


__all__ = [
    "BUILD_ARTEFACT",
    "IMPORT_ROOTS",
    "PACKAGING",
    "RUNNER_CONFIG",
    "RUNNER_MODULES",
    "RUNNER_SCRIPT",
    "SHADOWED",
    "SHADOWS",
    "STARTUP_HOOK",
    "TEST_FILE",
    "runner_script",
    "task_owned",
]
