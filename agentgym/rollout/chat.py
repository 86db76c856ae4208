"""Token-in/token-out chat: tokenizing only what the environment adds.

The rollout loop keeps the exact token sequence the model saw and appends each sampled
completion as is. Only the environment's new messages are tokenized, with the chat
template (delta tokenization): the template renders a fixed conversation ending in an
assistant turn, then the same conversation plus the new messages and the generation
prompt; the tokens of the difference, taken from just after the end-of-turn token, are
what the environment contributes. This is exact only when the template is
*prefix-preserving* (rendering more messages never rewrites earlier ones), which
:func:`check_prefix_preserving` verifies once per tokenizer.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from agentgym.core.errors import AgentGymError, InvalidArgumentError
from agentgym.core.parsers import HermesParser, ToolCall, ToolCallParser

Message = dict[str, Any]

_BASE: list[Message] = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "A"},
]


class TemplateError(AgentGymError):
    """The tokenizer's chat template cannot be used token-in/token-out."""


def _render(tokenizer: Any, messages: list[Message], tools: list | None,
            generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                         add_generation_prompt=generation_prompt)


def check_prefix_preserving(tokenizer: Any) -> None:
    """Raise :class:`TemplateError` unless rendering a longer conversation keeps the
    rendering of every earlier message, tool calls and tool results included."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise TemplateError(
            f"tokenizer {type(tokenizer).__name__} has no chat template; load one that has"
            " (an instruct model's tokenizer) or set tokenizer.chat_template"
        )
    call = {"id": "call_1_0", "type": "function",
            "function": {"name": "f", "arguments": json.dumps({"x": 1})}}
    conversation = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "<think>t</think>A", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1_0", "name": "f", "content": "R"},
        {"role": "assistant", "content": "<think>t2</think>B"},
        {"role": "user", "content": "U2"},
    ]
    for cut in (3, 4, 5):
        head = _render(tokenizer, conversation[:cut], None, False)
        whole = _render(tokenizer, conversation, None, False)
        if not whole.startswith(head):
            raise TemplateError(
                "the tokenizer's chat template is not prefix-preserving: rendering a longer"
                f" conversation rewrites message {cut} and earlier (templates that strip"
                " earlier reasoning, like some Qwen3 templates, do this). Token-in/token-out"
                " rollouts would train on text the model never saw. Fix: use a template that"
                " keeps earlier turns verbatim (e.g. TRL's *_training.jinja variants in"
                " trl/chat_templates/), or set tokenizer.chat_template to one"
            )


class ChatTokens:
    """Tokenizes prompts and environment deltas for one tokenizer (and tool list)."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None):
        if not getattr(tokenizer, "_agentgym_checked", False):
            check_prefix_preserving(tokenizer)
            tokenizer._agentgym_checked = True
        self.tokenizer, self.tools = tokenizer, tools
        self.eos_id = tokenizer.eos_token_id
        self.eos_text = tokenizer.eos_token
        if self.eos_id is None:
            raise TemplateError("the tokenizer has no eos token: set tokenizer.eos_token to the"
                                " end-of-turn token of its chat template")
        base = _render(tokenizer, _BASE, None, False)
        end = base.rfind(self.eos_text)
        if end < 0:
            raise TemplateError(
                f"the chat template does not end assistant turns with eos {self.eos_text!r};"
                " set tokenizer.eos_token to its end-of-turn token"
            )
        self._base, self._cut = base, end + len(self.eos_text)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def prompt(self, messages: list[Message]) -> list[int]:
        """The opening prompt, tools and generation prompt included."""
        return self.encode(_render(self.tokenizer, messages, self.tools, True))

    def observation(self, messages: list[Message]) -> list[int]:
        """Tokens the template puts after an assistant turn's end-of-turn token, for the
        environment's ``messages`` and the next generation prompt."""
        full = _render(self.tokenizer, _BASE + messages, None, True)
        if not full.startswith(self._base[: self._cut]):
            raise TemplateError("the chat template rendered earlier turns differently when"
                                " new messages were added; it is not prefix-preserving")
        return self.encode(full[self._cut:])

    def decode_turn(self, token_ids: list[int]) -> str:
        """The text of a sampled turn, without its end-of-turn token."""
        if token_ids and token_ids[-1] == self.eos_id:
            token_ids = token_ids[:-1]
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)


