"""GRPO learns: from an SFT checkpoint that picks the right answer about half the time, a
few seeded GRPO steps on the env's reward raise the mean reward (CPU, tiny model).

The env asks for one of two colours; only ``blue`` scores. The SFT demonstrations submit
``blue`` and ``red`` equally often, so the checkpoint samples each about half the time at
temperature 1: every group of attempts has reward variance, and what the policy gradient
has to learn is the colour (and, for the few turns that miss the submit call, the format).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import agentgym
from agentgym.core import (
    AgentEnv,
    EnvRegistration,
    Reward,
    RewardResult,
    Submitted,
    Task,
    TaskList,
    hookimpl,
    tool,
)
from agentgym.core.policies import Sampling, ScriptedPolicy
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.trainers.grpo import GRPOOptions, train_grpo
from agentgym.trainers.sft import train_sft, trajectory_dataset

ENV_ID = "test-pick-a-colour"
ROLLOUT = RolloutConfig(Sampling(max_tokens=24, temperature=1.0), max_total_tokens=256,
                        tool_schemas=False)


class Blue(Reward):
    def score(self, episode: Any) -> RewardResult:
        return RewardResult(float(episode.submitted and episode.submission == "blue"))


class PickEnv(AgentEnv):
    """Submit a colour: ``blue`` scores 1, anything else 0."""

    reward = Blue()

    def __init__(self, **kwargs: Any):
        tasks = TaskList([Task(f"pick-{i}", "Submit a colour: red or blue.") for i in range(8)])
        super().__init__(tasks, max_turns=2, **kwargs)

    @tool
    def submit(self, answer: str) -> str:
        """Submit a colour.

        Args:
            answer: red or blue.
        """
        raise Submitted(answer)


class Plugin:
    @hookimpl
    def agentgym_envs(self) -> list:
        return [EnvRegistration(ENV_ID, PickEnv, "pick a colour (GRPO learning test)")]


def colour(episode: int) -> str:
    return '<tool_call>{"name": "submit", "arguments": {"answer": "%s"}}</tool_call>' % (
        "blue" if episode % 2 else "red")


@pytest.fixture(scope="module")
def half_right_checkpoint(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
                          ) -> Path:
    """SFT on demonstrations that submit blue and red equally often."""
    from transformers import AutoTokenizer

    agentgym.register_plugin(Plugin(), name="test-pick")
    played = iter(range(10**6))
    policy = ScriptedPolicy(lambda messages, task: colour(next(played)))
    demos = asyncio.run(rollout(ENV_ID, policy, 64, config=ROLLOUT,
                                pipeline=PipelineConfig(mode="sync", concurrency=1)))
    assert {t.reward for t in demos} == {0.0, 1.0}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    dataset = trajectory_dataset(demos, tokenizer, tool_schemas=False)
    out = tmp_path_factory.mktemp("sft")
    train_sft(str(tiny_model_dir), dataset, output_dir=out, tokenizer=tokenizer,
              args={"max_steps": 300, "per_device_train_batch_size": 16, "learning_rate": 3e-3,
                    "lr_scheduler_type": "constant", "save_strategy": "no", "seed": 0,
                    "report_to": "none"})
    return out / "final"


@pytest.mark.slow
def test_grpo_raises_the_reward_of_a_half_right_policy(half_right_checkpoint: Path,
                                                       tmp_path: Path) -> None:
    from transformers import TrainerCallback

    rewards: list[float] = []

    class Rewards(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            if logs and "env/pass_rate" in logs:
                rewards.append(logs["env/pass_rate"])

    # A learning rate the tiny model trains stably at. Two CI runs diverged after the
    # reward had risen (kl/ref 0.06 -> 4.5 -> 62 from step 7, the pass rate back to 0.1-0.3)
    # at 1e-3 and at 5e-4 over 20 steps. Swept here with two runs side by side (CI's two
    # workers), six seeds each, every one passing: at 5e-4 over 20 steps kl/ref peaked at
    # 3.4-5.2 in two of six; at 2e-4 over 40 steps it peaked under 1.2 in four of six (3.9
    # and 10 in the others, once the reward was up), and the reward rose by 0.21-0.40.
    steps = 40
    train_grpo(str(half_right_checkpoint), ENV_ID, output_dir=tmp_path / "grpo",
               args={"max_steps": steps, "per_device_train_batch_size": 32,
                     "num_generations": 8, "learning_rate": 2e-4,
                     "lr_scheduler_type": "constant", "logging_steps": 1,
                     "save_strategy": "no", "seed": 0},
               # An episode that never submits (max_turns) scores 0 here and keeps its
               # gradient: the test measures the whole reward, format included.
               options=GRPOOptions(dynamic_sampling=False, prefetch=False,
                                   mask_finish_reasons=("error",)),
               rollout=ROLLOUT, pipeline=PipelineConfig(concurrency=64),
               callbacks=[Rewards()])
    assert len(rewards) == steps
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert 0.2 < first < 0.8, rewards  # the checkpoint really is half right
    assert last > first + 0.15, f"GRPO did not raise the reward: {rewards}"
