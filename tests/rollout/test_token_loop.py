"""Token in, token out: the sequence a trainer sees is exactly what the model saw and sampled."""

import asyncio
import json
import subprocess

import pytest

from agentgym.core import OraclePolicy
from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.chat import ChatTokens, TemplateError, check_prefix_preserving
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.rollout.policies.hf import HFPolicy


class Recording:
    """Wraps a token policy and keeps every generation it returned."""

    def __init__(self, policy):
        self.policy, self.tokenizer, self.generations = policy, policy.tokenizer, []

    async def generate(self, prompt_ids, sampling):
        generation = await self.policy.generate(prompt_ids, sampling)
        self.generations.append((list(prompt_ids), generation))
        return generation


class OracleTokens:
    """A token policy that 'samples' the oracle's turns: the text, then end of turn."""

    def __init__(self, tokenizer, env):
        self.tokenizer, self.env = tokenizer, env

    async def generate(self, prompt_ids, sampling):
        episode = self.env.episode
        text = OraclePolicy().act(episode.messages, episode.task)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return Generation(ids, [-0.5] * len(ids), "stop")


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return HFPolicy(str(tiny_model_dir))


def segments(mask, values):
    """Runs of values where mask is 1."""
    runs, current = [], []
    for m, v in zip(mask, values, strict=True):
        if m:
            current.append(v)
        elif current:
            runs.append(current)
            current = []
    return runs + ([current] if current else [])


def test_masks_and_logprobs_line_up_with_sampled_tokens(policy):
    recording = Recording(policy)
    config = RolloutConfig(Sampling(max_tokens=24, temperature=1.0, seed=3), max_total_tokens=4096)
    trajectories = asyncio.run(rollout("calculator", recording, 4, config=config,
                                       env_kwargs={"max_turns": 3}))
    for trajectory in trajectories:
        assert len(trajectory.completion_ids) == len(trajectory.loss_mask) == len(
            trajectory.logprobs)
        full = trajectory.prompt_ids + trajectory.completion_ids
        mine = [g for p, g in recording.generations if full[:len(p)] == p]
        assert len(mine) == trajectory.turns >= 1
        sampled = [g.token_ids for g in mine]
        # Every sampled token is in the sequence, masked 1, with its logprob; nothing else is.
        assert segments(trajectory.loss_mask, trajectory.completion_ids) == sampled
        assert segments(trajectory.loss_mask, trajectory.logprobs) == [g.logprobs for g in mine]
        assert all(lp == 0.0 for m, lp in zip(trajectory.loss_mask, trajectory.logprobs,
                                              strict=True) if not m)
        # The decoded sampled tokens are exactly the text the env received each turn.
        assistant = [m for m in trajectory.messages if m["role"] == "assistant"]
        for generation, message in zip(mine, assistant, strict=True):
            text = policy.tokenizer.decode(
                [t for t in generation.token_ids if t != policy.tokenizer.eos_token_id])
            if not message.get("tool_calls"):  # a turn without a readable call is kept as is
                assert text == message["content"]


def test_delta_tokenization_reproduces_the_chat_template(tiny_model_dir):
    from transformers import AutoTokenizer

    import agentgym

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    env = agentgym.make("calculator").unwrapped
    # One env, one episode at a time: the policy reads that env's current episode.
    trajectories = asyncio.run(rollout("calculator", OracleTokens(tokenizer, env), 3,
                                       make_env=lambda: env,
                                       pipeline=PipelineConfig(mode="sync", concurrency=1)))
    for trajectory in trajectories:
        assert trajectory.reward == 1.0 and trajectory.finish_reason == "submitted"
        # Render the same conversation with the template in one go: same text, token for token.
        conversation, tools = [], None
        for message in trajectory.messages:
            if message["role"] == "assistant":
                calls = message.get("tool_calls", [])
                text = "\n".join(
                    "<tool_call>\n" + json.dumps({"name": c["function"]["name"],
                                                  "arguments": json.loads(
                                                      c["function"]["arguments"])})
                    + "\n</tool_call>" for c in calls)
                conversation.append({"role": "assistant", "content": text})
            else:
                conversation.append(message)
        tools = env.tool_schemas()
        rendered = tokenizer.apply_chat_template(conversation[:-1], tools=tools, tokenize=False)
        decoded = tokenizer.decode(trajectory.prompt_ids + trajectory.completion_ids)
        assert decoded + "\n" == rendered
        # Only the model's turns are masked 1.
        model_text = tokenizer.decode([t for t, m in zip(trajectory.completion_ids,
                                                         trajectory.loss_mask, strict=True) if m])
        assert model_text.count("<tool_call>") == 2 and "<tool_response>" not in model_text


def test_token_budget_truncates_with_its_reason(policy):
    config = RolloutConfig(Sampling(max_tokens=64), max_total_tokens=300)
    trajectories = asyncio.run(rollout("calculator", policy, 2, config=config,
                                       env_kwargs={"max_turns": 50}))
    for trajectory in trajectories:
        assert trajectory.finish_reason == "context_limit", trajectory.error
        # every sampled token within the budget (a turn samples at most what is left);
        # only the env's answer to the last turn, never sampled, may reach past it
        mask = trajectory.loss_mask
        last_sampled = len(trajectory.prompt_ids) + max(i for i, m in enumerate(mask) if m)
        assert last_sampled < 300 <= len(trajectory.prompt_ids) + len(mask)
        assert trajectory.reward == 0.0


def test_wall_time_limit(policy):
    config = RolloutConfig(Sampling(max_tokens=8), max_wall_s=0.001)
    trajectory = asyncio.run(rollout("calculator", policy, 1, config=config))[0]
    assert trajectory.finish_reason == "wall_time"


def test_templates_that_rewrite_history_are_refused(tiny_model_dir):
    from transformers import AutoTokenizer

    from agentgym.rollout.tiny_model import chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    check_prefix_preserving(tokenizer)
    tokenizer.chat_template = chat_template("qwen3")  # strips earlier <think> blocks
    with pytest.raises(TemplateError, match=r"not prefix-preserving.*_training\.jinja"):
        ChatTokens(tokenizer)


@pytest.mark.slow
def test_eval_with_the_tiny_model_on_cpu(tiny_model_dir, agentgym_cli):
    out = subprocess.run(
        [agentgym_cli, "eval", "calculator", "--policy", f"hf:{tiny_model_dir}", "-n", "8",
         "--max-tokens", "32", "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["n"] == 8 and summary["errors"] == 0
    assert summary["policy"] == f"hf:{tiny_model_dir}"
    assert set(summary["stage_time_s"]) == {"init", "generate", "tool", "grade", "queue"}


def test_prompts_without_tool_schemas(policy):
    """tool_schemas=False leaves the chat template's tools section out of the prompt; the
    trajectory still records the schemas."""
    sampling = Sampling(max_tokens=8)
    with_tools, without = (
        asyncio.run(rollout("calculator", policy, 1,
                            config=RolloutConfig(sampling, tool_schemas=flag)))[0]
        for flag in (True, False))
    text = policy.tokenizer.decode(without.prompt_ids)
    assert "<tools>" in policy.tokenizer.decode(with_tools.prompt_ids)
    assert "<tools>" not in text and "What is" in text
    assert len(without.prompt_ids) < len(with_tools.prompt_ids) / 3
    assert without.tools == with_tools.tools and without.tools
