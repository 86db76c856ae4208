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
