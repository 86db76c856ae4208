"""Looking up what plugins contribute, registering plugins from code, and the bridge to
Gymnasium.

Plugins describe contributions with :class:`~agentgym.core.contributions.Spec` and
:class:`~agentgym.core.contributions.EnvRegistration` (re-exported here); :func:`get`,
:func:`has` and :func:`build` look them up in the process's plugin host.
:func:`sandbox_backend` and :func:`open_sandbox` do it for sandbox backends, as
:func:`make` does for envs.

``agentgym.make(id, **kwargs)`` is ``gymnasium.make(id, **kwargs)`` with a helpful error
for unknown ids. Importing ``agentgym`` registers every env with Gymnasium, which is why
``gymnasium.make("agentgym:calculator")`` works without the import. Envs are registered
without Gymnasium's ``OrderEnforcing`` and passive-checker wrappers so that ``make``
returns the env itself, async methods included: ``AgentEnv`` enforces reset-before-step on
its own, and :func:`agentgym.testing.check_env` runs the full checker.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from agentgym.core.contributions import EnvRegistration, Spec
from agentgym.core.plugins import plugin_host
from agentgym.core.sandbox import (
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxSpecError,
    with_extra_mounts,
)


def get(kind: str, item_id: str) -> Any:
    """The contribution ``item_id`` of ``kind`` (``envs``, ``tools``, ``policies``, ...)."""
    return plugin_host().get(kind, item_id)


def has(kind: str, item_id: str) -> bool:
    """Whether a loaded plugin contributes ``item_id`` of ``kind``."""
    return item_id in plugin_host().entries(kind)


def build(kind: str, item_id: str, *args: Any, **kwargs: Any) -> Any:
    """Build the contribution ``item_id`` of ``kind`` from its spec."""
    return get(kind, item_id).build(*args, **kwargs)


def register_with_gymnasium() -> None:
    """Register every plugin env with Gymnasium (idempotent)."""
    for entry in plugin_host().entries("envs").values():
        spec: EnvRegistration = entry.item
        existing = gymnasium.registry.get(spec.id)
        if existing is not None and existing.entry_point == spec.factory:
            continue
        if existing is not None:
            del gymnasium.registry[spec.id]
        gymnasium.register(
            id=spec.id,
            entry_point=spec.factory,
            kwargs=dict(spec.kwargs),
            order_enforce=False,
            disable_env_checker=True,
        )


def make(env_id: str, **kwargs: Any) -> gymnasium.Env:
    """Make a registered env, exactly as ``gymnasium.make(env_id, **kwargs)`` does.

    ``env_id`` may carry Gymnasium's module prefix (``"agentgym:calculator"``). An unknown
    id raises :class:`~agentgym.core.errors.UnknownIdError` with the closest ids.
    """
    env_id = env_id.removeprefix("agentgym:")
    get("envs", env_id)
    register_with_gymnasium()
    return gymnasium.make(env_id, **kwargs)


def register_plugin(plugin: Any, name: str | None = None) -> str:
    """Register a plugin from code, without an entry point (notebooks, scripts, tests).

    It joins the plugins found through entry points, and its envs become available to
    ``agentgym.make`` and ``gymnasium.make``. Envs made in other processes (Ray workers)
    only see entry-point plugins: publish a package for those.

    An id the plugin contributes that a loaded plugin already provides raises
    :class:`~agentgym.core.errors.DuplicateIdError` and the plugin is not registered
    (installed plugins that clash are skipped with a warning instead: see the module docs).
    """
    registered = plugin_host().register(plugin, name)
    register_with_gymnasium()
    return registered


def sandbox_backend(name: str) -> SandboxBackend:
    """The registered backend ``name`` (an id from ``agentgym list sandboxes``), to open
    sandboxes with or to ask what it supports (``"image" in backend.supports``).

    Raises :class:`~agentgym.core.errors.UnknownIdError` (with the closest ids) for a name
    no plugin registers, and :class:`SandboxError` when its plugin registered something
    that is not a :class:`SandboxBackend`.
    """
    backend = get("sandboxes", name)
    if not isinstance(backend, SandboxBackend):
        raise SandboxError(
            f"the sandbox backend {name!r} is registered as {backend!r}, not a"
            " SandboxBackend; its plugin's agentgym_sandboxes hook must return"
            " SandboxBackend objects (see docs/hooks.md)")
    return backend


async def open_sandbox(backend: str = "local", spec: SandboxSpec | None = None,
                       **fields: Any) -> Sandbox:
    """Start a sandbox of ``backend`` (an id from ``agentgym list sandboxes``) for ``spec``,
    or for the spec made of ``fields`` (``template=``, ``image=``, ``workdir=``,
    ``mounts=``, ``env=``, ``limits=``: see :class:`SandboxSpec`) when no spec is given.

    Raises :class:`SandboxSpecError` for a bad field or one the backend does not support
    (:class:`UnsupportedFieldError`), :class:`SandboxError` when the sandbox cannot start.
    """
    if spec is None:
        spec = SandboxSpec.from_fields(**fields)
    elif fields:
        raise SandboxSpecError(
            f"open_sandbox got both a spec and the fields {', '.join(sorted(fields))}; pass"
            " one: the spec (dataclasses.replace(spec, ...) changes fields) or the fields")
    return await sandbox_backend(backend).open(with_extra_mounts(spec))


__all__ = ["EnvRegistration", "Spec", "build", "get", "has", "make", "open_sandbox",
           "register_plugin", "register_with_gymnasium", "sandbox_backend"]
