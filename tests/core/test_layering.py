"""Layering: ``agentgym.core`` holds the contracts every part shares, so it names none of
the parts built on it, not even in a string (a ``"module:attribute"`` spec or a lazy import
would hide the dependency from import checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentgym

CORE = Path(agentgym.__file__).parent / "core"

#: Packages built on core.
ABOVE_CORE = ("agentgym.rollout", "agentgym.sandboxes", "agentgym.plugins", "agentgym.trainers")


@pytest.mark.parametrize("name", ABOVE_CORE)
def test_core_names_no_package_built_on_it(name: str):
    sources = sorted(CORE.rglob("*.py"))
    assert sources, f"no sources under {CORE}"
    found = [f"{path.relative_to(CORE.parent)}:{number}: {line.strip()}"
             for path in sources
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if name in line]
    assert not found, f"agentgym.core must not name {name}:\n" + "\n".join(found)
