"""A token-level policy (the real tiny model) on the memory envs: with a moving context
window the episode ends with an error that says what to do; with the whole history in
context (``context_budget=None``) it plays like any env."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("transformers", reason="the tiny model needs the train extra")


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from agentgym.rollout.policies.hf import hf_policy
    from agentgym.testing import build_tiny_model

    return hf_policy(str(build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")))


def play(policy, **env_kwargs):
    from agentgym.rollout.evaluate import rollout
    from agentgym.rollout.loop import RolloutConfig

    config = RolloutConfig(max_total_tokens=4096)
    [trajectory] = asyncio.run(rollout("memory-sessions", policy, 1, config=config,
                                       env_kwargs={"sessions": 8, **env_kwargs}))
    return trajectory


def test_a_moving_window_ends_the_episode_with_the_fix(policy):
    trajectory = play(policy, context_budget=256)
    assert trajectory.finish_reason == "error"
    assert "context_budget=None" in trajectory.error and trajectory.completion_ids


def test_the_whole_history_in_context_plays_as_usual(policy):
    trajectory = play(policy, context_budget=None)
    assert trajectory.error is None and trajectory.finish_reason in (
        "submitted", "max_turns", "context_limit")
    assert len(trajectory.loss_mask) == len(trajectory.completion_ids) > 0
