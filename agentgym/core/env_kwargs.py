"""The keyword arguments an env accepts: found from its spec and factory, checked and
converted before the env is built.

``agentgym.make(ENV_ID, **kwargs)`` passes ``EnvRegistration.kwargs`` and the user's kwargs
to the env's factory. :func:`env_signature` reads what that factory accepts, with each
parameter's annotation and default: a class's ``__init__``, and where it passes
``**kwargs`` on (``super().__init__(..., **kwargs)``) the next ``__init__`` in its MRO
(``AgentEnv.__init__``); a function factory that passes ``**kwargs`` to a class (``return
MyEnv(**kwargs)``) is followed into it. A factory whose ``**kwargs`` go elsewhere accepts
any name.

:meth:`EnvSignature.convert` checks a mapping of kwargs (typed values, as from the
training config's YAML) and :meth:`EnvSignature.convert_text` one of text values (as from
``-e KEY=VALUE`` on the command line), with the rules of :mod:`agentgym.core.conversion`.
Both return the converted kwargs and a list of ``(key, problem)``: an unknown name comes
with the closest accepted one and the list of them all, a value that does not fit with the
type expected. :func:`check_env_kwargs` raises them as one :class:`EnvKwargsError`.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentgym.core.conversion import ConversionError, closest, convert_to_type, from_text
from agentgym.core.errors import AgentGymError

__all__ = ["EnvKwargsError", "EnvParameter", "EnvSignature", "check_env_kwargs",
           "env_signature"]

_SKIPPED = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD)


class EnvKwargsError(AgentGymError, ValueError):
    """Keyword arguments an env does not accept; ``issues`` holds ``(key, problem)`` pairs,
    each problem with its fix."""

    def __init__(self, env_id: str, issues: list[tuple[str, str]]):
        self.env_id, self.issues = env_id, issues
        super().__init__("\n".join(f"{key}: {problem}" for key, problem in issues))


@dataclass(frozen=True)
class EnvParameter:
    """One keyword argument an env accepts: its annotation (``Any`` when it has none or it
    cannot be resolved) and default (``inspect.Parameter.empty`` when required)."""

    name: str
    annotation: Any = Any
    default: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class EnvSignature:
    """What ``agentgym.make(env_id, **kwargs)`` accepts.

    Attributes:
        parameters: every named keyword argument, by name.
        open: the factory also takes names it does not list (its ``**kwargs`` go somewhere
            this module cannot follow), so unknown names are passed through unchecked.
    """

    env_id: str
    parameters: dict[str, EnvParameter]
    open: bool = False

    def convert(self, kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """Typed values checked against the annotations: ``(converted, problems)``."""
        return self._convert(kwargs, convert_to_type)

    def convert_text(self, kwargs: Mapping[str, str]) -> tuple[dict[str, Any],
                                                                list[tuple[str, str]]]:
        """Command-line text converted by the annotations: ``(converted, problems)``."""
        return self._convert(kwargs, from_text)

    def _convert(self, kwargs: Mapping[str, Any],
                 convert: Callable[[Any, Any], Any]) -> tuple[dict[str, Any],
                                                              list[tuple[str, str]]]:
        converted, issues = {}, []
        for key, value in kwargs.items():
            parameter = self.parameters.get(key)
            if parameter is None and not self.open:
                issues.append((key, self.unknown(key)))
                continue
            try:
                converted[key] = convert(value, parameter.annotation if parameter else Any)
            except ConversionError as e:
                issues.append((key, str(e)))
        return converted, issues

    def unknown(self, key: str) -> str:
        """The problem with the name ``key``, which the env does not take."""
        names = list(self.parameters)
        return (f"the env {self.env_id!r} takes no argument {key!r}{closest(key, names)}"
                f" (it takes: {', '.join(names) or 'none'})")


def env_signature(env_id: str) -> EnvSignature:
    """The keyword arguments the env ``env_id`` accepts (``UnknownIdError`` for an unknown
    id; a factory that cannot be imported raises its import error)."""
    from agentgym.core.plugins import plugin_host

    spec = plugin_host().get("envs", env_id.removeprefix("agentgym:"))
    parameters, open_ = _parameters(spec.load())
    for name, value in spec.kwargs.items():  # preset by the plugin; the user may override
        if name not in parameters and open_:
            parameters[name] = EnvParameter(name, default=value)
    return EnvSignature(spec.id, parameters, open_)


def check_env_kwargs(env_id: str, kwargs: Mapping[str, Any], *,
                     text: bool = False) -> dict[str, Any]:
    """``kwargs`` for ``agentgym.make(env_id, ...)`` converted (from command-line text when
    ``text``), or :class:`EnvKwargsError` naming every problem."""
    signature = env_signature(env_id)
    converted, issues = (signature.convert_text if text else signature.convert)(kwargs)
    if issues:
        raise EnvKwargsError(signature.env_id, issues)
    return converted


# ---- reading a factory ----------------------------------------------------------------------


def _parameters(factory: Callable[..., Any]) -> tuple[dict[str, EnvParameter], bool]:
    """The named keyword parameters along the chain ``factory`` forwards ``**kwargs``
    through, and whether the chain ends open."""
    parameters: dict[str, EnvParameter] = {}
    for function, passed in _chain(factory):
        if function is None:
            return parameters, True
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):
            return parameters, True
        hints = _hints(function)
        named = [p for name, p in signature.parameters.items() if name != "self"]
        positional = passed[0]
        for index, p in enumerate(named):
            if p.kind in _SKIPPED or p.name in passed[1] or p.name in parameters:
                continue
            if index < positional and p.kind is p.POSITIONAL_OR_KEYWORD:
                continue  # the caller fills it positionally
            parameters[p.name] = EnvParameter(p.name, hints.get(p.name, Any), p.default)
    return parameters, False


def _chain(factory: Callable[..., Any]) -> Iterator[tuple[Any, tuple[int, set[str]]]]:
    """``(function, (positional count, keyword names) its caller passes itself)`` for
    ``factory`` and each function its ``**kwargs`` reach; ``(None, ...)`` where they go
    somewhere unknown (so any name is accepted)."""
    passed: tuple[int, set[str]] = (0, set())
    classes = list(factory.__mro__) if inspect.isclass(factory) else []
    function: Any = factory
    while True:
        if classes:
            owner = next((c for c in classes if "__init__" in vars(c)), object)
            classes = classes[classes.index(owner) + 1:] if owner is not object else []
            if owner is object:
                return  # **kwargs reach object.__init__, which takes none
            function = vars(owner)["__init__"]
        yield function, passed
        varkw = next((p.name for p in _signature_parameters(function)
                      if p.kind is p.VAR_KEYWORD), None)
        if varkw is None:
            return
        target, passed = _forwarded(function, varkw)
        if target == "super":
            if not classes:
                yield None, passed
                return
        elif inspect.isclass(target):
            classes = list(target.__mro__)
        else:
            yield None, passed
            return


def _signature_parameters(function: Any) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return []


def _forwarded(function: Any, varkw: str) -> tuple[Any, tuple[int, set[str]]]:
    """Where ``function`` passes ``**varkw``: ``"super"`` (an ``__init__`` call: the next
    class in the MRO), a class it calls, or None; with what that call passes itself."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None, (0, set())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not any(
                k.arg is None and isinstance(k.value, ast.Name) and k.value.id == varkw
                for k in node.keywords):
            continue
        passed = (len(node.args), {k.arg for k in node.keywords if k.arg})
        if isinstance(node.func, ast.Attribute) and node.func.attr == "__init__":
            # super().__init__(...) or Base.__init__(self, ...): `self` is not a parameter
            explicit_self = not (isinstance(node.func.value, ast.Call)
                                 and isinstance(node.func.value.func, ast.Name)
                                 and node.func.value.func.id == "super")
            return "super", (passed[0] - explicit_self, passed[1])
        if isinstance(node.func, ast.Name):
            target = getattr(function, "__globals__", {}).get(node.func.id)
            return (target if inspect.isclass(target) else None), passed
    return None, (0, set())


def _hints(function: Any) -> dict[str, Any]:
    """The resolved annotations of ``function``, one at a time where some cannot be
    resolved (names imported only for type checking)."""
    try:
        return typing.get_type_hints(function)
    except Exception:  # a name that exists only under TYPE_CHECKING, a typo in a string
        pass
    namespace = getattr(function, "__globals__", {})
    hints = {}
    for name, annotation in getattr(function, "__annotations__", {}).items():
        try:
            hints[name] = (eval(annotation, namespace) if isinstance(annotation, str)
                           else annotation)
        except Exception:
            hints[name] = Any
    return hints
