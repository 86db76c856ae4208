"""tokenize_conversation: a finished text-level episode tokenized as the loop records one."""

import asyncio
import json

import pytest

import agentgym
from agentgym.core import OraclePolicy, ScriptedPolicy
from agentgym.core.policies import Generation
from agentgym.rollout.chat import tokenize_conversation
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.pipeline import PipelineConfig

SYNC = PipelineConfig(mode="sync", concurrency=1)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


class Replay:
    """A token policy that 'samples' a text policy's turns: encode(text), then eos.

    It plays the episode of one env (the rollout runs that env alone, in sync mode)."""

    def __init__(self, tokenizer, env, text_policy):
        self.tokenizer, self.env, self.text_policy = tokenizer, env, text_policy

    async def generate(self, prompt_ids, sampling):
        episode = self.env.episode
        text = self.text_policy.act(episode.messages, episode.task)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return Generation(ids, [0.0] * len(ids), "stop")


def play(policy_for_env, n):
    """Trajectories of ``n`` calculator episodes on one env, in sync mode."""
    env = agentgym.make("calculator").unwrapped
    try:
        return asyncio.run(rollout("calculator", policy_for_env(env), n, make_env=lambda: env,
                                   pipeline=SYNC))
    finally:
        env.close()


def decoded_arguments(messages):
    """The messages with tool-call arguments as objects (how the template should see them)."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = [{**c, "function": {**c["function"],
                                        "arguments": json.loads(c["function"]["arguments"])}}
                     for c in m["tool_calls"]]
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def runs(mask, ids):
    """The runs of ids where mask is 1."""
    found, current = [], []
    for m, i in zip(mask, ids, strict=True):
        if m:
            current.append(i)
        elif current:
            found, current = [*found, current], []
    return found + ([current] if current else [])


def test_oracle_episode_tokenizes_as_the_template_renders_it(tokenizer):
    trajectories = asyncio.run(rollout("calculator", OraclePolicy(), 2))
    parser = agentgym.make("calculator").unwrapped.parser
    for trajectory in trajectories:
        assert trajectory.reward == 1.0 and trajectory.tools  # the loop records the tools
        prompt, completion, mask = tokenize_conversation(tokenizer, trajectory.messages,
                                                         trajectory.tools)
        assert len(completion) == len(mask)
        # The whole sequence is the template's rendering of the conversation up to the last
        # assistant turn's end-of-turn token (the final tool result is never shown).
        messages = decoded_arguments(trajectory.messages)
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        rendered = tokenizer.apply_chat_template(messages[: last + 1], tools=trajectory.tools,
                                                 tokenize=False)
        assert tokenizer.decode(prompt + completion) + "\n" == rendered
        assert tokenizer.decode(prompt) == tokenizer.apply_chat_template(
            messages[:2], tools=trajectory.tools, tokenize=False, add_generation_prompt=True)
        # Mask 1 is exactly the assistant turns, each through <|im_end|>.
        turns = [t.split("<|im_end|>")[0] + "<|im_end|>"
                 for t in rendered.split("<|im_start|>assistant\n")[1:]]
        assert [tokenizer.decode(run) for run in runs(mask, completion)] == turns
        assert all(run[-1] == tokenizer.eos_token_id for run in runs(mask, completion))
        # The env's parser reads each trained turn back into the calls the episode made.
        calls = [[(c["function"]["name"], c["function"]["arguments"]) for c in m["tool_calls"]]
                 for m in messages if m["role"] == "assistant"]
        texts = [tokenizer.decode(run[:-1]) for run in runs(mask, completion)]
        parsed = [parser.parse(text) for text in texts]
        assert [[(c.name, c.arguments) for c in p.tool_calls] for p in parsed] == calls
        assert not any(p.errors for p in parsed)


@pytest.mark.parametrize("turns", [
    None,  # the oracle
    [
        "Let me think about it first.",  # no tool call: the env asks for one
        '<tool_call>\n{"name": "calculator"\n</tool_call>',  # malformed: an error message
        'I will compute it.\n<tool_call>\n{"name": "calculator", "arguments":'
        ' {"expression": "2 + 3"}}\n</tool_call>\n<tool_call>\n{"name": "calculator",'
        ' "arguments": {"expression": "4 * 5"}}\n</tool_call>',  # text and two calls
        '<tool_call>\n{"name": "submit", "arguments": {"answer": "5"}}\n</tool_call>',
    ],
], ids=["oracle", "scripted"])
def test_matches_what_the_token_loop_records(tokenizer, turns):
    def text_policy():
        return OraclePolicy() if turns is None else ScriptedPolicy(turns)

    text = play(lambda env: text_policy(), 2)
    tokens = play(lambda env: Replay(tokenizer, env, text_policy()), 2)
    for by_text, by_tokens in zip(text, tokens, strict=True):
        assert by_text.messages == by_tokens.messages and by_tokens.completion_ids
        assert tokenize_conversation(tokenizer, by_text.messages, by_text.tools) == (
            by_tokens.prompt_ids, by_tokens.completion_ids, by_tokens.loss_mask)


def test_json_string_arguments_are_decoded_and_errors_are_clear(tokenizer):
    trajectory = asyncio.run(rollout("calculator", OraclePolicy(), 1))[0]
    as_objects = decoded_arguments(trajectory.messages)
    assert tokenize_conversation(tokenizer, as_objects, trajectory.tools) == (
        tokenize_conversation(tokenizer, trajectory.messages, trajectory.tools))
    assert isinstance(trajectory.messages[2]["tool_calls"][0]["function"]["arguments"], str)
    with pytest.raises(ValueError, match="no assistant message"):
        tokenize_conversation(tokenizer, trajectory.messages[:2], trajectory.tools)


def test_a_template_that_drops_tool_calls_gets_them_as_text(tokenizer, content_only_template):
    import copy

    content_only = copy.deepcopy(tokenizer)
    content_only.chat_template = content_only_template
    text = play(lambda env: OraclePolicy(), 2)
    tokens = play(lambda env: Replay(content_only, env, OraclePolicy()), 2)
    parser = agentgym.make("calculator").unwrapped.parser
    for by_text, by_tokens in zip(text, tokens, strict=True):
        prompt, completion, mask = tokenize_conversation(content_only, by_text.messages)
        # the same tokens as the model writing the turns in the env's format, not empty turns
        assert (prompt, completion, mask) == (
            by_tokens.prompt_ids, by_tokens.completion_ids, by_tokens.loss_mask)
        turns = [content_only.decode(run[:-1]) for run in runs(mask, completion)]
        calls = [[(c["function"]["name"], json.loads(c["function"]["arguments"]))
                  for c in m["tool_calls"]] for m in by_text.messages if m["role"] == "assistant"]
        assert [[(c.name, c.arguments) for c in parser.parse(t).tool_calls] for t in turns] \
            == calls
