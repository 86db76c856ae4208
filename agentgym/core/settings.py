"""Settings dataclasses: a field's bounds are declared once, in its metadata, and checked
by one function.

A settings dataclass (:class:`~agentgym.core.policies.Sampling`, the rollout's
``RolloutConfig`` and ``PipelineConfig``, the sections of ``agentgym train``'s config)
writes a numeric field's bounds into the field's metadata::

    concurrency: int = field(default=8, metadata={"min": 1})

* ``min``, ``max``: inclusive bounds; ``gt``: an exclusive lower bound. ``None`` is never
  out of bounds (an optional field's "no limit").
* A field annotated with a ``Literal`` takes one of its values.

:func:`check_settings` is what such a dataclass's ``__post_init__`` calls: it raises
:class:`~agentgym.core.errors.InvalidArgumentError` naming the class, the field, the value
and the bound. :func:`bound_problem` is the same bound check for a caller that reports
problems its own way (the training config, under each key's dotted path), so the bounds a
config file gets and the ones a Python caller gets cannot differ.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any, Literal

from agentgym.core.conversion import closest
from agentgym.core.errors import InvalidArgumentError

__all__ = ["bound_problem", "check_settings", "choice_problem"]


def bound_problem(value: Any, metadata: Mapping[str, Any]) -> str | None:
    """``"must be >= 1, got 0"`` when the number ``value`` breaks a bound of ``metadata``;
    None when it keeps them (or is not a number)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if "min" in metadata and value < metadata["min"]:
        return f"must be >= {metadata['min']:g}, got {value}"
    if "gt" in metadata and value <= metadata["gt"]:
        return f"must be > {metadata['gt']:g}, got {value}"
    if "max" in metadata and value > metadata["max"]:
        return f"must be <= {metadata['max']:g}, got {value}"
    return None


def choice_problem(value: Any, choices: tuple[Any, ...]) -> str | None:
    """``"must be one of a, b; got 'c'"`` (with the closest choice) unless ``value`` is
    one of ``choices``."""
    if value in choices:
        return None
    names = [str(c) for c in choices]
    return f"must be one of {', '.join(names)}; got {value!r}{closest(str(value), names)}"


def check_settings(obj: Any) -> None:
    """Raise :class:`~agentgym.core.errors.InvalidArgumentError` for the first field of the
    dataclass instance ``obj`` that breaks its declared bounds or choices."""
    for name, metadata, choices in _rules(type(obj)):
        value = getattr(obj, name)
        problem = bound_problem(value, metadata) if metadata else None
        if problem is None and choices:
            problem = choice_problem(value, choices)
        if problem is not None:
            raise InvalidArgumentError(f"{type(obj).__name__}.{name} {problem}")


@functools.cache
def _rules(cls: type) -> tuple[tuple[str, Mapping[str, Any], tuple[Any, ...]], ...]:
    """Per field with anything to check: its name, its metadata, its Literal choices.
    Cached: some settings are built once per turn."""
    hints = typing.get_type_hints(cls)
    rules = []
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        choices = typing.get_args(hint) if typing.get_origin(hint) is Literal else ()
        bounds = {k: v for k, v in f.metadata.items() if k in ("min", "max", "gt")}
        if bounds or choices:
            rules.append((f.name, bounds, choices))
    return tuple(rules)
