"""Finding and loading plugins: pluggy over the entry-point group ``agentgym``.

Every plugin, built-in or third-party, is a module named by an entry point in the group
``agentgym``, loaded and registered with pluggy one entry point at a time, so that one
broken plugin never disables the others:

* a plugin that fails to import, or whose hook raises, is skipped with a
  :class:`PluginLoadWarning` naming it;
* an id that an earlier plugin already contributed (two plugins registering the env
  ``calculator``) is skipped in the later plugin with a :class:`PluginLoadWarning` naming
  both; the later plugin's other contributions still load. Plugins load in a fixed order:
  agentgym's own first, then the others by entry-point name, so an installed package
  cannot take over a built-in id;
* an id ``NAME/...`` is plugin ``NAME``'s alone: another plugin's contribution of one is
  skipped with a warning (while a plugin of that name is installed), so that a plugin
  loaded earlier cannot take, say, the reward ``word-reverse/exact`` that the plugin
  ``word-reverse``'s env grades with;
* an entry-point name that a second distribution also uses loads from the first one found
  only, with a warning.

A plugin registered from code (:func:`~agentgym.core.registry.register_plugin`) is
different: the caller is there to fix a clash, so a duplicate id is refused with
:class:`~agentgym.core.errors.DuplicateIdError` and the plugin is not registered.

Two environment variables control loading (comma-separated entry-point names):

* ``AGENTGYM_PLUGINS``: load only these.
* ``AGENTGYM_DISABLE_PLUGINS``: do not load these.

Neither applies to the :data:`BASE_PLUGINS`, which always load: ``core`` (the built-in
parsers and text-level policies) and ``policies`` (the token-level backends ``hf``,
``openai``, ``vllm``), which everything else relies on and which import nothing heavy. A
lookup of an unknown id names the plugins these variables left out, since one of them may
provide it.

``agentgym list plugins`` shows what loaded, from which distribution, and what was skipped
and why (whole plugins and single contributions).

A plugin may add hooks of its own (as pytest's ``pytest_addhooks``): its
``agentgym_addhooks(pluginmanager)`` runs as soon as the plugin is registered, before any
contribution is collected, and calls ``pluginmanager.add_hookspecs(module)`` for its specs
and :meth:`PluginManager.add_kind` for each hook that contributes ids, which then counts
like core's :data:`KINDS` (``agentgym list KIND``, ``registry.get(KIND, id)``, duplicate
checks). Other plugins implement those hooks as they do core's.
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
from agentgym.core.errors import (
    DuplicateIdError,
    InvalidArgumentError,
    PicklableException,
    UnknownIdError,
)

GROUP = "agentgym"
#: agentgym's own plugins that load whatever the environment variables say.
BASE_PLUGINS = frozenset({"core", "policies"})


class PluginLoadWarning(PicklableException, UserWarning):
    """A plugin, or one of its contributions, was skipped: it failed to import, its hook
    raised, or it contributed an id another plugin had already contributed."""


@dataclass(frozen=True)
class Kind:
    """One kind of contribution: the hook that provides it and how its id is read."""

    hook: str
    id_of: Callable[[Any], str] = lambda item: item.id
    description_of: Callable[[Any], str] = lambda item: item.description


#: The kinds core declares, by the name ``agentgym list`` uses; plugins add their own
#: (:meth:`PluginManager.add_kind`), so a host's kinds are :attr:`PluginHost.kinds`.
KINDS: dict[str, Kind] = {
    "envs": Kind("agentgym_envs"),
    "tools": Kind("agentgym_tools", id_of=lambda t: t.name),
    "rewards": Kind("agentgym_rewards"),
    "task_sources": Kind("agentgym_task_sources"),
    "sandboxes": Kind("agentgym_sandboxes", description_of=lambda backend: (
        f"{backend.description} Spec fields: {', '.join(sorted(backend.supports))}."
        if getattr(backend, "supports", None) else backend.description)),
    "policies": Kind("agentgym_policies"),
    "parsers": Kind("agentgym_tool_call_parsers"),
    "harnesses": Kind("agentgym_harnesses"),
    "probes": Kind("agentgym_exploit_probes",
                   description_of=lambda probe: f"[{probe.attack}] {probe.description}"),
    "commands": Kind(
        "agentgym_cli_commands",
        id_of=lambda c: c.name,
        description_of=lambda c: (c.help or c.short_help or "").strip().split("\n")[0],
    ),
}


class PluginManager(pluggy.PluginManager):
    """pluggy's plugin manager with core's hookspecs, and the kinds of contribution the
    host collects: what a plugin's ``agentgym_addhooks(pluginmanager)`` gets."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self.kinds: dict[str, Kind] = dict(KINDS)

    def add_kind(self, name: str, hook: str, *,
                 id_of: Callable[[Any], str] | None = None,
                 description_of: Callable[[Any], str] | None = None) -> None:
        """Collect the hook ``hook`` (its spec added first, with :meth:`add_hookspecs`;
        it takes no arguments and returns a list) as the kind ``name``: ids read by
        ``id_of`` (default ``item.id``), descriptions by ``description_of`` (default
        ``item.description``)."""
        caller = getattr(self.hook, hook, None)
        if caller is None or caller.spec is None:
            raise InvalidArgumentError(
                f"add_kind({name!r}, {hook!r}): {hook} has no hookspec; call"
                " pluginmanager.add_hookspecs(module) with its spec first")
        if name in self.kinds:
            raise InvalidArgumentError(
                f"add_kind({name!r}, {hook!r}): the kind {name!r} is already collected from"
                f" {self.kinds[name].hook}; pick another name")
        defaults = Kind(hook)
        self.kinds[name] = Kind(hook, id_of or defaults.id_of,
                                description_of or defaults.description_of)


