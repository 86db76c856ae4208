"""What plugins contribute (specs), how to look it up, and the bridge to Gymnasium.

Plugins describe contributions with :class:`Spec` (rewards, task sources, sandboxes,
policies, parsers) and :class:`EnvSpec` (environments). ``factory`` may be a callable or a
``"module:attribute"`` string, imported only when the thing is built, so listing plugins
stays cheap.

``agentgym.make(id, **kwargs)`` is ``gymnasium.make(id, **kwargs)`` with a helpful error
for unknown ids. Importing ``agentgym`` registers every env with Gymnasium, which is why
``gymnasium.make("agentgym:calculator")`` works without the import. Envs are registered
without Gymnasium's ``OrderEnforcing`` and passive-checker wrappers so that ``make``
returns the env itself, async methods included: ``AgentEnv`` enforces reset-before-step on
its own, and :func:`agentgym.testing.check_env` runs the full checker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium

from agentgym.core.plugins import plugin_host


@dataclass(frozen=True)
class Spec:
    """A named contribution built by ``factory``.

    Args:
        id: the name users type (``agentgym list`` shows it).
        factory: a callable, or ``"module:attribute"`` naming one.
        description: one line for ``agentgym list``.
    """

    id: str
    factory: Callable[..., Any] | str
    description: str = ""

    def load(self) -> Callable[..., Any]:
        """The factory, importing it if it was given as a string."""
        if callable(self.factory):
            return self.factory
        module, _, attribute = self.factory.partition(":")
        target: Any = importlib.import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
        return target

    def build(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


@dataclass(frozen=True)
class EnvSpec(Spec):
    """An environment: ``factory(**kwargs, **user_kwargs)`` returns an ``AgentEnv``."""

    kwargs: dict[str, Any] = field(default_factory=dict)


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
        spec: EnvSpec = entry.item
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