def tokenize_conversation(
    tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]] | None = None,
    parser: ToolCallParser | None = None, train_from: int = 0,
) -> tuple[list[int], list[int], list[int]]:
    """``(prompt_ids, completion_ids, loss_mask)`` of a finished conversation, tokenized
    exactly as the rollout loop would have recorded it.

    * prompt: every message before the first assistant message, rendered with ``tools``
      and the generation prompt (what :meth:`ChatTokens.prompt` gives the model);
    * each assistant turn: its rendering by the chat template up to and including the
      end-of-turn (eos) token, mask 1, as if the model had sampled that text and then eos;
    * between turns: what the template adds after the eos token (the newline, the env's
      messages, the next generation prompt), mask 0, tokenized as
      :meth:`ChatTokens.observation` does.

    The completion ends with the last assistant turn's eos token: messages after it (the
    final tool results) are never shown to the model, as in the loop. Tool-call arguments
    stored as JSON strings (OpenAI format, as episodes store them) are decoded to objects
    first, so the template writes them as JSON objects, the way the env's tool-call parser
    reads them back. A template that does not write ``tool_calls`` at all (SmolLM2's, for
    one) would turn a tool-calling turn into an empty one; such a turn is written as text
    in ``parser``'s format instead (default: Hermes ``<tool_call>``, the envs' default).

    ``train_from`` (a message index) makes the assistant turns before it part of the
    prompt: the sample of a context window that starts with the agent's previous turn.

    Raises:
        ValueError: the conversation has no assistant message.
        TemplateError: the chat template cannot be used token-in/token-out.
    """
    chat = ChatTokens(tokenizer, tools)
    messages = [with_decoded_arguments(m) for m in messages]
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"
             and i >= train_from]
    if not turns:
        raise InvalidArgumentError(
            f"the conversation ({len(messages)} messages) has no assistant message"
            f"{f' from message {train_from} on' if train_from else ''}, so it has no model"
            " tokens to train on; pass a finished episode's messages"
        )
    prompt_ids = chat.prompt(messages[: turns[0]])
    completion: list[int] = []
    mask: list[int] = []
    previous = None
    for index in turns:
        if previous is not None:
            delta = chat.observation(messages[previous + 1 : index])
            completion += delta
            mask += [0] * len(delta)
        turn = _assistant_turn(chat, messages[:index], messages[index], parser)
        completion += turn
        mask += [1] * len(turn)
        previous = index
    return prompt_ids, completion, mask


def with_decoded_arguments(message: Message) -> Message:
    """A copy of ``message`` whose tool-call arguments are objects, not JSON strings."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    decoded = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            # Not JSON: kept as written, and the template shows it as the string it is.
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments) if arguments.strip() else {}
            call = {**call, "function": {**function, "arguments": arguments}}
        decoded.append(call)
    return {**message, "tool_calls": decoded}


def _assistant_turn(chat: ChatTokens, history: list[Message], message: Message,
                    parser: ToolCallParser | None = None) -> list[int]:
    """The tokens of one assistant turn in its context, up to and including eos."""
    text = _assistant_text(chat, history, message)
    calls = message.get("tool_calls") or []
    if any(_call_name(call) not in text for call in calls):  # the template dropped them
        parser = parser or HermesParser()
        written = parser.render(message.get("content") or "", [
            ToolCall(_call_name(c), c.get("function", {}).get("arguments") or {}) for c in calls])
        if not isinstance(written, str):
            raise TemplateError(
                f"the chat template does not write an assistant turn's tool_calls, and the"
                f" {parser.name!r} format has no text form to write them in instead: use a"
                " text tool-call format (hermes or xml) or a template that renders tool_calls")
        text = _assistant_text(chat, history, {"role": "assistant", "content": written})
    return [*chat.encode(text), chat.eos_id]


def _call_name(call: Any) -> str:
    return str((call.get("function") or {}).get("name", "")) if isinstance(call, dict) else ""


def _assistant_text(chat: ChatTokens, history: list[Message], message: Message) -> str:
    """The text the template writes for one assistant turn, between the generation prompt
    and the end-of-turn token."""
    head = _render(chat.tokenizer, history, chat.tools, True)
    full = _render(chat.tokenizer, [*history, message], chat.tools, False)
    end = full.rfind(chat.eos_text)
    if not full.startswith(head) or end < len(head):
        raise TemplateError(
            "the chat template does not render an assistant turn as the generation prompt"
            f" followed by the turn and eos {chat.eos_text!r}; it cannot be used to tokenize"
            " conversations as the model would have written them"
        )
    return full[len(head) : end]
