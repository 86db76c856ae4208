"""Optional extras added for interchange (``mcp``, ``atif``, ``openenv``) leave the training
stack as the ``all`` install resolves it: pip's dry-run resolution of the original extras,
with and without each new one, gives the same torch, transformers, trl and pydantic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The extras ``all`` held before the interchange ones.
ORIGINAL = "swe,terminal,web,memory,embeddings,train,ray,agents"
#: Extras added since, each checked on its own.
NEW = ["mcp", "atif", "openenv"]
WATCHED = ("torch", "transformers", "trl", "pydantic")


def resolved(extras: str, tmp_path: Path) -> dict[str, str]:
    """Versions pip would install for ``.[extras]`` from scratch (torch pinned as CI pins
    it), as a dry run."""
    report = tmp_path / f"{extras.replace(',', '-')}.json"
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


@pytest.fixture(scope="module")
def before(tmp_path_factory) -> dict[str, str]:
    """The original extras' resolution, made once for every new extra (each takes minutes)."""
    return resolved(ORIGINAL, tmp_path_factory.mktemp("original"))


@pytest.mark.slow
@pytest.mark.parametrize("extra", NEW)
def test_a_new_extra_leaves_the_training_stack_as_it_was(extra, before, tmp_path):
    after = resolved(f"{ORIGINAL},{extra}", tmp_path)
    assert all(name in before for name in WATCHED), sorted(before)
    assert {n: after.get(n) for n in WATCHED} == {n: before[n] for n in WATCHED}


def test_all_holds_the_original_extras_and_the_new_ones():
    try:
        import tomllib
    except ImportError:  # Python 3.10: the terminal extra installs tomli
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    held = extras["all"][0].split("[")[1].rstrip("]").split(",")
    assert held == [*ORIGINAL.split(","), *NEW]
