"""The context window: which messages of a long conversation stay in view."""

import pytest

from agentgym.core.context import estimate_tokens, visible, window_start


def conversation(turns: int, chars: int = 400) -> list[dict]:
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "task"}]
    for turn in range(turns):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "look", "arguments": "{}"}}]})
        messages.append({"role": "tool", "content": f"{turn}:" + "x" * chars})
    return messages


def test_the_window_keeps_the_latest_whole_turns_that_fit():
    messages = conversation(20)
    start = window_start(messages, 500)
    shown = visible(messages, start)
    assert shown[0] == messages[0]  # the system message stays
    assert messages[start]["role"] == "assistant"  # never a tool result without its call
    assert sum(map(estimate_tokens, shown)) <= 500
    assert sum(map(estimate_tokens, visible(messages, start - 2))) > 500  # as many as fit
    assert shown[-1] is messages[-1]


def test_everything_fits_in_a_large_budget_and_the_last_turn_always_stays():
    messages = conversation(3)
    assert window_start(messages, 100_000) == 0 and visible(messages, 0) == messages
    huge = conversation(3, chars=50_000)
    assert window_start(huge, 10) == len(huge) - 2  # the latest turn, whatever it costs
    with pytest.raises(ValueError):
        window_start(messages, 0)


def test_token_estimates_count_text_and_tool_calls():
    assert estimate_tokens({"role": "user", "content": "x" * 40}) == 10 + 4
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "abcd", "arguments": {"k": "v" * 6}}}]}
    assert estimate_tokens(call) == 5 + 4  # "abcd" and {"k": "vvvvvv"}: 19 characters


def test_a_window_of_replies_shows_none_of_the_agent_s_messages():
    messages = conversation(6, chars=40)
    messages[-2]["content"] = "CARRY everything I saw"
    start = window_start(messages, 1, replies_only=True)
    assert start == len(messages) - 1  # the latest turn's reply, not its call
    shown = visible(messages, start, replies_only=True)
    assert [m["role"] for m in shown] == ["system", "user"]
    assert shown[1]["content"] == "[tool] " + messages[-1]["content"]
    # A larger budget keeps more replies, merged into one message, still without the calls.
    start = window_start(messages, 60, replies_only=True)
    shown = visible(messages, start, replies_only=True)
    assert 1 < start < len(messages) - 1 and len(shown) == 2
    assert "CARRY" not in shown[1]["content"] and "look" not in shown[1]["content"]
    assert shown[1]["content"].count("[tool] ") == sum(
        m["role"] == "tool" for m in messages[start:])
    assert window_start(messages, 100_000, replies_only=True) == 0
    assert visible(messages, 0, replies_only=True)[1]["content"].startswith("task\n\n[tool] 0:")
