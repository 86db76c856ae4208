"""Tool-call formats: reading calls out of model text and writing them back.

A :class:`ToolCallParser` turns one assistant turn into a :class:`ParsedTurn` (the free
text, the well-formed calls, and an error message for each malformed one) and renders calls
back into its format, which is how a task's reference solution is written in the format of
the env it runs in. ``parse(render(content, calls))`` gives back the same calls.

Built in (the ``core`` plugin registers them through the ``agentgym_tool_call_parsers``
hook):

* ``hermes``: Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
* ``xml``: Qwen3-Coder style ``<function=name><parameter=p>value</parameter></function>``
* ``llama3-json``: Llama 3.1-3.3 ``{"name": ..., "parameters": {...}}`` (after an optional
  ``<|python_tag|>``; several separated by ``;``)
* ``mistral``: Mistral ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]``, and the newer
  ``[TOOL_CALLS]name[ARGS]{...}``
* ``openai``: an assistant message with OpenAI ``tool_calls`` (as a dict or its JSON text)

The model families' names say whose chat templates write (and whose models emit) each
format: ``agentgym serve --tool-parser`` takes the one of the model it serves.

An action that is already a message dict is read as OpenAI format whatever the env's
parser is (:func:`parse_message`).

Parsing never raises, whatever the model wrote: every malformed call becomes an entry of
:attr:`ParsedTurn.errors`, a message the model can act on. Model output is bounded before
it is decoded, so that no input costs more than a little time and memory: a turn over
:data:`MAX_TURN_CHARS`, a call's JSON over :data:`MAX_CALL_CHARS`, nested deeper than
:data:`MAX_JSON_DEPTH` or with a number longer than :data:`MAX_NUMBER_DIGITS` digits is
refused with a message that says which limit it passed.
"""

from __future__ import annotations

import json
import re
import secrets
import string
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

Message = dict[str, Any]

#: Characters of one assistant turn that are read; a longer turn is one format error.
MAX_TURN_CHARS = 1_000_000
#: Characters of one tool call's JSON (its arguments included).
MAX_CALL_CHARS = 200_000
#: Nesting of arrays and objects in one call's JSON.
MAX_JSON_DEPTH = 64
#: Digits of one number literal in a call's JSON (Python refuses ints of over 4300).
MAX_NUMBER_DIGITS = 1000
#: Tool calls read from one turn; the rest are reported, not run.
MAX_CALLS_PER_TURN = 64

_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_DIGIT_RUN = re.compile(r'"(?:[^"\\]|\\.)*"|\d{' + str(MAX_NUMBER_DIGITS + 1) + ',}')


class TooLargeError(ValueError):
    """Model output past one of this module's bounds; the message says which and why."""


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (strings skipped)."""
    depth = deepest = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def bounded_json(text: str, what: str = "the tool call") -> Any:
    """``json.loads(text)`` within the bounds above. Raises :class:`json.JSONDecodeError`
    for invalid JSON and :class:`TooLargeError` for JSON past a bound, before decoding it
    (so that neither the decoder's recursion nor Python's int conversion can fail)."""
    if len(text) > MAX_CALL_CHARS:
        raise TooLargeError(f"{what} is {len(text)} characters long; the limit is"
                            f" {MAX_CALL_CHARS}: write large content in several calls")
    if (depth := json_depth(text)) > MAX_JSON_DEPTH:
        raise TooLargeError(f"{what} nests {depth} levels of arrays/objects; the limit is"
                            f" {MAX_JSON_DEPTH}")
    if any(m.group()[0] != '"' for m in _DIGIT_RUN.finditer(text)):
        raise TooLargeError(f"{what} has a number of over {MAX_NUMBER_DIGITS} digits: pass"
                            " it as a string")
    try:
        return json.loads(text)
    except RecursionError:  # a bracket hidden from the scan above; still refused cleanly
        raise TooLargeError(f"{what} nests too deeply") from None


def value_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting of lists and dicts in ``value``, counted up to ``limit + 1`` (an
    already-decoded action can be nested deeper than anything could recurse through)."""
    deepest, frontier = 0, [(value, 1)]
    while frontier:
        item, depth = frontier.pop()
        if isinstance(item, (list, tuple, dict)):
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            children = item.values() if isinstance(item, dict) else item
            frontier.extend((child, depth + 1) for child in children)
    return deepest


