"""What a plugin contributes: :class:`Spec` (rewards, task sources, sandboxes, policies,
parsers) and :class:`EnvRegistration` (environments).

The hooks of :mod:`agentgym.core.hookspecs` return lists of them; :mod:`agentgym.core.registry`
looks them up and builds them. ``factory`` may be a callable or a ``"module:attribute"``
string, imported only when the thing is built, so listing plugins stays cheap. This module
is plain data: it imports nothing of agentgym but its errors, so every other module may
import it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentgym.core.errors import FactoryImportError


def import_target(name: str, what: str = "") -> Any:
    """The object ``"module:attribute"`` (dots in the attribute reach inside it) names,
    importing the module. A module or attribute that is not there is a
    :class:`FactoryImportError` naming it and the closest names (``what``: whose string it
    is, for the message); an error raised by the module's own import is left as it is."""
    module, _, attribute = name.partition(":")
    whose = f"{what} {name!r}" if what else repr(name)
    try:
        target: Any = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(e.name + ".")):
            raise  # a module it imports is missing: the plugin's own dependency
        raise FactoryImportError(
            f"{whose}: there is no module {e.name!r} (is the package that holds it"
            " installed, and is the name spelled right?)", name=e.name) from None
    reached = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            close = difflib.get_close_matches(part, [n for n in dir(target)
                                                     if not n.startswith("_")], n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise FactoryImportError(f"{whose}: {reached!r} has no attribute {part!r}{hint}",
                                     name=module)
        target = getattr(target, part)
        reached += f"{':' if reached == module else '.'}{part}"
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
        if callable(self.factory):
            return self.factory
        return import_target(self.factory, f"the factory of {self.id!r},")

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
