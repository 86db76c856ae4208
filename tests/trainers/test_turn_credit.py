"""``turn_credit``: each sample of a multi-sample episode is credited against the episodes
of its group that reached the same state (its prompt), and the trainer trains each row with
its own advantage."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from agentgym.rollout.trajectory import Trajectory
from agentgym.trainers import trl_adapter
from agentgym.trainers.grpo import turn_advantages
from agentgym.trainers.trl_adapter import ExtraRow, ScoredBatchHook

NOTE, RIGHT, WRONG_A, WRONG_B, QUESTION = [1, 2], [3, 4], [5, 6], [7, 8], [9]


def _episode(reward: float, *prompts: list[int]) -> Trajectory:
    """An episode whose samples start at ``prompts`` (its states), each one token long."""
    *earlier, last = prompts
    return Trajectory(
        env="e", task_id="t", episode=0, reward=reward, prompt_ids=last,
        completion_ids=[50], loss_mask=[1],
        earlier_samples=[{"token_ids": [*p, 50], "loss_mask": [0] * len(p) + [1]}
                         for p in earlier])


def test_a_right_turn_after_a_wrong_one_is_not_pushed_down():
    # Four episodes of one task share the first state (the session to note). Two write
    # the right note and pass; two write wrong notes and then answer exactly what their
    # note says (each the only episode in its state), so they fail.
    group = [_episode(1.0, NOTE, RIGHT), _episode(1.0, NOTE, RIGHT),
             _episode(0.0, NOTE, WRONG_A), _episode(0.0, NOTE, WRONG_B)]
    credits = turn_advantages(group, [True] * 4)
    scale = float(torch.tensor([1.0, 1.0, 0.0, 0.0]).std()) + 1e-4  # TRL's group scale
    episode = [0.5 / scale, 0.5 / scale, -0.5 / scale, -0.5 / scale]  # TRL's advantages
    for credit, advantage in zip(credits, episode, strict=True):
        assert credit is not None
        assert credit[0] == pytest.approx(advantage)  # the note: where the group parted
        assert credit[1] == pytest.approx(0.0)  # the answer: as good as its state allowed


def test_a_wrong_turn_after_a_shared_state_is_pushed_down():
    # All four wrote the right note; in the shared answer state one answered wrong.
    group = [_episode(r, NOTE, RIGHT + QUESTION) for r in (1.0, 1.0, 1.0, 0.0)]
    credits = turn_advantages(group, [True] * 4)
    # Every state was reached by all four, so each turn has TRL's advantage; the four
    # notes were the same tokens, whose advantages sum to 0.
    assert [c[0] for c in credits] == [c[1] for c in credits]
    assert sum(c[0] for c in credits) == pytest.approx(0.0, abs=1e-6)
    assert credits[3][1] < 0 < credits[0][1]


def test_one_sample_episodes_and_masked_ones():
    group = [_episode(r, NOTE) for r in (1.0, 0.0, 0.0)] + [_episode(1.0, NOTE)]
    credits = turn_advantages(group, [True, True, True, False])
    scale = float(torch.tensor([1.0, 0.0, 0.0]).std()) + 1e-4
    mean = 1 / 3
    assert [c[0] for c in credits[:3]] == pytest.approx([(1 - mean) / scale,
                                                         -mean / scale, -mean / scale])
    assert credits[3] is None  # masked: TRL's (it is out of the loss anyway)
    assert turn_advantages(group[:1], [True]) == [None]  # no group to compare with


class _ScoredByTRL:
    """What GRPOTrainer._generate_and_score_completions returns for two episodes."""

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        return {"prompt_ids": torch.tensor([[1, 2], [1, 3]]),
                "prompt_mask": torch.ones(2, 2, dtype=torch.long),
                "completion_ids": torch.tensor([[5], [6]]),
                "completion_mask": torch.ones(2, 1, dtype=torch.long),
                "tool_mask": torch.ones(2, 1, dtype=torch.long),
                "advantages": torch.tensor([0.7, -0.7]),
                "num_items_in_batch": torch.tensor(2)}


class _Hooked(ScoredBatchHook, _ScoredByTRL):
    model = SimpleNamespace(training=True)
    # A per-row loss ("grpo"): every row stays, the zero-advantage one included.
    args = SimpleNamespace(steps_per_generation=1, loss_type="grpo", top_entropy_quantile=1.0)
    beta = 0.0
    _tokenizer = SimpleNamespace(pad_token_id=0, eos_token_id=0)
    accelerator = SimpleNamespace(gather=lambda tensor: tensor)

    def row_advantages(self) -> list[float | None]:
        return [0.0, None]  # the first row its own, the second TRL's

    def extra_rows(self) -> list[ExtraRow]:
        return [ExtraRow(0, [1, 2], [7], [1], advantage=-0.25),  # its own
                ExtraRow(1, [1, 3], [8], [1])]  # its episode's row's

    def on_scored_batch(self, batch: trl_adapter.ScoredBatch) -> None:
        self.batch = batch


def test_rows_train_with_their_own_advantages():
    trainer = _Hooked()
    output = trainer._generate_and_score_completions({})
    assert output["advantages"].tolist() == pytest.approx([0.0, -0.7, -0.25, -0.7])
    assert trainer.batch.advantages.tolist() == pytest.approx([0.0, -0.7, -0.25, -0.7])
    assert output["num_items_in_batch"] == 4


def test_turn_credit_needs_trls_group_scale(tiny_model_dir: Any, tmp_path: Any):
    from agentgym.core.errors import InvalidArgumentError
    from agentgym.trainers.grpo import GRPOOptions, train_grpo

    with pytest.raises(InvalidArgumentError, match="scale_rewards='batch'"):
        train_grpo(tiny_model_dir, "calculator", output_dir=tmp_path,
                   args={"scale_rewards": "batch", "max_steps": 1,
                         "per_device_train_batch_size": 4, "num_generations": 2},
                   options=GRPOOptions(turn_credit=True, prefetch=False))
