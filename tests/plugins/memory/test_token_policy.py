"""A token-level policy on the memory envs: each turn's window shows the env's replies alone,
so every turn starts a new sample whose prompt is the window, and the SFT dataset splits
demonstrations at the same places, token for token."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers", reason="the tiny model needs the train extra")

ENV = {"sessions": 6, "questions": ["single", "update"], "context_budget": 256}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from agentgym.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def play(policy, env_id="memory-sessions", tool_schemas=True, **env_kwargs):
    from agentgym.rollout.evaluate import rollout
    from agentgym.rollout.loop import RolloutConfig

    config = RolloutConfig(max_total_tokens=4096, tool_schemas=tool_schemas)
    [trajectory] = asyncio.run(rollout(env_id, policy, 1, config=config,
                                       env_kwargs={**ENV, **env_kwargs}))
    return trajectory


def test_the_tiny_model_plays_through_a_moving_window(model_dir):
    from agentgym.rollout.policies.hf import hf_policy

    trajectory = play(hf_policy(str(model_dir)), extra_turns=2)
    assert trajectory.error is None, trajectory.error
    assert len(trajectory.windows) == trajectory.turns and trajectory.context_replies_only
    samples = trajectory.samples()
    assert len(samples) == trajectory.turns >= 2  # one sample per turn: each window is new
    for sample in samples:
        assert len(sample.loss_mask) == len(sample.completion_ids) > 0
        assert sample.loss_mask[0] == 1 and len(sample.logprobs) == len(sample.loss_mask)


@pytest.mark.parametrize("tool_schemas", [True, False])
def test_sft_splits_a_demonstration_where_the_loop_splits_the_episode(tokenizer,
                                                                       tool_schemas):
    """The oracle's episode, replayed token by token (each turn as the chat template
    writes it), gives the very rows the SFT dataset makes of the oracle's messages."""
    from agentgym.core.policies import OraclePolicy
    from agentgym.rollout.chat import ChatTokens, _assistant_text, with_decoded_arguments
    from agentgym.testing import ScriptedTokens
    from agentgym.trainers.sft import trajectory_dataset

    demonstration = play(OraclePolicy(), tool_schemas=tool_schemas)
    assert demonstration.reward == 1.0 and demonstration.context_replies_only
    assert len(set(demonstration.windows)) >= 3  # the window moved: sessions left the context

    chat = ChatTokens(tokenizer, demonstration.tools if tool_schemas else None)
    messages = [with_decoded_arguments(m) for m in demonstration.messages]
    texts = [_assistant_text(chat, messages[:i], m) for i, m in enumerate(messages)
             if m["role"] == "assistant"]
    replayed = play(ScriptedTokens(tokenizer, texts), tool_schemas=tool_schemas)
    assert replayed.reward == 1.0 and replayed.windows == demonstration.windows

    rows = trajectory_dataset([demonstration], tokenizer, tool_schemas=tool_schemas)
    assert len(rows) == demonstration.turns  # each turn its own window
    for row, sample in zip(rows, replayed.samples(), strict=True):
        assert row["input_ids"] == sample.prompt_ids + sample.completion_ids
        assert row["completion_mask"] == [0] * len(sample.prompt_ids) + sample.loss_mask
    # Token-level records make the same rows, earlier samples first.
    again = trajectory_dataset([replayed], tokenizer)
    assert again["input_ids"] == rows["input_ids"]


def test_the_window_s_prompt_shows_only_the_window(tokenizer):
    """A later sample's prompt holds the system prompt and the latest turn, not the first
    session, which has left the context."""
    from agentgym.core.policies import OraclePolicy
    from agentgym.rollout.chat import ChatTokens, _assistant_text, with_decoded_arguments
    from agentgym.testing import ScriptedTokens

    demonstration = play(OraclePolicy())
    chat = ChatTokens(tokenizer, demonstration.tools)
    messages = [with_decoded_arguments(m) for m in demonstration.messages]
    texts = [_assistant_text(chat, messages[:i], m) for i, m in enumerate(messages)
             if m["role"] == "assistant"]
    replayed = play(ScriptedTokens(tokenizer, texts))
    first_session = demonstration.messages[1]["content"]
    last_prompt = tokenizer.decode(replayed.prompt_ids)
    assert "long-term memory" in last_prompt  # the system prompt stays
    assert first_session not in last_prompt
    assert first_session in tokenizer.decode(replayed.samples()[0].prompt_ids)


def test_without_a_budget_every_reply_stays_in_view(tokenizer):
    """No budget keeps the whole history in view, but still none of the agent's own
    messages: the last prompt shows the first session, and no call the agent made."""
    from agentgym.core.policies import OraclePolicy
    from agentgym.rollout.chat import ChatTokens, _assistant_text, with_decoded_arguments
    from agentgym.testing import ScriptedTokens

    demonstration = play(OraclePolicy(), context_budget=None, tool_schemas=False)
    chat = ChatTokens(tokenizer, None)
    messages = [with_decoded_arguments(m) for m in demonstration.messages]
    texts = [_assistant_text(chat, messages[:i], m) for i, m in enumerate(messages)
             if m["role"] == "assistant"]
    replayed = play(ScriptedTokens(tokenizer, texts), context_budget=None, tool_schemas=False)
    assert replayed.reward == 1.0 and set(replayed.windows) == {0}
    last = replayed.samples()[-1]
    prompt = tokenizer.decode(last.prompt_ids)
    assert demonstration.messages[1]["content"] in prompt and "[memory_search] " in prompt
    assert "<tool_call>" not in prompt  # the calls are gone; their results stay
    assert "<tool_call>" in tokenizer.decode(last.completion_ids)


def test_a_window_outside_the_conversation_is_the_envs_error():
    import agentgym
    from agentgym.core.policies import OraclePolicy
    from agentgym.rollout.loop import EpisodeRunner

    env = agentgym.make("memory-sessions-small")
    runner = EpisodeRunner(env, OraclePolicy(), env.unwrapped.task_ids()[0], 0)
    runner.messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert runner._move_window(1) and not runner._move_window(1)
    for start in (-1, 3):
        with pytest.raises(ValueError, match=f"context_start'\\]={start}, outside"):
            runner._move_window(start)
    env.close()
