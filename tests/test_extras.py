"""Optional extras added for interchange (``mcp``, ``atif``, ``openenv``) leave the training
stack as the ``all`` install resolves it: pip's dry-run resolution of the original extras,
with and without the new ones, gives the same torch, transformers, trl and pydantic.

The new extras are resolved together, as ``all`` installs them (one resolution takes
minutes); when they move the stack, the failure names them, and resolving
``ORIGINAL,<extra>`` for each finds the one."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The extras ``all`` held before the interchange ones.
ORIGINAL = "swe,terminal,web,memory,embeddings,train,ray,agents"
#: Extras added since, resolved together.
NEW = ["mcp", "atif", "openenv"]
WATCHED = ("torch", "transformers", "trl", "pydantic")


def resolved(extras: str, tmp_path: Path) -> dict[str, str]:
    """Versions pip would install for ``.[extras]`` from scratch (torch pinned as CI pins
    it), as a dry run."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
         "--disable-pip-version-check", "--report", str(report), f"{ROOT}[{extras}]",
         "torch==2.13.0"], capture_output=True, text=True, timeout=900)
    if done.returncode != 0 and ("Could not fetch" in done.stderr
                                 or "NewConnectionError" in done.stderr):
        pytest.skip(f"the package index is unreachable: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(report.read_text())["install"]
    return {row["metadata"]["name"].lower(): row["metadata"]["version"] for row in rows}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_new_extras_leave_the_training_stack_as_it_was(tmp_path):
    # The two resolutions wait on the index mostly: side by side.
    with ThreadPoolExecutor(2) as pool:
        original = pool.submit(resolved, ORIGINAL, tmp_path / "original")
        everything = pool.submit(resolved, ",".join([ORIGINAL, *NEW]), tmp_path / "all")
        before, after = original.result(), everything.result()
    assert all(name in before for name in WATCHED), sorted(before)
    assert {n: after.get(n) for n in WATCHED} == {n: before[n] for n in WATCHED}, \
        f"one of the extras {NEW} moves the training stack"


def test_all_holds_the_original_extras_and_the_new_ones():
    try:
        import tomllib
    except ImportError:  # Python 3.10: the terminal extra installs tomli
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    held = extras["all"][0].split("[")[1].rstrip("]").split(",")
    assert held == [*ORIGINAL.split(","), *NEW]