@dataclass
class ToolCall:
    """One call: the tool's name and its arguments (already decoded from JSON).

    Args:
        name: the tool called.
        arguments: its arguments by name.
        id: the call's id (``call_<turn>_<index>`` once the env has numbered it), which the
            tool's answer names as ``tool_call_id``.
    """

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
    """What one assistant turn said: free text, well-formed calls, format errors.

    Args:
        content: the turn's text outside its tool calls.
        tool_calls: the well-formed calls, in order.
        errors: one message for each malformed call, shown to the agent.
    """

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

    def call_id(self) -> str:
        """A new id for a call parsed from this format, of the shape its models' chat
        templates accept when the call comes back in a conversation (what ``agentgym
        serve`` answers with)."""
        return f"call_{uuid.uuid4().hex[:12]}"

    def parse_action(self, action: Any) -> ParsedTurn:
        """Parse a model turn: text in this format, or an already-parsed message dict.
        Anything else (None, bytes, a number) is one format error, never an exception."""
        if isinstance(action, dict):
            return parse_message(action)
        if not isinstance(action, str):
            return ParsedTurn(content="", errors=[
                f"a turn must be text (or an assistant message dict), got"
                f" {type(action).__name__}. Write tool calls as {self.example}"])
        return _turn_too_long(action) or self.parse(action)


