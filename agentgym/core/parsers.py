"""Tool-call formats: reading calls out of model text and writing them back.

A :class:`ToolCallParser` turns one assistant turn into a :class:`ParsedTurn` (the free
text, the well-formed calls, and an error message for each malformed one) and renders calls
back into its format, which is how a task's reference solution is written in the format of
the env it runs in. ``parse(render(content, calls))`` gives back the same calls.

Built in (the ``core`` plugin registers them through the ``agentgym_tool_call_parsers``
hook):

* ``hermes``: Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
* ``xml``: Qwen3-Coder style ``<function=name><parameter=p>value</parameter></function>``
* ``openai``: an assistant message with OpenAI ``tool_calls`` (as a dict or its JSON text)

An action that is already a message dict is read as OpenAI format whatever the env's
parser is (:func:`parse_message`).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

Message = dict[str, Any]


@dataclass
class ToolCall:
    """One call: the tool's name and its arguments (already decoded from JSON)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry, arguments as a JSON string."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }


@dataclass
class ParsedTurn:
    """What one assistant turn said: free text, well-formed calls, format errors."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ToolCallParser(ABC):
    """Reads tool calls from model text in one format and writes them back."""

    name: ClassVar[str]
    #: One line that shows the model the expected format, used in error messages.
    example: ClassVar[str]

    @abstractmethod
    def parse(self, text: str) -> ParsedTurn:
        """Split ``text`` into free text, calls and format errors. Never raises."""

    @abstractmethod
    def render(self, content: str, calls: list[ToolCall]) -> str | Message:
        """Write ``content`` and ``calls`` as one assistant turn in this format."""

    def parse_action(self, action: str | Message) -> ParsedTurn:
        """Parse a model turn: text in this format, or an already-parsed message dict."""
        return parse_message(action) if isinstance(action, dict) else self.parse(action)


def _call_from_json(data: Any, where: str, example: str) -> ToolCall | str:
    """A ToolCall from decoded JSON ``{"name", "arguments"}``, or an error message."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return f'{where} needs a "name" string and an "arguments" object, e.g. {example}'
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            return f"{where}: the arguments of {data['name']!r} are not valid JSON ({e.msg})"
    if not isinstance(arguments, dict):
        return f"{where}: the arguments of {data['name']!r} must be a JSON object"
    return ToolCall(data["name"], arguments)


def parse_message(message: Message) -> ParsedTurn:
    """Read an OpenAI-format assistant message ``{"content", "tool_calls": [...]}``."""
    turn = ParsedTurn(content=message.get("content") or "")
    for index, entry in enumerate(message.get("tool_calls") or [], start=1):
        function = entry.get("function", entry) if isinstance(entry, dict) else entry
        call = _call_from_json(function, f"tool call {index}", OpenAIParser.example)
        if isinstance(call, str):
            turn.errors.append(call)
        else:
            call.id = entry.get("id", "") if isinstance(entry, dict) else ""
            turn.tool_calls.append(call)
    return turn


