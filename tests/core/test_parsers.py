import json

import pytest

from agentgym.core.parsers import (
    HermesParser,
    Llama3JSONParser,
    MistralParser,
    OpenAIParser,
    ToolCall,
    XMLParser,
    parse_message,
)

PARSERS = [HermesParser(), XMLParser(), Llama3JSONParser(), MistralParser(), OpenAIParser()]
CALLS = [
    ToolCall("calculator", {"expression": "3 * (4 + 5)"}),
    ToolCall("write", {"path": "a.py", "text": 'print("hé </tool_call> ok")\n\nx = 1'}),
]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.name)
@pytest.mark.parametrize("content", ["", "Let me compute this."])
def test_render_then_parse_gives_back_the_calls(parser, content):
    rendered = parser.render(content, CALLS[:1])
    turn = parser.parse_action(rendered)
    assert turn.errors == []
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        (c.name, c.arguments) for c in CALLS[:1]
    ]
    assert turn.content == content


@pytest.mark.parametrize("parser", [HermesParser(), Llama3JSONParser(), MistralParser(),
                                    OpenAIParser()], ids=lambda p: p.name)
def test_multiple_calls_with_tricky_text(parser):
    # XML carries values as text: the tricky value is covered in its own test.
    turn = parser.parse_action(parser.render("", CALLS))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        (c.name, c.arguments) for c in CALLS
    ]


def test_hermes_reads_an_unclosed_last_call():
    turn = HermesParser().parse('ok <tool_call>{"name": "submit", "arguments": {"answer": "4"}}')
    assert turn.tool_calls[0].arguments == {"answer": "4"}
    assert turn.content == "ok"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('<tool_call>{"name": "submit", "arguments": {answer: 4}}</tool_call>', "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'needs a "name" string'),
        ('<tool_call>["submit"]</tool_call>', 'needs a "name" string'),
        ('<tool_call>{"name": "f", "arguments": "{bad"}</tool_call>', "not valid JSON"),
        ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be a JSON object"),
    ],
)
def test_hermes_malformed_calls_become_errors(text, message):
    turn = HermesParser().parse(text)
    assert turn.tool_calls == []
    assert len(turn.errors) == 1 and message in turn.errors[0]
    assert "<tool_call>" in turn.errors[0] or "arguments" in turn.errors[0]


def test_hermes_keeps_good_calls_beside_bad_ones():
    turn = HermesParser().parse(
        '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{oops</tool_call>'
    )
    assert [c.name for c in turn.tool_calls] == ["a"]
    assert "tool call 2" in turn.errors[0]


def test_xml_parses_qwen3_coder_style():
    text = (
        "I'll look.\n<tool_call>\n<function=view>\n<parameter=path>\nsrc/a.py\n</parameter>\n"
        "<parameter=lines>\n[1, 5]\n</parameter>\n</function>\n</tool_call>"
    )
    turn = XMLParser().parse(text)
    assert turn.content == "I'll look."
    assert turn.tool_calls[0].name == "view"
    assert turn.tool_calls[0].arguments == {"path": "src/a.py", "lines": "[1, 5]"}


def test_xml_multiline_value_round_trips():
    call = ToolCall("write", {"text": "line 1\n\n  line 3"})
    turn = XMLParser().parse(XMLParser().render("", [call]))
    assert turn.tool_calls[0].arguments == call.arguments


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<function=>\n</function>", "no function name"),
        ("<function=f>\n<parameter=x>\n1\n</function>", "not closed with </parameter>"),
    ],
)
def test_xml_malformed_calls_become_errors(text, message):
    turn = XMLParser().parse(text)
    assert turn.tool_calls == [] and message in turn.errors[0]


