"""The one tool abstraction: a typed, documented function the agent can call.

Write a tool as a plain function or env method with type hints and a Google-style
docstring; ``@tool`` derives the JSON schema the model sees::

    class MyEnv(AgentEnv):
        @tool
        def calculator(self, expression: str) -> str:
            '''Evaluate an arithmetic expression.

            Args:
                expression: The expression to evaluate, e.g. "3 * (4 + 5)".
            '''

A tool may be sync or async. It reports a problem to the agent by raising
:class:`ToolError` (the message becomes the tool's answer) and ends the episode by raising
:class:`~agentgym.core.episode.Submitted`. Arguments are validated against the schema
before the call: a missing, unknown or mistyped argument becomes an error message to the
agent, never an exception out of ``step``.

**Toolsets.** Tools that work on an episode's resource (its sandbox, browser page or
memory store), and keep state across calls, are the ``@tool`` methods of a
:class:`Toolset`: one instance per episode, built from the resource. An env names toolset
*factories* in :attr:`AgentEnv.toolsets <agentgym.core.env.AgentEnv.toolsets>` (the class,
or a ``functools.partial`` of it with options) and binds them to each episode's resource
in ``setup_episode``. The class alone describes its tools (:func:`describe`), so the
schemas are known before any sandbox exists. The ``toolkits`` package beside ``core`` holds
the shared ones (``bash``, ``str_replace_editor``).
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin

from agentgym.core.errors import PicklableException


class ToolError(PicklableException, Exception):
    """Raised by a tool (or its argument validation) to send an error message to the agent."""


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(annotation: Any) -> dict[str, Any]:
    """JSON schema of a Python type hint (str, int, float, bool, list, dict, Literal, Optional)."""
    if annotation in (inspect.Parameter.empty, Any):
        return {}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return type_schema(options[0])
        return {"anyOf": [type_schema(a) for a in options]}
    if origin is Literal:
        schema: dict[str, Any] = {"enum": list(args)}
        kinds = {_SCALARS.get(type(a)) for a in args}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if annotation is list or origin is list:
        return {"type": "array", "items": type_schema(args[0])} if args else {"type": "array"}
    if annotation is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(
        f"@tool cannot describe the type {annotation!r} in JSON schema; use str, int, float,"
        " bool, list[...], dict, Literal[...] or Optional[...]"
    )


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {argument: description})."""
    description, args, current = [], {}, None
    section = "description"
    for line in doc.splitlines():
        stripped = line.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters):", stripped):
            section = "args"
            continue
        if re.fullmatch(r"(Returns|Raises|Yields|Examples?|Notes?):", stripped):
            section = "other"
            continue
        if section == "description":
            description.append(line)
        elif section == "args" and stripped:
            match = re.match(r"(\w+)\s*(\([^)]*\))?\s*:\s*(.*)", stripped)
            if match and line.startswith((" ", "\t")) and len(line) - len(line.lstrip()) <= 8:
                current = match.group(1)
                args[current] = match.group(3)
            elif current:
                args[current] += " " + stripped
    return "\n".join(description).strip(), args


def _json_type(value: Any) -> str:
    for python_type, name in (
        (bool, "boolean"),
        (int, "integer"),
        (float, "number"),
        (str, "string"),
        (list, "array"),
        (dict, "object"),
        (type(None), "null"),
    ):
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def check_argument(value: Any, schema: dict[str, Any], where: str) -> Any:
    """Check ``value`` against ``schema`` and return it, converted where that is safe.

    Strings that cleanly spell a number or boolean become one when the schema asks for it
    (XML-style tool calls carry every value as text). Anything else that does not fit raises
    :class:`ToolError` naming the argument, the expected and the received type.
    """
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            try:
                return check_argument(value, option, where)
            except ToolError:
                pass
        raise ToolError(f"argument {where} does not match any allowed type; got {value!r}")
    if "enum" in schema:
        if value not in schema["enum"] and str(value) not in map(str, schema["enum"]):
            raise ToolError(f"argument {where} must be one of {schema['enum']}, got {value!r}")
        return next(e for e in schema["enum"] if e == value or str(e) == str(value))
    expected = schema.get("type")
    if expected is None:
        return value
    got = _json_type(value)
    if got == expected or (expected == "number" and got == "integer"):
        if expected == "array" and "items" in schema:
            return [check_argument(v, schema["items"], f"{where}[{i}]")
                    for i, v in enumerate(value)]
        return value
    if got == "string":
        text = value.strip()
        try:
            if expected == "integer" and re.fullmatch(r"[-+]?\d+", text):
                return int(text)
            if expected == "number":
                return float(text)
            if expected == "boolean" and text.lower() in ("true", "false"):
                return text.lower() == "true"
            if expected in ("array", "object"):
                return check_argument(json.loads(text), schema, where)
        except (ValueError, json.JSONDecodeError):
            pass
    shown = json.dumps(value, default=repr)
    raise ToolError(f"argument {where} must be {expected}, got {got} {shown}")


