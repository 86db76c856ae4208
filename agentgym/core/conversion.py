"""Converting values to the type an annotation names, with messages that say what was
expected.

Two entry points, one set of rules, shared by everything that takes user values for typed
parameters (the training config file, ``-e KEY=VALUE`` on the command line):

* :func:`convert_to_type`: an already-typed value (from YAML or Python). Lists become tuples where a
  tuple is expected, number text (YAML reads ``1e-5`` as text) becomes a float, a mapping
  becomes a dataclass; ints stay ints where floats are expected.
* :func:`from_text`: command-line text. ``int``, ``float``, ``bool``, ``str``, ``Path``,
  ``Literal[...]``, enums, ``None`` (``null``) and unions of them are read from the text;
  any other annotation gets the text's JSON value (``[1, 2]``, ``{"a": 1}``) or the text
  itself, then :func:`convert_to_type`.

Both raise :class:`ConversionError` with the expected type and the value given
(``expected an integer, got 'abc'``); the caller prefixes where the value came from.
Annotations this module does not know (a plugin's own class) accept any value: the
receiver checks those itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Union

from agentgym.core.errors import AgentGymError

__all__ = ["ConversionError", "closest", "convert_to_type", "describe", "from_text", "show"]

_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INT_TEXT = re.compile(r"^[+-]?\d+$")
_NULL_TEXT = ("null", "None", "none", "~")
_BOOL_TEXT = {"true": True, "yes": True, "on": True, "1": True,
              "false": False, "no": False, "off": False, "0": False}

#: ``load(cls, mapping) -> instance``: how a mapping becomes the dataclass ``cls``.
DataclassLoader = Callable[[type, Mapping[str, Any]], Any]


class ConversionError(AgentGymError, ValueError):
    """A value does not fit its annotation; the message says what was expected and what
    was given (the caller adds where the value came from)."""


def closest(name: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the name in ``names`` closest to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def show(value: Any) -> str:
    """A value and its type, shortened, for messages: ``'abc' (str)``."""
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({type(value).__name__})"


def describe(annotation: Any) -> str:
    """Words for a type, for messages: ``an integer``, ``one of 'a', 'b'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        return "null"
    if origin in (Union, types.UnionType):
        return describe_union(args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in annotation)
    if dataclasses.is_dataclass(annotation):
        return "a mapping"
    names = {bool: "true or false", int: "an integer", float: "a number", str: "text",
             Path: "a path", list: "a list", tuple: "a list", dict: "a mapping"}
    return names.get(origin or annotation, getattr(annotation, "__name__", str(annotation)))


def describe_union(members: tuple) -> str:
    return " or ".join(dict.fromkeys(describe(a) for a in members))


def _not_allowed(value: Any, allowed: list[str]) -> ConversionError:
    return ConversionError(f"{value!r} is not allowed{closest(str(value), allowed)}"
                           f" (allowed: {', '.join(allowed)})")


# ---- typed values -------------------------------------------------------------------------


def convert_to_type(value: Any, annotation: Any, *,
                    load_dataclass: DataclassLoader | None = None) -> Any:
    """``value`` converted to ``annotation``, or :class:`ConversionError`.

    ``load_dataclass`` builds a dataclass from a mapping (default: :func:`build_dataclass`,
    which checks field names and types)."""
    load = load_dataclass or build_dataclass
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any or annotation is object:
        return value
    if annotation is type(None) or annotation is None:
        if value is None:
            return None
        raise ConversionError(f"expected null, got {show(value)}")
    if origin in (Union, types.UnionType):
        return _convert_to_union(value, args, load)
    if origin is Literal:
        if value in args:
            return value
        raise _not_allowed(value, [str(a) for a in args])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        allowed = [str(m.value) for m in annotation]
        if isinstance(value, annotation) or value in allowed:
            return value
        raise _not_allowed(value, allowed)
    if dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise ConversionError(f"expected a mapping, got {show(value)}")
        return load(annotation, value)
    base = origin or annotation
    if base is bool:
        if isinstance(value, bool):
            return value
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value  # ints stay ints: TRL types step counts as floats to allow ratios
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            return float(value)
    elif base is str:
        if isinstance(value, str):
            return value
    elif base is Path:
        if isinstance(value, Path):
            return value
        if isinstance(value, str) and value:
            return Path(value).expanduser()
    elif base in (list, tuple):
        if isinstance(value, (list, tuple)):
            item = args[0] if args else Any
            items = [_convert_item(v, item, i, load) for i, v in enumerate(value)]
            return tuple(items) if base is tuple else items
    elif base is dict:
        if isinstance(value, Mapping):
            return dict(value)
    else:
        return value  # a type these rules do not check (a plugin's class, accelerate's configs)
    raise ConversionError(f"expected {describe(annotation)}, got {show(value)}")