def _call_from_json(data: Any, where: str, example: str) -> ToolCall | str:
    """A ToolCall from decoded JSON ``{"name", "arguments"}``, or an error message."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return f'{where} needs a "name" string and an "arguments" object, e.g. {example}'
    name = data["name"]
    if len(name) > 200:
        return f"{where}: a tool name of {len(name)} characters is no tool's name"
    arguments = data.get("arguments", data.get("parameters", {}))
    from_text = isinstance(arguments, str)  # bounded by bounded_json as it is decoded
    if from_text:
        try:
            arguments = (bounded_json(arguments, f"{where}: the arguments of {name!r}")
                         if arguments.strip() else {})
        except json.JSONDecodeError as e:
            return f"{where}: the arguments of {name!r} are not valid JSON ({e.msg})"
        except TooLargeError as e:
            return str(e)
    if not isinstance(arguments, dict):
        return f"{where}: the arguments of {name!r} must be a JSON object"
    if value_depth(arguments) > MAX_JSON_DEPTH:
        return f"{where}: the arguments of {name!r} nest deeper than {MAX_JSON_DEPTH} levels"
    if not from_text and len(json.dumps(arguments, default=str)) > MAX_CALL_CHARS:
        return (f"{where}: the arguments of {name!r} are over {MAX_CALL_CHARS} characters"
                " of JSON: write large content in several calls")
    return ToolCall(name, arguments)


def _turn_too_long(text: str) -> ParsedTurn | None:
    """The format error of a turn past :data:`MAX_TURN_CHARS`, or None."""
    if len(text) <= MAX_TURN_CHARS:
        return None
    return ParsedTurn(content=text[:2000], errors=[
        f"your turn is {len(text)} characters long and was not read; the limit is"
        f" {MAX_TURN_CHARS}. Make fewer or smaller tool calls"])


def parse_message(message: Message) -> ParsedTurn:
    """Read an OpenAI-format assistant message ``{"content", "tool_calls": [...]}``."""
    content = message.get("content") or ""
    if not isinstance(content, str):
        return ParsedTurn(content="", errors=[
            f'the message\'s "content" must be text, got {type(content).__name__}'])
    if (too_long := _turn_too_long(content)) is not None:
        return too_long
    turn = ParsedTurn(content=content)
    entries = message.get("tool_calls") or []
    if not isinstance(entries, list):
        turn.errors.append(f'"tool_calls" must be a list of calls, e.g. {OpenAIParser.example}')
        return turn
    for index, entry in enumerate(entries, start=1):
        if index > MAX_CALLS_PER_TURN:
            turn.errors.append(_too_many_calls(len(entries)))
            break
        function = entry.get("function", entry) if isinstance(entry, dict) else entry
        call = _call_from_json(function, f"tool call {index}", OpenAIParser.example)
        if isinstance(call, str):
            turn.errors.append(call)
        else:
            call_id = entry.get("id", "") if isinstance(entry, dict) else ""
            call.id = call_id if isinstance(call_id, str) else ""
            turn.tool_calls.append(call)
    return turn


def _too_many_calls(count: int) -> str:
    return (f"only the first {MAX_CALLS_PER_TURN} of {count} tool calls were read: make at"
            f" most {MAX_CALLS_PER_TURN} calls a turn")


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
            if len(blocks) > MAX_CALLS_PER_TURN:
                break
            body_start = start + len(self._open)
            ends = []  # a few closing tags are tried, not every one of a flood
            for match in re.finditer(re.escape(self._close), text[body_start:]):
                ends.append(body_start + match.start())
                if len(ends) == 8:
                    break
            candidates = [*ends, len(text)]
            first: tuple[int, int, str, Any] | None = None
            for end in candidates:
                body = text[body_start:end].strip()
                try:
                    decoded: Any = bounded_json(body)
                except (json.JSONDecodeError, TooLargeError) as e:
                    decoded = e
                stop = min(end + len(self._close), len(text))
                first = first or (start, stop, body, decoded)
                if not isinstance(decoded, (json.JSONDecodeError, TooLargeError)):
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
            if index > MAX_CALLS_PER_TURN:
                turn.errors.append(_too_many_calls(text.count(self._open)))
                break
            if isinstance(decoded, TooLargeError):
                turn.errors.append(f"{where}: {decoded}")
                continue
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
            if index > MAX_CALLS_PER_TURN:
                turn.errors.append(_too_many_calls(text.count("<function=")))
                break
            if len(body) > MAX_CALL_CHARS:
                turn.errors.append(f"{where} is {len(body)} characters long; the limit is"
                                   f" {MAX_CALL_CHARS}: write large content in several calls")
                continue
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


_DECODER = json.JSONDecoder()


def _json_at(text: str, start: int, where: str) -> tuple[Any, int] | str:
    """The JSON value that begins at ``text[start]`` and the index just after it, or an
    error message; bounded as :func:`bounded_json` is (a window of
    :data:`MAX_CALL_CHARS`, the decoder's recursion and Python's int digits caught)."""
    window = text[start:start + MAX_CALL_CHARS + 1]
    try:
        value, end = _DECODER.raw_decode(window)
    except json.JSONDecodeError as e:
        if len(window) > MAX_CALL_CHARS:
            return (f"{where} is over {MAX_CALL_CHARS} characters long: write large content"
                    " in several calls")
        return f"{where} is not valid JSON ({e.msg} at column {e.colno}): {window[:200]!r}"
    except RecursionError:
        return f"{where}: JSON nested too deeply (the limit is {MAX_JSON_DEPTH} levels)"
    except ValueError:  # Python's int conversion: over 4300 digits
        return f"{where}: a number too long to read: pass it as a string"
    if value_depth(value) > MAX_JSON_DEPTH:
        return f"{where}: JSON nested too deeply (the limit is {MAX_JSON_DEPTH} levels)"
    return value, start + end


def _read_call(turn: ParsedTurn, decoded: tuple[Any, int] | str, where: str,
               example: str) -> None:
    """Add the call (or the error) ``decoded`` from :func:`_json_at` to ``turn``."""
    if isinstance(decoded, str):
        turn.errors.append(f"{decoded}. Write it as {example}")
        return
    call = _call_from_json(decoded[0], where, example)
    (turn.errors if isinstance(call, str) else turn.tool_calls).append(call)


class Llama3JSONParser(ToolCallParser):
    """Llama 3.1-3.3 JSON: {"name": ..., "parameters": {...}}, ;-separated."""

    name = "llama3-json"
    example = '{"name": "TOOL", "parameters": {"ARG": "VALUE"}}'
    _tag = "<|python_tag|>"
    # Where the calls begin: the tag, or an object opening with "name" at a line's start.
    _start = re.compile(r'<\|python_tag\|>|^[ \t]*(?=\{\s*"name")', re.MULTILINE)

    def parse(self, text: str) -> ParsedTurn:
        found = self._start.search(text)
        if found is None:
            return ParsedTurn(content=text.strip())
        turn = ParsedTurn(content=text[:found.start()].strip())
        position, index = found.end(), 0
        while True:
            while position < len(text) and (text[position].isspace() or text[position] == ";"):
                position += 1
            if position >= len(text) or text[position] != "{":
                break
            index += 1
            if index > MAX_CALLS_PER_TURN:
                turn.errors.append(_too_many_calls(text.count('"name"')))
                return turn
            where = f"tool call {index}"
            decoded = _json_at(text, position, where)
            if not isinstance(decoded, str) and not (
                    isinstance(decoded[0], dict)
                    and ("parameters" in decoded[0] or "arguments" in decoded[0])):
                break  # JSON that is no call (a "name" in an answer's data): content
            _read_call(turn, decoded, where, self.example)
            if isinstance(decoded, str):
                return turn  # where a call's JSON ends is unknown: the rest is not read
            position = decoded[1]
        rest = text[position:].replace(self._tag, "").strip()
        turn.content = "\n".join(part for part in (turn.content, rest) if part)
        return turn

    def render(self, content: str, calls: list[ToolCall]) -> str:
        rendered = "; ".join(json.dumps({"name": c.name, "parameters": c.arguments})
                             for c in calls)
        return "\n".join(part for part in (content, rendered) if part)


class MistralParser(ToolCallParser):
    """Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}] or [TOOL_CALLS]name[ARGS]{...}."""

    name = "mistral"
    example = '[TOOL_CALLS][{"name": "TOOL", "arguments": {"ARG": "VALUE"}}]'
    _calls, _args, _call_id = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"

    def parse(self, text: str) -> ParsedTurn:
        first = text.find(self._calls)
        if first == -1:
            return ParsedTurn(content=text.strip())
        turn = ParsedTurn(content=text[:first].strip())
        segments = text[first + len(self._calls):].split(self._calls)
        for segment in segments:
            body = segment.strip()
            if body[:1] in ("[", "{"):  # the JSON list of the v3 tokenizers (or one call)
                decoded = _json_at(body, 0, "the list of tool calls")
                if isinstance(decoded, str):
                    turn.errors.append(f"{decoded}. Write them as {self.example}")
                    continue
                entries = decoded[0] if isinstance(decoded[0], list) else [decoded[0]]
                if rest := body[decoded[1]:].strip():  # text after the calls
                    turn.content = "\n".join(part for part in (turn.content, rest) if part)
            else:  # name[ARGS]{...} (with [CALL_ID]id before [ARGS] in some versions)
                name, has_args, arguments = body.partition(self._args)
                name, _, call_id = (part.strip() for part in name.partition(self._call_id))
                if not has_args:
                    turn.errors.append(f"tool call {name[:80]!r} has no {self._args}: write it"
                                       f" as {self._calls}TOOL{self._args}{{...}} or"
                                       f" {self.example}")
                    continue
                decoded = _json_at(arguments.strip() or "{}", 0, f"the arguments of {name!r}")
                if isinstance(decoded, str):
                    turn.errors.append(decoded)
                    continue
                entries = [{"name": name, "arguments": decoded[0], "id": call_id}]
            for entry in entries:
                count = len(turn.tool_calls) + len(turn.errors) + 1
                if count > MAX_CALLS_PER_TURN:
                    turn.errors.append(_too_many_calls(max(count, len(segments))))
                    return turn
                call = _call_from_json(entry, f"tool call {count}", self.example)
                if isinstance(call, str):
                    turn.errors.append(call)
                    continue
                if isinstance(entry.get("id"), str):  # the model's own, as it will see it
                    call.id = entry["id"]
                turn.tool_calls.append(call)
        return turn

    def call_id(self) -> str:
        """Nine letters and digits: Mistral's chat templates refuse any other call id."""
        return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(9))

    def render(self, content: str, calls: list[ToolCall]) -> str:
        rendered = self._calls + json.dumps([{"name": c.name, "arguments": c.arguments}
                                             for c in calls]) if calls else ""
        return "".join(part for part in (content, rendered) if part)


class OpenAIParser(ToolCallParser):
    """OpenAI tool_calls: the action is the assistant message itself (or its JSON)."""

    name = "openai"
    example = (
        '{"role": "assistant", "tool_calls": [{"type": "function", "function":'
        ' {"name": "TOOL", "arguments": "{\\"ARG\\": \\"VALUE\\"}"}}]}'
    )

    def parse(self, text: str) -> ParsedTurn:
        try:
            data = bounded_json(text, "the message")
        except json.JSONDecodeError:
            return ParsedTurn(content=text)
        except TooLargeError as e:
            return ParsedTurn(content=text[:2000], errors=[str(e)])
        if isinstance(data, dict) and "tool_calls" in data:
            return parse_message(data)
        return ParsedTurn(content=text)

    def render(self, content: str, calls: list[ToolCall]) -> Message:
        message: Message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [c.to_openai() for c in calls]
        return message
