"""Finding and loading plugins: pluggy over the entry-point group ``agentgym``.

Every plugin, built-in or third-party, is a module named by an entry point in the group
``agentgym``; it is loaded with pluggy's ``load_setuptools_entrypoints``, one entry point
at a time, so that a plugin that fails to import is reported (a
:class:`PluginLoadWarning` naming it) and skipped while every other plugin still loads.

Two environment variables control loading (comma-separated entry-point names):

* ``AGENTGYM_PLUGINS``: load only these (the ``core`` plugin always loads: it provides the
  built-in parsers and policies everything else relies on).
* ``AGENTGYM_DISABLE_PLUGINS``: do not load these.

``agentgym list plugins`` shows what loaded, from which distribution, and what was skipped.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from agentgym.core import hookspecs
from agentgym.core.errors import DuplicateIdError, UnknownIdError

GROUP = "agentgym"
CORE_PLUGIN = "core"


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or its hook raised; it was skipped."""


@dataclass(frozen=True)
class Kind:
    """One kind of contribution: the hook that provides it and how its id is read."""

    hook: str
    id_of: Callable[[Any], str] = lambda item: item.id
    description_of: Callable[[Any], str] = lambda item: item.description


#: Every kind a plugin can contribute, by the name ``agentgym list`` uses.
KINDS: dict[str, Kind] = {
    "envs": Kind("agentgym_envs"),
    "tools": Kind("agentgym_tools", id_of=lambda t: t.name),
    "rewards": Kind("agentgym_rewards"),
    "task_sources": Kind("agentgym_task_sources"),
    "sandboxes": Kind("agentgym_sandboxes"),
    "policies": Kind("agentgym_policies"),
    "parsers": Kind("agentgym_tool_call_parsers"),
    "commands": Kind(
        "agentgym_cli_commands",
        id_of=lambda c: c.name,
        description_of=lambda c: (c.help or c.short_help or "").strip().split("\n")[0],
    ),
}


@dataclass(frozen=True)
class Entry:
    """A contribution, with the plugin that made it."""

    id: str
    item: Any
    plugin: str
    description: str


@dataclass
class PluginInfo:
    """A plugin that was found: where it came from and whether it loaded."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: str = "loaded"  # loaded | failed | disabled
    error: str | None = None


@dataclass
class PluginHost:
    """The loaded plugins and everything they contribute, by kind and id.

    Args:
        plugins: extra ``(name, plugin object)`` pairs to register directly (tests, apps).
        entry_points: load the ``agentgym`` entry points found in the environment.
        environ: where ``AGENTGYM_PLUGINS`` / ``AGENTGYM_DISABLE_PLUGINS`` are read.
    """

    plugins: Iterable[tuple[str, Any]] = ()
    entry_points: bool = True
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def __post_init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._entries: dict[str, dict[str, Entry]] = {}
        if self.entry_points:
            self._load_entry_points()
        for name, plugin in self.plugins:
            self.pm.register(plugin, name=name)
            self.infos[name] = PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))

    def _load_entry_points(self) -> None:
        allowed = _names(self.environ.get("AGENTGYM_PLUGINS"))
        disabled = _names(self.environ.get("AGENTGYM_DISABLE_PLUGINS")) - {CORE_PLUGIN}
        for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
            info = PluginInfo(ep.name, ep.value)
            if ep.dist is not None:
                info.distribution, info.version = ep.dist.metadata["Name"], ep.dist.version
            self.infos.setdefault(ep.name, info)
            skip = ep.name in disabled or (allowed and ep.name not in allowed | {CORE_PLUGIN})
            if skip:
                info.status = "disabled"
                self.pm.set_blocked(ep.name)
                continue
            try:
                self.pm.load_setuptools_entrypoints(GROUP, name=ep.name)
            except Exception as e:
                self._fail(info, f"import failed: {type(e).__name__}: {e}")

    def _fail(self, info: PluginInfo, error: str) -> None:
        info.status, info.error = "failed", error
        warnings.warn(
            f"agentgym plugin {info.name!r} ({info.module}) was skipped: {error}. The other"
            f" plugins loaded; to silence this, fix or uninstall"
            f" {info.distribution or info.module}, or set AGENTGYM_DISABLE_PLUGINS={info.name}.",
            PluginLoadWarning,
            stacklevel=3,
        )

    def entries(self, kind: str) -> dict[str, Entry]:
        """Every contribution of ``kind`` (a key of :data:`KINDS`), by id."""
        if kind not in KINDS:
            raise UnknownIdError("component kind", kind, KINDS, "agentgym list --help")
        if kind not in self._entries:
            self._entries[kind] = self._collect(kind, KINDS[kind])
        return self._entries[kind]

    def _collect(self, kind: str, spec: Kind) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        caller = getattr(self.pm.hook, spec.hook)
        # Call each plugin's implementation alone, to know who contributed what.
        for impl in caller.get_hookimpls():  # in registration order
            try:
                items = impl.function() or []
            except Exception as e:
                info = self.infos.setdefault(impl.plugin_name, PluginInfo(impl.plugin_name, "?"))
                self._fail(info, f"hook {spec.hook} raised {type(e).__name__}: {e}")
                continue
            for item in items:
                item_id = spec.id_of(item)
                if item_id in found:
                    raise DuplicateIdError(
                        _singular(kind), item_id, found[item_id].plugin, impl.plugin_name
                    )
                found[item_id] = Entry(item_id, item, impl.plugin_name, spec.description_of(item))
        return found

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register an in-process plugin object (a module or class with hook functions)."""
        name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin)}"
        self.pm.register(plugin, name=name)
        self._entries.clear()
        try:
            for kind in KINDS:  # a clash is refused now, not at some later lookup
                self.entries(kind)
        except DuplicateIdError:
            self.pm.unregister(plugin)
            self._entries.clear()
            raise
        self.infos[name] = PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))
        return name

    def get(self, kind: str, item_id: str) -> Any:
        """The contribution ``item_id`` of ``kind``, or :class:`UnknownIdError`."""
        entries = self.entries(kind)
        if item_id not in entries:
            raise UnknownIdError(
                _singular(kind), item_id, entries, f"agentgym list {kind}"
            )
        return entries[item_id].item

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin found, loaded or not, sorted by name."""
        return sorted(self.infos.values(), key=lambda i: i.name)


def _names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


_host: PluginHost | None = None


def plugin_host() -> PluginHost:
    """The process-wide :class:`PluginHost`, loaded on first use."""
    global _host
    if _host is None:
        _host = PluginHost()
    return _host


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin from code, without an entry point (notebooks, scripts, tests).

    It joins the plugins found through entry points, with the same duplicate-id checks, and
    its envs become available to ``agentgym.make`` and ``gymnasium.make``. Envs made in
    other processes (Ray workers) only see entry-point plugins: publish a package for those.
    """
    from agentgym.core.registry import register_with_gymnasium

    registered = plugin_host().register(plugin, name)
    register_with_gymnasium()
    return registered


def set_plugin_host(host: PluginHost | None) -> PluginHost | None:
    """Replace the process-wide host (``None``: reload on next use); returns the old one."""
    global _host
    old, _host = _host, host
    return old


def _singular(kind: str) -> str:
    """``policies`` -> ``policy``, ``tool_call_parsers`` -> ``tool call parser``."""
    word = kind[:-3] + "y" if kind.endswith("ies") else kind.rstrip("s")
    return word.replace("_", " ")