class Tool:
    """A callable the agent can use, with the JSON schema derived from its signature."""

    def __init__(
        self, fn: Callable[..., Any], name: str | None = None, description: str | None = None
    ):
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
        self.description = description or summary
        if not self.description:
            raise TypeError(f"@tool {self.name!r} needs a docstring: it is what the model reads")
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        params = list(signature.parameters.values())
        self.is_method = bool(params) and params[0].name == "self"
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in params[1:] if self.is_method else params:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"@tool {self.name!r}: *args/**kwargs cannot be described")
            prop = type_schema(hints.get(param.name, param.empty))
            if param.name in arg_docs:
                prop["description"] = arg_docs[param.name]
            properties[param.name] = prop
            if param.default is param.empty:
                required.append(param.name)
        self.parameters = {"type": "object", "properties": properties, "required": required}

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling schema (what chat templates render for the model)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Return the arguments checked and converted, or raise :class:`ToolError`."""
        if not isinstance(arguments, dict):
            raise ToolError(
                f"arguments of {self.name!r} must be a JSON object, got {_json_type(arguments)}"
            )
        properties, required = self.parameters["properties"], self.parameters["required"]
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            raise ToolError(
                f"{self.name!r} got unknown argument(s) {', '.join(map(repr, unknown))};"
                f" it takes: {', '.join(properties) or 'no arguments'}"
            )
        # An explicit null for an optional argument means "not given" (strict-mode function
        # calling sends every property, the unused ones as null).
        arguments = {k: v for k, v in arguments.items() if v is not None or k in required}
        missing = [name for name in required if name not in arguments]
        if missing:
            raise ToolError(
                f"{self.name!r} is missing required argument(s) {', '.join(map(repr, missing))}"
            )
        return {k: check_argument(v, properties[k], repr(k)) for k, v in arguments.items()}

    async def call(self, arguments: Any, instance: Any = None) -> str:
        """Validate ``arguments``, run the tool, and return its answer as text."""
        kwargs = self.validate(arguments)
        if self.is_method and instance is None:  # a toolset's tool described, not bound
            raise ToolError(f"{self.name!r} is not available yet: the episode is still"
                            " being set up; call it again")
        result = self.fn(instance, **kwargs) if self.is_method else self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return ""
        return result if isinstance(result, str) else json.dumps(result, default=str)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else BoundTool(self, instance)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"


class BoundTool:
    """A method tool bound to its instance (what ``env.calculator`` gives back)."""

    def __init__(self, tool: Tool, instance: Any):
        self.tool, self.instance = tool, instance
        self.name, self.description = tool.name, tool.description

    def schema(self) -> dict[str, Any]:
        return self.tool.schema()

    def validate(self, arguments: Any) -> dict[str, Any]:
        return self.tool.validate(arguments)

    async def call(self, arguments: Any) -> str:
        return await self.tool.call(arguments, self.instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.tool.fn(self.instance, *args, **kwargs)


class Toolset:
    """Tools bound to one episode's resource: its sandbox, browser page or memory store.

    A toolset keeps the tools that work on a resource, and the state they share across
    calls, together: one instance per episode, built from that episode's resource. An env
    names toolset *factories* in :attr:`AgentEnv.toolsets
    <agentgym.core.env.AgentEnv.toolsets>` and binds them in ``setup_episode``; the class
    alone describes its tools (:meth:`definitions`), so the schemas the model sees are
    known before any sandbox exists. Shared toolsets (a shell, a file editor) are plugins'
    contributions, listed by ``agentgym list tools``.

    Subclass it, take the resource (and options) in ``__init__``, and write the tools as
    ``@tool`` methods that use it::

        class ShellTools(Toolset):
            def __init__(self, sandbox: Sandbox, *, timeout_s: float = 60):
                self.sandbox, self.timeout_s = sandbox, timeout_s

            @tool
            async def run(self, command: str) -> str:
                '''Run a shell command.

                Args:
                    command: The command.
                '''
                return (await self.sandbox.exec(command, self.timeout_s)).output

    An env lists ``functools.partial(ShellTools, timeout_s=5)`` (or ``ShellTools``) in its
    ``toolsets`` and calls ``self.bind_toolsets(sandbox)`` in ``setup_episode``.
    """

    @classmethod
    def definitions(cls) -> list[Tool]:
        """The class's tools, unbound, in definition order (base classes first): their
        schemas need no instance."""
        found: dict[str, Tool] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Tool):
                    found[name] = value
        return list(found.values())

    def tools(self) -> list[BoundTool]:
        """The tools bound to this instance, ready to be called."""
        return [BoundTool(t, self) for t in self.definitions()]


#: Builds an episode's toolset from its resource: a Toolset class, or a partial of one.
ToolsetFactory = Callable[[Any], Toolset]


def toolset_class(factory: ToolsetFactory) -> type[Toolset]:
    """The :class:`Toolset` class a factory builds (a class, or a ``functools.partial``)."""
    target: Any = factory
    while isinstance(target, functools.partial):
        target = target.func
    if not (isinstance(target, type) and issubclass(target, Toolset)):
        raise TypeError(f"a toolset factory must be a Toolset subclass or a functools.partial"
                        f" of one, got {factory!r}")
    return target


def describe(factory: ToolsetFactory) -> list[Tool]:
    """The tools a toolset factory's toolsets offer, unbound (for their schemas)."""
    return toolset_class(factory).definitions()


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Turn a function or method into a :class:`Tool` (``@tool`` or ``@tool(name=...)``)."""
    if fn is None:
        return lambda f: Tool(f, name=name, description=description)
    return Tool(fn, name=name, description=description)


@tool
def submit(answer: str) -> str:
    """Submit your final answer. This ends the episode.

    Args:
        answer: Your final answer.
    """
    from agentgym.core.episode import Submitted

    raise Submitted(answer, f"Submitted: {answer}")
