"""``baseline: batch`` (every episode against the whole rollout call's mean reward) and
``negative_scale`` (negative advantages scaled down before training)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("trl")

from agentgym.core.errors import InvalidArgumentError
from agentgym.rollout.trajectory import Trajectory
from agentgym.trainers.grpo import GRPOOptions, batch_advantages


def _episode(reward: float, samples: int = 1) -> Trajectory:
    return Trajectory(
        env="e", task_id="t", episode=0, reward=reward, prompt_ids=[1], completion_ids=[50],
        loss_mask=[1], earlier_samples=[{"token_ids": [1, 50], "loss_mask": [0, 1]}
                                        for _ in range(samples - 1)])


def test_flat_groups_get_signal_against_the_batch():
    passing = [_episode(1.0), _episode(1.0, samples=3)]  # a group that always passes
    failing = [_episode(0.0), _episode(0.0)]  # one that always fails
    mixed = [_episode(1.0), _episode(0.0)]
    credits = batch_advantages([passing, failing, mixed], [[True] * 2] * 3)
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    scale = float(rewards.std()) + 1e-4
    up, down = 0.5 / scale, -0.5 / scale
    assert credits[0] == [pytest.approx([up]), pytest.approx([up] * 3)]  # every sample
    assert credits[1] == [pytest.approx([down]), pytest.approx([down])]
    assert credits[2] == [pytest.approx([up]), pytest.approx([down])]


def test_unscorable_episodes_are_left_out_of_the_baseline():
    credits = batch_advantages([[_episode(1.0), _episode(0.0)], [_episode(1.0)]],
                               [[True, True], [False]])
    scale = float(torch.tensor([1.0, 0.0]).std()) + 1e-4
    assert credits[0][0] == pytest.approx([0.5 / scale])  # mean 0.5, not 2/3
    assert credits[1] == [None]
    assert batch_advantages([[_episode(1.0)]], [[True]]) == [[None]]  # nothing to compare


def test_a_batch_baseline_needs_every_group():
    with pytest.raises(InvalidArgumentError, match="dynamic_sampling: false"):
        GRPOOptions(baseline="batch")  # dynamic sampling is on by default
    with pytest.raises(InvalidArgumentError, match="turn_credit: false"):
        GRPOOptions(baseline="batch", dynamic_sampling=False, turn_credit=True)
    with pytest.raises(InvalidArgumentError, match="'group' or 'batch'"):
        GRPOOptions(baseline="global")
    with pytest.raises(InvalidArgumentError, match=r"negative_scale must be in \[0, 1\]"):
        GRPOOptions(negative_scale=1.5)
    GRPOOptions(baseline="batch", dynamic_sampling=False, negative_scale=0.0)


def test_the_rollout_hands_batch_advantages_to_the_trainer():
    from agentgym.trainers import grpo

    rollout = grpo.EnvRollout.__new__(grpo.EnvRollout)
    rollout.options = GRPOOptions(baseline="batch", dynamic_sampling=False)
    rollout.tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=0)
    groups = [[_episode(1.0), _episode(1.0, samples=2)], [_episode(0.0), _episode(0.0)]]
    episodes = SimpleNamespace(groups=groups, masked=set())
    out = rollout._output(episodes)
    assert out["env_reward"] == [1.0, 1.0, 0.0, 0.0]
    scale = float(torch.tensor([1.0, 1.0, 0.0, 0.0]).std()) + 1e-4
    assert rollout.take_row_advantages() == pytest.approx([0.5 / scale] * 2 + [-0.5 / scale] * 2)
    extra = rollout.take_extra_rows()
    assert [row.advantage for row in extra] == pytest.approx([0.5 / scale])


def test_negative_scale_scales_only_negative_advantages():
    from agentgym.trainers.grpo import AgentGRPOTrainer as trainer_class

    trainer = SimpleNamespace(env_rollout=SimpleNamespace(
        options=GRPOOptions(negative_scale=0.25)))
    shaped = trainer_class.shape_advantages(trainer, torch.tensor([1.0, -1.0, 0.0, -0.4]))
    assert shaped.tolist() == pytest.approx([1.0, -0.25, 0.0, -0.1])
    trainer.env_rollout.options = GRPOOptions()
    same = torch.tensor([1.0, -1.0])
    assert trainer_class.shape_advantages(trainer, same) is same


def test_a_batch_baseline_scales_by_the_batch_std(tiny_model_dir, tmp_path):
    from agentgym.trainers.grpo import train_grpo

    with pytest.raises(InvalidArgumentError, match="scale_rewards='none'"):
        train_grpo(tiny_model_dir, "calculator", output_dir=tmp_path,
                   args={"scale_rewards": "none", "max_steps": 1,
                         "per_device_train_batch_size": 4, "num_generations": 2},
                   options=GRPOOptions(baseline="batch", dynamic_sampling=False,
                                       prefetch=False))