@dataclass(frozen=True)
class Entry:
    """A contribution, with the plugin that made it."""

    id: str
    item: Any
    plugin: str
    description: str


@dataclass(frozen=True)
class SkippedEntry:
    """A contribution of a loaded plugin that was left out, and why."""

    kind: str  # singular: "env", "policy", ...
    id: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id, "reason": self.reason}


@dataclass
class PluginInfo:
    """A plugin that was found: where it came from, whether it loaded, what was skipped."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    status: str = "loaded"  # loaded | failed | disabled | shadowed
    error: str | None = None
    skipped: list[SkippedEntry] = field(default_factory=list)

    def describe(self) -> str:
        """``'name' (distribution)``, for messages."""
        source = self.distribution or self.module
        return f"{self.name!r} ({source})" if source and source != "?" else repr(self.name)


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
        self.pm = PluginManager()
        self.infos: dict[str, PluginInfo] = {}
        self._shadowed: list[PluginInfo] = []
        self._entries: dict[str, dict[str, Entry]] = {}
        if self.entry_points:
            self._load_entry_points()
        for name, plugin in self.plugins:
            self.infos[name] = PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))
            self._register(plugin, self.infos[name])

    @property
    def kinds(self) -> dict[str, Kind]:
        """Every kind collected: core's :data:`KINDS` and those plugins added."""
        return self.pm.kinds

    def _load_entry_points(self) -> None:
        allowed = _names(self.environ.get("AGENTGYM_PLUGINS"))
        disabled = _names(self.environ.get("AGENTGYM_DISABLE_PLUGINS")) - BASE_PLUGINS
        for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=_load_order):
            info = PluginInfo(ep.name, ep.value)
            if ep.dist is not None:
                info.distribution, info.version = ep.dist.metadata["Name"], ep.dist.version
            if ep.name in self.infos:
                self._shadow(info, self.infos[ep.name])
                continue
            self.infos[ep.name] = info
            skip = ep.name in disabled or (allowed and ep.name not in allowed | BASE_PLUGINS)
            if skip:
                info.status = "disabled"
                self.pm.set_blocked(ep.name)
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                self._fail(info, f"import failed: {type(e).__name__}: {e}")
                continue
            self._register(plugin, info)

    def _register(self, plugin: Any, info: PluginInfo) -> None:
        """Register ``plugin`` and run its ``agentgym_addhooks``; a plugin whose hooks
        cannot be added is unregistered and reported."""
        self.pm.register(plugin, name=info.name)
        try:
            self._add_hooks(info.name)
        except Exception as e:
            self.pm.unregister(plugin)
            self._fail(info, f"hook agentgym_addhooks raised {type(e).__name__}: {e}")

    def _add_hooks(self, name: str) -> None:
        """Run plugin ``name``'s ``agentgym_addhooks`` (alone: its errors are its own)."""
        for impl in self.pm.hook.agentgym_addhooks.get_hookimpls():
            if impl.plugin_name == name:
                impl.function(pluginmanager=self.pm)

    def _fail(self, info: PluginInfo, error: str) -> None:
        info.status, info.error = "failed", error
        _warn(
            f"agentgym plugin {info.describe()} was skipped: {error}. The other plugins"
            f" loaded; to silence this, fix or uninstall {info.distribution or info.module},"
            f" or set AGENTGYM_DISABLE_PLUGINS={info.name}."
        )

    def _shadow(self, info: PluginInfo, first: PluginInfo) -> None:
        """A second distribution uses the entry-point name ``first`` already took."""
        info.status = "shadowed"
        info.error = (f"the plugin name {info.name!r} is already taken by {first.describe()},"
                      f" which loaded instead")
        self._shadowed.append(info)
        _warn(
            f"agentgym plugin {info.describe()} was skipped: {info.error}. Uninstall one of"
            f" {info.distribution} and {first.distribution or first.module} (plugin names"
            f" must be unique; AGENTGYM_DISABLE_PLUGINS={info.name} disables both)."
        )

    def entries(self, kind: str) -> dict[str, Entry]:
        """Every contribution of ``kind`` (a key of :attr:`kinds`), by id."""
        if kind not in self.kinds:
            raise UnknownIdError("component kind", kind, self.kinds, "agentgym list --help")
        if kind not in self._entries:
            self._entries[kind] = self._collect(kind, self.kinds[kind])
        return self._entries[kind]

    def _collect(self, kind: str, spec: Kind) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        singular = _singular(kind)
        for info in self.infos.values():  # collected afresh: forget this kind's old skips
            info.skipped = [s for s in info.skipped if s.kind != singular]
        # Call each plugin's implementation alone, to know who contributed what.
        for impl in self._hookimpls(spec):  # in registration order
            try:
                items = impl.function() or []
            except Exception as e:
                self._fail(self._info(impl.plugin_name),
                           f"hook {spec.hook} raised {type(e).__name__}: {e}")
                continue
            for item in items:
                item_id = spec.id_of(item)
                owner = self._prefix_owner(item_id, impl.plugin_name)
                if owner is not None:
                    self._skip_foreign(singular, item_id, owner, impl.plugin_name)
                    continue
                if item_id in found:
                    self._skip_duplicate(singular, item_id, found[item_id].plugin,
                                         impl.plugin_name)
                    continue
                found[item_id] = Entry(item_id, item, impl.plugin_name, spec.description_of(item))
        return found

    def _hookimpls(self, spec: Kind) -> list[Any]:
        return getattr(self.pm.hook, spec.hook).get_hookimpls()

    def _info(self, name: str) -> PluginInfo:
        return self.infos.setdefault(name, PluginInfo(name, "?"))

    def _prefix_owner(self, item_id: str, contributor: str) -> str | None:
        """The plugin that ``item_id``'s prefix names (``NAME/...``), when that is a plugin
        found here other than ``contributor``: such an id is not ``contributor``'s to give."""
        prefix, slash, _ = item_id.partition("/")
        if slash and prefix != contributor and prefix in self.infos:
            return prefix
        return None

    def _skip_foreign(self, kind: str, item_id: str, owner: str, contributor: str) -> None:
        """``contributor`` contributes ``item_id`` under plugin ``owner``'s prefix."""
        later, first = self._info(contributor), self._info(owner)
        later.skipped.append(SkippedEntry(
            kind, item_id, f"the prefix {owner + '/'!r} belongs to plugin {first.describe()}"))
        _warn(
            f"agentgym plugin {later.describe()} registers the {kind} id {item_id!r}, under"
            f" the prefix of plugin {first.describe()}: an id 'NAME/...' is plugin NAME's"
            f" alone, so this one was skipped, and everything else loaded. To silence this,"
            f" fix {later.distribution or later.module} (its own ids start"
            f" {contributor + '/'!r}) or set AGENTGYM_DISABLE_PLUGINS={contributor}."
        )

    def _skip_duplicate(self, kind: str, item_id: str, first: str, second: str) -> None:
        """``second`` also contributes ``item_id``, which ``first`` contributed earlier."""
        owner, later = self._info(first), self._info(second)
        same = first == second
        reason = (f"{second!r} contributes it twice; the first one is used" if same else
                  f"plugin {owner.describe()} registered it first and keeps it")
        later.skipped.append(SkippedEntry(kind, item_id, reason))
        fix = (f"fix {later.distribution or later.module}" if same else
               f"uninstall one of them, or set AGENTGYM_DISABLE_PLUGINS={second}"
               f" (AGENTGYM_DISABLE_PLUGINS={first} keeps the other one instead)")
        _warn(
            f"agentgym plugin {later.describe()} registers the {kind} id {item_id!r}, which"
            f" {'it' if same else f'plugin {owner.describe()}'} already registered: this copy"
            f" was skipped, and everything else loaded. To silence this, {fix}."
        )

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register an in-process plugin object (a module or class with hook functions).

        Unlike an installed plugin, whose clashing ids are skipped with a warning, a plugin
        registered here that contributes an id already taken is refused with
        :class:`~agentgym.core.errors.DuplicateIdError` (and not registered): the code that
        registers it is where the clash is fixed.
        """
        name = name or getattr(plugin, "__name__", None) or f"plugin-{id(plugin)}"
        taken = {kind: self.entries(kind) for kind in self.kinds}
        self.pm.register(plugin, name=name)
        try:
            self._add_hooks(name)
        except Exception:
            self.pm.unregister(plugin)
            raise
        try:
            for kind, spec in self.kinds.items():
                for item_id in self._ids_of(name, spec):
                    owner = self._prefix_owner(item_id, name)
                    if owner is not None:
                        raise InvalidArgumentError(
                            f"plugin {name!r} contributes the {_singular(kind)} id"
                            f" {item_id!r}, under the prefix of plugin {owner!r}: an id"
                            f" 'NAME/...' is plugin NAME's alone. Give it an id that starts"
                            f" {name + '/'!r}")
                    # Taken under this plugin's own prefix: the other plugin's copy goes.
                    if item_id in taken.get(kind, {}) and item_id.partition("/")[0] != name:
                        raise DuplicateIdError(
                            _singular(kind), item_id, taken[kind][item_id].plugin, name,
                            fix=f"Give {name!r}'s {_singular(kind)} another id, or set"
                                f" AGENTGYM_DISABLE_PLUGINS={taken[kind][item_id].plugin}"
                                " to leave the installed one out",
                        )
        except (DuplicateIdError, InvalidArgumentError):
            self.pm.unregister(plugin)
            raise
        self.infos[name] = PluginInfo(name, getattr(plugin, "__name__", repr(plugin)))
        self._entries.clear()
        return name

    def _ids_of(self, name: str, spec: Kind) -> list[str]:
        """The ids plugin ``name`` contributes through ``spec`` (none if its hook raises:
        collecting reports that)."""
        ids = []
        for impl in self._hookimpls(spec):
            if impl.plugin_name == name:
                try:
                    items = impl.function() or []
                except Exception:
                    continue  # collecting reports it, with the plugin's name
                ids += [spec.id_of(item) for item in items]
        return ids

    def get(self, kind: str, item_id: str) -> Any:
        """The contribution ``item_id`` of ``kind``, or :class:`UnknownIdError`."""
        entries = self.entries(kind)
        if item_id not in entries:
            left_out = sorted(i.name for i in self.infos.values() if i.status == "disabled")
            note = (f" Not loaded (AGENTGYM_PLUGINS / AGENTGYM_DISABLE_PLUGINS):"
                    f" {', '.join(left_out)}; one of them may provide it." if left_out else "")
            failed = sorted((i for i in self.infos.values() if i.status == "failed"),
                            key=lambda i: i.name)
            if failed:  # the likeliest reason an id the user installed is not there
                note += (" Plugins that failed to load, one of which may provide it: "
                         + "; ".join(f"{i.name} ({i.error})" for i in failed)
                         + " (`agentgym list plugins` shows them).")
            raise UnknownIdError(
                _singular(kind), item_id, entries, f"agentgym list {kind}", note=note
            )
        return entries[item_id].item

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin found, loaded or not, sorted by name, with the contributions of
        each that were skipped (so every kind is collected first)."""
        for kind in self.kinds:
            self.entries(kind)
        return sorted([*self.infos.values(), *self._shadowed], key=lambda i: i.name)