class HermesParser(ToolCallParser):
    """Hermes/Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>."""

    name = "hermes"
    example = '<tool_call>{"name": "TOOL", "arguments": {"ARG": "VALUE"}}</tool_call>'
    _open, _close = "<tool_call>", "</tool_call>"

    def _blocks(self, text: str) -> list[tuple[int, int, str, Any]]:
        """(start, end, body, decoded JSON or the decode error) for each call block.

        A block ends at the first ``</tool_call>`` after which its body is valid JSON, so a
        closing tag inside a string argument does not cut the call short; an unclosed last
        block still counts (generation often stops right before the tag).
        """
        blocks, position = [], 0
        while (start := text.find(self._open, position)) != -1:
            body_start = start + len(self._open)
            ends = [m.start() for m in re.finditer(re.escape(self._close), text[body_start:])]
            candidates = [body_start + e for e in ends] + [len(text)]
            first: tuple[int, int, str, Any] | None = None
            for end in candidates:
                body = text[body_start:end].strip()
                try:
                    decoded: Any = json.loads(body)
                except json.JSONDecodeError as e:
                    decoded = e
                stop = min(end + len(self._close), len(text))
                first = first or (start, stop, body, decoded)
                if not isinstance(decoded, json.JSONDecodeError):
                    blocks.append((start, stop, body, decoded))
                    break
            else:
                assert first is not None
                blocks.append(first)
            position = blocks[-1][1]
        return blocks

    def parse(self, text: str) -> ParsedTurn:
        blocks = self._blocks(text)
        content, position = [], 0
        for start, stop, _, _ in blocks:
            content.append(text[position:start])
            position = stop
        content.append(text[position:])
        turn = ParsedTurn(content="".join(content).replace(self._close, "").strip())
        for index, (_, _, body, decoded) in enumerate(blocks, start=1):
            where = f"tool call {index}"
            if isinstance(decoded, json.JSONDecodeError):
                turn.errors.append(
                    f"{where} is not valid JSON ({decoded.msg} at column {decoded.colno}):"
                    f" {body[:200]!r}. Write it as {self.example}"
                )
                continue
            call = _call_from_json(decoded, where, self.example)
            (turn.errors if isinstance(call, str) else turn.tool_calls).append(call)
        return turn

    def render(self, content: str, calls: list[ToolCall]) -> str:
        blocks = [
            "<tool_call>\n"
            + json.dumps({"name": c.name, "arguments": c.arguments})
            + "\n</tool_call>"
            for c in calls
        ]
        return "\n".join(([content] if content else []) + blocks)


class XMLParser(ToolCallParser):
    """Qwen3-Coder XML: <function=name><parameter=p>value</parameter></function>.

    Values are text; a tool's schema converts them (``"3"`` to ``3`` for an integer).
    """

    name = "xml"
    example = "<function=TOOL><parameter=ARG>VALUE</parameter></function>"
    _function = re.compile(r"<function=([^>\s]*)>(.*?)(?:</function>|\Z)", re.DOTALL)
    _parameter = re.compile(r"<parameter=([^>\s]*)>(.*?)(</parameter>|\Z)", re.DOTALL)

    def parse(self, text: str) -> ParsedTurn:
        content = self._function.sub("", text)
        content = re.sub(r"</?tool_call>", "", content).strip()
        turn = ParsedTurn(content=content)
        for index, match in enumerate(self._function.finditer(text), start=1):
            name, body, where = match.group(1), match.group(2), f"tool call {index}"
            if not name:
                turn.errors.append(f"{where} has no function name. Write it as {self.example}")
                continue
            arguments, error = {}, None
            for param in self._parameter.finditer(body):
                if not param.group(1) or not param.group(3):
                    error = (
                        f"{where}: parameter {param.group(1)!r} of {name!r} is not"
                        f" closed with </parameter>. Write it as {self.example}"
                    )
                    break
                value = param.group(2)
                value = value[1:] if value.startswith("\n") else value
                arguments[param.group(1)] = value[:-1] if value.endswith("\n") else value
            if error:
                turn.errors.append(error)
            else:
                turn.tool_calls.append(ToolCall(name, arguments))
        return turn

    def render(self, content: str, calls: list[ToolCall]) -> str:
        def text(value: Any) -> str:
            return value if isinstance(value, str) else json.dumps(value)

        blocks = [
            "<tool_call>\n<function="
            + c.name
            + ">\n"
            + "".join(f"<parameter={k}>\n{text(v)}\n</parameter>\n" for k, v in c.arguments.items())
            + "</function>\n</tool_call>"
            for c in calls
        ]
        return "\n".join(([content] if content else []) + blocks)


class OpenAIParser(ToolCallParser):
    """OpenAI tool_calls: the action is the assistant message itself (or its JSON)."""

    name = "openai"
    example = (
        '{"role": "assistant", "tool_calls": [{"type": "function", "function":'
        ' {"name": "TOOL", "arguments": "{\\"ARG\\": \\"VALUE\\"}"}}]}'
    )

    def parse(self, text: str) -> ParsedTurn:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return ParsedTurn(content=text)
        if isinstance(data, dict) and "tool_calls" in data:
            return parse_message(data)
        return ParsedTurn(content=text)

    def render(self, content: str, calls: list[ToolCall]) -> Message:
        message: Message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [c.to_openai() for c in calls]
        return message