def test_openai_message_dicts_and_json_text():
    message = OpenAIParser().render("hi", CALLS[:1])
    assert message["tool_calls"][0]["function"]["arguments"] == json.dumps(CALLS[0].arguments)
    assert parse_message(message).tool_calls[0].arguments == CALLS[0].arguments
    assert OpenAIParser().parse(json.dumps(message)).tool_calls[0].name == "calculator"
    assert OpenAIParser().parse("plain text").content == "plain text"
    bad = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{x"}}]}
    assert "not valid JSON" in parse_message(bad).errors[0]


LLAMA3, MISTRAL = Llama3JSONParser(), MistralParser()


@pytest.mark.parametrize("parser,text,calls,content", [
    (LLAMA3, '<|python_tag|>{"name": "f", "parameters": {"x": 1}}', [("f", {"x": 1})], ""),
    (LLAMA3, '{"name": "a", "parameters": {}}; {"name": "b", "arguments": {"y": "}"}}',
              [("a", {}), ("b", {"y": "}"})], ""),
    (LLAMA3, 'I will look.\n{"name": "f", "parameters": {"x": 1}}\nThen answer.', [("f", {"x": 1})],
              "I will look.\nThen answer."),
    (LLAMA3, '{"name": "f", "parameters": "{\\"x\\": 2}"}', [("f", {"x": 2})], ""),
    # JSON with a "name" that is no call (no parameters): an answer's data, not a call
    (LLAMA3, 'Here:\n{"name": "Bob", "age": 3}', [], 'Here:\n{"name": "Bob", "age": 3}'),
    (LLAMA3, 'no call {"name": "f", "parameters": {}} mid-line', [],
              'no call {"name": "f", "parameters": {}} mid-line'),
    (MISTRAL, '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]',
               [("a", {"x": 1}), ("b", {})], ""),
    (MISTRAL, 'Sure.[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[CALL_ID]c0ffee123[ARGS]{}',
               [("a", {"x": 1}), ("b", {})], "Sure."),
    (MISTRAL, '[TOOL_CALLS]{"name": "a", "arguments": {"x": 1}} done', [("a", {"x": 1})], "done"),
    (MISTRAL, "no calls here", [], "no calls here"),
], ids=lambda value: value.name if hasattr(value, "parse") else None)
def test_llama3_and_mistral_read_their_models_calls(parser, text, calls, content):
    """Llama 3 (after a python tag, ;-separated, after prose) and Mistral (the JSON list,
    and name[ARGS]{...} with or without a call id)."""
    turn = parser.parse(text)
    assert turn.errors == []
    assert [(c.name, c.arguments) for c in turn.tool_calls] == calls
    assert turn.content == content


@pytest.mark.parametrize("parser,text,message", [
    (LLAMA3, '{"name": "f", "parameters": {x: 1}}', "not valid JSON"),
    (LLAMA3, '{"name": 3, "parameters": {}}', 'needs a "name" string'),
    (LLAMA3, '{"name": "f", "parameters": [1]}', "must be a JSON object"),
    (MISTRAL, '[TOOL_CALLS][{"name": "f", "arguments": {}}', "not valid JSON"),
    (MISTRAL, '[TOOL_CALLS]f{"x": 1}', "has no [ARGS]"),
    (MISTRAL, '[TOOL_CALLS]f[ARGS]{"x": }', "not valid JSON"),
    (MISTRAL, '[TOOL_CALLS][{"arguments": {}}]', 'needs a "name" string'),
])
def test_llama3_and_mistral_malformed_calls_become_errors(parser, text, message):
    turn = parser.parse(text)
    assert turn.tool_calls == []
    assert len(turn.errors) == 1 and message in turn.errors[0]


def test_mistral_keeps_the_models_call_ids():
    turn = MISTRAL.parse('[TOOL_CALLS]a[CALL_ID]c0ffee123[ARGS]{}[TOOL_CALLS]b[ARGS]{}')
    assert [c.id for c in turn.tool_calls] == ["c0ffee123", ""]
    turn = MISTRAL.parse('[TOOL_CALLS][{"name": "a", "arguments": {}, "id": "abcDEF123"}]')
    assert turn.tool_calls[0].id == "abcDEF123"
