"""The docs site's generated pages, built from the code so that they cannot drift.

mkdocs runs this file as a hook (``hooks:`` in mkdocs.yml): :func:`on_files` adds

* ``plugins/<plugin>.md``, one per loaded plugin: its env ids with their description,
  keyword arguments (type and default, from the env's signature), tools and reward;
* ``reference/config.md``: every section of ``agentgym train``'s YAML, from the config
  dataclasses (field, type, default, and the class docstring);
* ``reference/core.md``: every name of ``agentgym.core.__all__``, rendered by mkdocstrings;
* ``reference/cli.md``: every command's ``--help`` (plugins' commands included);

and :func:`pages` returns the same pages as text (the tests read it).

The code's docstrings write cross-references as Sphinx roles (``:class:`Task```,
``:meth:`~agentgym.core.env.AgentEnv.astep```), which read well in ``help()`` but which
mkdocstrings does not understand. :class:`SphinxRoles`, a griffe extension that mkdocs.yml
loads from this file, rewrites each role as it loads the package into an autorefs link to
the object's section of the reference (the name resolved as Python would, from where the
docstring is), or into plain code where that object is not in the reference.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from typing import Any

from griffe import Extension, GriffeLoader, Module, NameResolutionError, Object, load
from mkdocs.structure.files import File, Files


def on_files(files: Files, config: Any) -> Files:
    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files


def pages() -> dict[str, str]:
    """``{path inside docs/: markdown}`` of every generated page."""
    found = {f"plugins/{name}.md": text for name, text in plugin_pages().items()}
    found["reference/config.md"] = config_page()
    found["reference/core.md"] = core_page()
    found["reference/cli.md"] = cli_page()
    return found


def cli_commands() -> list[tuple[str, Any, Any]]:
    """Every command of ``agentgym`` (plugins' included), depth first:
    ``(full name, command, its click context)``."""
    import click

    from agentgym.cli import main

    found = []

    def walk(command: click.Command, ctx: click.Context) -> None:
        found.append((ctx.command_path, command, ctx))
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, click.Context(sub, info_name=name, parent=ctx))

    walk(main, click.Context(main, info_name="agentgym"))
    return found


def cli_page() -> str:
    """Every command's ``--help``, as the command prints it."""
    lines = ["# Command line", "",
             "Generated from the `agentgym` command itself: each command's `--help`,"
             " plugins' commands included.", ""]
    for path, command, ctx in cli_commands():
        lines += [f"## `{path}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(lines)


#: The reference's order: the env and what it plays, then what plugins are made of.
CORE_MODULE_ORDER = ["env", "episode", "task", "tools", "parsers", "reward", "policies",
                     "probes", "sandbox", "harbor", "registry", "contributions", "hookspecs",
                     "errors"]


def core_page() -> str:
    """Every public name of ``agentgym.core`` (its ``__all__``), rendered by mkdocstrings
    from its docstring, under the module that defines it, whose docstring is the contract
    they keep."""
    import agentgym.core

    package = load("agentgym.core", allow_inspection=False)
    by_module: dict[str, list[str]] = {f"agentgym.core.{m}": [] for m in CORE_MODULE_ORDER}
    for name in agentgym.core.__all__:
        module = package[name].canonical_path.rpartition(".")[0]
        by_module.setdefault(module, []).append(name)
    lines = ["# `agentgym.core`", "",
             "The contracts every part shares: envs, tasks, tools, rewards, policies,"
             " sandboxes, the registry and plugins. Each module's docstring states its"
             " contract; under it, the public names it defines, all importable from"
             " `agentgym.core`.", ""]
    for module, names in by_module.items():
        if not names:
            continue
        lines += [f"::: {module}", "    options:", "      heading_level: 2",
                  "      members: false", ""]
        for name in names:
            lines += [f"::: agentgym.core.{name}", "    options:", "      heading_level: 3",
                      ""]
    return "\n".join(lines)


# ---- plugins ------------------------------------------------------------------------------


def plugin_pages() -> dict[str, str]:
    from agentgym.core.plugins import plugin_host

    by_plugin: dict[str, list[Any]] = {}
    for _, entry in sorted(plugin_host().entries("envs").items()):
        by_plugin.setdefault(entry.plugin, []).append(entry.item)
    return {name: _plugin_page(name, specs) for name, specs in sorted(by_plugin.items())}


def _plugin_page(plugin: str, specs: list[Any]) -> str:
    lines = [f"# The `{plugin}` plugin", "",
             f"Generated from the registry: {len(specs)} env id(s).", ""]
    families = [s for s in specs if s.id.startswith("miniwob-")]
    shown = [s for s in specs if not s.id.startswith("miniwob-")]
    lines += ["| env id | what it is |", "|---|---|"]
    lines += [f"| `{s.id}` | {_cell(s.description)} |" for s in shown]
    if families:
        lines.append(f"| `miniwob-<family>` | one per MiniWoB++ family ({len(families)}):"
                     f" {', '.join(f'`{s.id[8:]}`' for s in families)} |")
    seen: set[str] = set()
    for spec in shown + families[:1]:
        factory = spec.load()
        key = f"{getattr(factory, '__module__', '')}.{getattr(factory, '__qualname__', '')}"
        if key in seen:
            continue
        seen.add(key)
        same = [s for s in shown + families if _same_factory(s, key)]
        lines += ["", f"## {', '.join(f'`{s.id}`' for s in same[:6])}"
                  + (f" and {len(same) - 6} more" if len(same) > 6 else ""), ""]
        lines += _env_section(spec, factory)
        presets = [f"`{s.id}`: `{s.kwargs}`" for s in same[:6] if s.kwargs]
        if presets:
            lines += ["Preset keyword arguments: " + "; ".join(presets)
                      + (" (and likewise for the others)" if len(same) > 6 else "") + ".", ""]
    return "\n".join(lines) + "\n"


def _same_factory(spec: Any, key: str) -> bool:
    factory = spec.load()
    return f"{getattr(factory, '__module__', '')}.{getattr(factory, '__qualname__', '')}" == key


def _env_section(spec: Any, factory: Any) -> list[str]:
    from agentgym.core.env_kwargs import env_signature

    lines = [f"`{getattr(factory, '__module__', '')}.{getattr(factory, '__qualname__', '')}`",
             ""]
    doc = inspect.getdoc(factory) or ""
    if doc:
        lines += [convert_roles(doc.split("\n\n")[0].replace("\n", " ")), ""]
    signature = env_signature(spec.id)
    if signature.parameters:
        lines += ["| keyword argument | type | default |", "|---|---|---|"]
        for parameter in signature.parameters.values():
            default = ("required" if parameter.default is inspect.Parameter.empty
                       else f"`{parameter.default!r}`")
            lines.append(f"| `{parameter.name}` | {_cell(_type_name(parameter.annotation))}"
                         f" | {_cell(default)} |")
        lines.append("")
    tools = _tool_names(factory)
    if tools:
        lines += ["Tools: " + ", ".join(f"`{t}`" for t in tools) + ".", ""]
    reward = getattr(factory, "reward", None)
    grades_itself = inspect.isclass(factory) and "grade" in {
        name for klass in factory.__mro__[:-1] if klass.__name__ != "AgentEnv"
        for name in vars(klass)}
    if grades_itself:
        lines += ["Reward: the env grades episodes itself (its `grade` method).", ""]
    elif reward is not None:
        name = reward if isinstance(reward, str) else getattr(reward, "name",
                                                               type(reward).__name__)
        lines += [f"Reward: `{name}`.", ""]
    return lines


def _tool_names(factory: Any) -> list[str]:
    """Every tool the env offers: its toolsets' and its own (``agentgym list tools``)."""
    from agentgym.core.env import AgentEnv

    if not (inspect.isclass(factory) and issubclass(factory, AgentEnv)):
        return []
    return list(dict.fromkeys(tool.name for _, tool in factory.offered_tools()))


# ---- the training config --------------------------------------------------------------------


def config_page() -> str:
    from agentgym.trainers import config

    lines = ["# `agentgym train` configuration", "",
             "Generated from the dataclasses of `agentgym.trainers.config`: every key the"
             " YAML file may hold, its type and default.", ""]
    classes = [obj for _, obj in inspect.getmembers(config, inspect.isclass)
               if dataclasses.is_dataclass(obj) and obj.__module__ == config.__name__]
    root = [c for c in classes if c.__name__ == "TrainConfig"]
    for klass in root + sorted((c for c in classes if c not in root), key=lambda c: c.__name__):
        lines += [f"## `{klass.__name__}`", ""]
        doc = inspect.getdoc(klass) or ""
        if doc:
            lines += [convert_roles(doc), ""]
        if klass is config.RolloutSection:  # its keys are the rollout dataclasses' fields
            rows = [(owner, item) for owner, item in config.rollout_keys().values()]
        else:
            rows = [(klass, item) for item in dataclasses.fields(klass)]
        lines += ["| key | type | default |", "|---|---|---|"]
        for owner, item in rows:
            if item.default is not dataclasses.MISSING:
                default = f"`{item.default!r}`"
            elif item.default_factory is not dataclasses.MISSING:
                default = f"`{item.default_factory()!r}`"
            else:
                default = "required"
            hint = typing.get_type_hints(owner).get(item.name)
            lines.append(f"| `{item.name}` | {_cell(_type_name(hint))} | {_cell(default)} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _type_name(annotation: Any) -> str:
    if annotation is None or annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, type):
        return annotation.__name__
    # "agentgym.trainers.config.TinyModel" reads as "TinyModel", "typing.Any" as "Any".
    return re.sub(r"\b(?:[a-z_][a-z0-9_]*\.)+([A-Za-z_]\w*)", r"\1", str(annotation))


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# ---- Sphinx roles in docstrings ------------------------------------------------------------

#: ``:class:`Task```, ``:meth:`~agentgym.core.env.AgentEnv.astep```,
#: ``:attr:`toolsets <agentgym.core.env.AgentEnv.toolsets>```.
ROLE = re.compile(r":(?:py:)?(?P<role>class|meth|func|mod|attr|data|exc|obj|const):"
                  r"`(?P<body>[^`]+)`")
#: A paragraph that ends in reST's ``::`` before an indented (literal) block.
LITERAL_MARKER = re.compile(r"(?m)(\S)::$(?=\n\s*\n[ \t]+\S)")


def convert_roles(text: str, resolve: typing.Callable[[str], str] | None = None) -> str:
    """``text`` with each Sphinx role written as Markdown: an autorefs link to the object
    (``resolve`` turns the role's target into the object's full path) that renders as
    plain code where the site has no section for it; plain code without ``resolve``.
    reST's ``::`` before a literal block becomes ``:``."""

    def replace(match: re.Match[str]) -> str:
        body = match["body"].strip()
        explicit = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", body)
        if explicit:
            title, target = explicit["title"], explicit["target"].lstrip("~.")
        else:
            target = body.lstrip("~.")
            title = target.rsplit(".", 1)[-1] if body.startswith("~") else target
            if match["role"] in ("meth", "func") and not title.endswith(")"):
                title += "()"
        code = f"`{title}`"
        if resolve is None:
            return code
        return f'<autoref identifier="{resolve(target)}" optional>{code}</autoref>'

    return LITERAL_MARKER.sub(r"\1:", ROLE.sub(replace, text))


def _resolver(obj: Object) -> typing.Callable[[str], str]:
    """Resolves a role's target from ``obj``'s scope, as Sphinx does: its members, then
    its parents' (the class, the module), imports included."""

    def resolve(target: str) -> str:
        head, dot, rest = target.partition(".")
        try:
            found = obj.resolve(head)
        except NameResolutionError:
            return target
        return found + dot + rest

    return resolve


class SphinxRoles(Extension):
    """Rewrites the Sphinx roles of every docstring of a loaded package
    (:func:`convert_roles`)."""

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        pending: list[Object] = [pkg]
        while pending:
            obj = pending.pop()
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = convert_roles(obj.docstring.value, _resolver(obj))
            pending += [m for m in obj.members.values() if not m.is_alias]