def _load_order(ep: importlib.metadata.EntryPoint) -> tuple[bool, str]:
    """agentgym's own plugins first (an installed package cannot take a built-in id), then
    the others by entry-point name."""
    own = ep.dist is not None and ep.dist.metadata["Name"] == GROUP
    return (not own, ep.name)


def _warn(message: str) -> None:
    warnings.warn(message, PluginLoadWarning, stacklevel=4)


def _names(value: str | None) -> set[str]:
    return {n.strip() for n in (value or "").split(",") if n.strip()}


_host: PluginHost | None = None


def plugin_host() -> PluginHost:
    """The process-wide :class:`PluginHost`, loaded on first use."""
    global _host
    if _host is None:
        _host = PluginHost()
    return _host


def set_plugin_host(host: PluginHost | None) -> PluginHost | None:
    """Replace the process-wide host (``None``: reload on next use); returns the old one."""
    global _host
    old, _host = _host, host
    return old


def _singular(kind: str) -> str:
    """``policies`` -> ``policy``, ``sandboxes`` -> ``sandbox``, ``harnesses`` ->
    ``harness``, ``task_sources`` -> ``task source``."""
    if kind.endswith("ies"):
        word = kind[:-3] + "y"
    elif kind.endswith(("xes", "sses")):
        word = kind[:-2]
    else:
        word = kind.removesuffix("s")
    return word.replace("_", " ")
