"""Layering: ``agentgym.core`` holds the contracts every part shares, so it names none of
the parts built on it, not even in a string (a ``"module:attribute"`` spec or a lazy import
would hide the dependency from import checks), and its modules import each other without
a cycle (lazy and type-checking imports count)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agentgym

CORE = Path(agentgym.__file__).parent / "core"

#: Packages built on core.
ABOVE_CORE = ("agentgym.rollout", "agentgym.sandboxes", "agentgym.plugins", "agentgym.trainers",
              "agentgym.toolkits", "agentgym.interchange")


@pytest.mark.parametrize("name", ABOVE_CORE)
def test_core_names_no_package_built_on_it(name: str):
    sources = sorted(CORE.rglob("*.py"))
    assert sources, f"no sources under {CORE}"
    found = [f"{path.relative_to(CORE.parent)}:{number}: {line.strip()}"
             for path in sources
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if name in line]
    assert not found, f"agentgym.core must not name {name}:\n" + "\n".join(found)


def core_imports() -> dict[str, set[str]]:
    """Each core module's imports of other core modules, wherever they are written."""
    graph: dict[str, set[str]] = {}
    for path in sorted(CORE.glob("*.py")):
        name = path.stem
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "agentgym.core":
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "agentgym.core."):
                found.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                found.update(a.name.split(".")[2] for a in node.names
                             if a.name.startswith("agentgym.core."))
        graph[name] = {m for m in found if (CORE / f"{m}.py").exists() and m != name}
    return graph


def test_core_has_no_import_cycle():
    graph = core_imports()
    assert graph["registry"] >= {"plugins", "contributions"}  # the scan sees imports
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module):], module]
            raise AssertionError("import cycle in agentgym.core: " + " -> ".join(cycle))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
