"""What a plugin contributes: :class:`Spec` (rewards, task sources, sandboxes, policies,
parsers) and :class:`EnvRegistration` (environments).

The hooks of :mod:`agentgym.core.hookspecs` return lists of them; :mod:`agentgym.core.registry`
looks them up and builds them. ``factory`` may be a callable or a ``"module:attribute"``
string, imported only when the thing is built, so listing plugins stays cheap. This module
is plain data: it imports nothing of agentgym, so every other module may import it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def import_target(name: str) -> Any:
    """The object ``"module:attribute"`` (dots in the attribute reach inside it) names,
    importing the module."""
    module, _, attribute = name.partition(":")
    target: Any = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


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
        return self.factory if callable(self.factory) else import_target(self.factory)

    def build(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


@dataclass(frozen=True)
class EnvRegistration(Spec):
    """An environment: ``factory(**kwargs, **user_kwargs)`` returns an ``AgentEnv``.

    Registered with Gymnasium under ``id`` when agentgym is imported (Gymnasium's own
    ``EnvRegistration`` is what ``env.spec`` holds; this is what a plugin registers).

    Args:
        id: the env id (``gym.make(id)``, ``agentgym eval id``).
        factory: a callable returning the env (an ``AgentEnv`` subclass, usually), or
            ``"module:attribute"`` naming one.
        description: one line for ``agentgym list envs`` and the plugin's docs page.
        kwargs: keyword arguments this id passes to ``factory`` (several ids may share a
            factory: the SWE ones preset ``env_id``); ``gym.make(id, **kwargs)``'s
            override them.
    """

    kwargs: dict[str, Any] = field(default_factory=dict)