def _convert_item(value: Any, annotation: Any, index: int, load: DataclassLoader) -> Any:
    try:
        return convert_to_type(value, annotation, load_dataclass=load)
    except ConversionError as e:
        raise ConversionError(f"item {index}: {e}") from None


def _convert_to_union(value: Any, args: tuple, load: DataclassLoader) -> Any:
    # TrainingArguments types strategies as `SomeEnum | str`: the text must still be a value
    # of the enum, which transformers converts it to.
    enums = [a for a in args if isinstance(a, type) and issubclass(a, enum.Enum)]
    if enums and str in args and isinstance(value, str):
        return convert_to_type(value, enums[0], load_dataclass=load)
    if value is None and type(None) in args:
        return None
    # Exact types first, so `int | str` keeps 5 an int and `float | None` turns "1e-5" a float.
    ordered = sorted(args, key=lambda a: a is str)
    errors = []
    for member in ordered:
        try:
            return convert_to_type(value, member, load_dataclass=load)
        except ConversionError as e:
            errors.append(str(e))
    specific = [e for e in errors if not e.startswith("expected ")]
    raise ConversionError(specific[0] if specific else
                          f"expected {describe_union(args)}, got {show(value)}")


def build_dataclass(cls: type, data: Mapping[str, Any]) -> Any:
    """The dataclass ``cls`` from ``data``: names checked (with the closest field), values
    converted to the fields' types."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    values = {}
    for key, value in data.items():
        if key not in fields:
            raise ConversionError(f"{cls.__name__} has no field {key!r}{closest(str(key), fields)}"
                                  f" (fields: {', '.join(fields)})")
        try:
            values[key] = convert_to_type(value, hints.get(key, Any))
        except ConversionError as e:
            raise ConversionError(f"{cls.__name__}.{key}: {e}") from None
    try:
        return cls(**values)
    except (TypeError, ValueError) as e:
        raise ConversionError(f"{cls.__name__}: {e}") from None


# ---- command-line text --------------------------------------------------------------------


def from_text(text: str, annotation: Any) -> Any:
    """The value the command-line ``text`` stands for, as ``annotation``, or
    :class:`ConversionError` (``expected an integer, got 'abc'``)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None) or annotation is None:
        if text in _NULL_TEXT:
            return None
        raise ConversionError(f"expected null, got {text!r}")
    if origin in (Union, types.UnionType):
        return _union_from_text(text, args)
    if origin is Literal:
        for allowed in args:
            if str(allowed) == text:
                return allowed
        raise _not_allowed(text, [str(a) for a in args])
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        for member in annotation:
            if text in (str(member.value), member.name):
                return member
        raise _not_allowed(text, [str(m.value) for m in annotation])
    base = origin or annotation
    if base is bool:
        if text.lower() in _BOOL_TEXT:
            return _BOOL_TEXT[text.lower()]
    elif base is int:
        if _INT_TEXT.match(text.strip()):
            return int(text)
    elif base is float:
        try:
            return float(text)
        except ValueError:
            pass
    elif base is str:
        return text
    elif base is Path:
        if text:
            return Path(text).expanduser()
    else:  # containers, dataclasses, a plugin's class: the text's JSON value
        return convert_to_type(_json_or_text(text), annotation)
    raise ConversionError(f"expected {describe(annotation)}, got {text!r}")


def _union_from_text(text: str, args: tuple) -> Any:
    if type(None) in args and text in _NULL_TEXT:
        return None
    # Text the exact types can read first (so `int | str` reads "5" as 5), then str, then
    # the types these rules do not know (which would take any text as JSON).
    known = (bool, int, float, Path, list, tuple, dict)

    def rank(member: Any) -> int:
        base = typing.get_origin(member) or member
        if member is str:
            return 1
        if (base in known or base is Literal or dataclasses.is_dataclass(member)
                or (isinstance(member, type) and issubclass(member, enum.Enum))):
            return 0
        return 2

    members = sorted((a for a in args if a is not type(None)), key=rank)
    errors = []
    for member in members:
        try:
            return from_text(text, member)
        except ConversionError as e:
            errors.append(str(e))
    specific = [e for e in errors if not e.startswith("expected ")]
    raise ConversionError(specific[0] if specific else
                          f"expected {describe_union(args)}, got {text!r}")


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
