"""The package's import graph, read from the source: no module imports itself in a circle,
and no plugin imports another plugin's modules.

Every import statement counts, wherever it is written: at the top of a module, inside a
function (a lazy import) or under ``if TYPE_CHECKING``. A lazy import postpones a
dependency, it does not remove it: two modules that import each other, one of them
lazily, still cannot be understood, tested or moved apart, and the order in which they
first run decides whether the lazy side finds the other half-initialised. Breaking a
circle by moving an import into a function is the fix this test refuses.

What does not count: importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``,
but those implicit edges would make every module depend on ``agentgym/__init__.py`` (which
imports the registry) and every circle trivial; a package's own imports count as that
package's.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import agentgym

PACKAGE = Path(agentgym.__file__).parent

def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Each module of agentgym, with the agentgym modules it imports anywhere (read once:
    the tests do not change it)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                # `from a import b` imports the module a.b when there is one, else names of a.
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                             else base for alias in node.names)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one
    circle through it (``a -> b -> a``)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return [_path_through(graph, component) for component in found]


def _path_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One circle inside ``component``, from its first module back to it."""
    start = min(component)
    paths = [[start]]
    while paths:  # breadth first: the shortest circle
        path = paths.pop(0)
        for other in sorted(graph[path[-1]] & component):
            if other == start:
                return [*path, start]
            if other not in path:
                paths.append([*path, other])
    raise AssertionError(f"no circle in {component}")


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "agentgym.core.plugins" in graph["agentgym.core.registry"]  # at the top
    assert "agentgym.plugins.swe.grading" in graph["agentgym.plugins.swe.env"]  # lazy
    assert "agentgym.core.tools" in graph["agentgym.core.hookspecs"]  # TYPE_CHECKING
    assert "agentgym.plugins.swe.repo" in graph["agentgym.plugins.swe.synth"]  # from pkg


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [["a", "b", "c", "a"]]


def test_the_package_imports_without_a_circle():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


#: The built-in plugins' packages (entry points in pyproject.toml besides core's own).
PLUGINS = ("agentgym.sandboxes", *(f"agentgym.plugins.{p.name}" for p in
                                   sorted((PACKAGE / "plugins").iterdir())
                                   if (p / "__init__.py").is_file()))


def plugin_of(module: str) -> str | None:
    return next((p for p in PLUGINS if module == p or module.startswith(p + ".")), None)


def test_no_plugin_imports_another_plugin():
    """Plugins meet through core's contracts (the registry, ``sandbox_backend``,
    ``SandboxImage``), never through each other's modules: the terminal plugin asks the
    sandbox backend what its image offers instead of importing ``agentgym.sandboxes``."""
    assert "agentgym.plugins.swe" in PLUGINS and "agentgym.sandboxes" in PLUGINS
    crossing = [f"{module} imports {other}"
                for module, imported in sorted(import_graph().items())
                if plugin_of(module)
                for other in sorted(imported)
                if plugin_of(other) not in (None, plugin_of(module))]
    assert not crossing, "\n".join(crossing)
