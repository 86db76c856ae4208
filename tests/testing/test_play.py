"""play_turns: a task's solution scores, a bare turn does not, and turns that run out say so."""

import pytest

import agentgym
from agentgym.testing import play_turns


def test_play_turns_returns_the_final_reward_and_info():
    env = agentgym.make("calculator")
    try:
        env.reset(seed=0)
        task_id = env.task.id
        solution = list(env.task.solution)
        reward, info = play_turns(env, solution, options={"task_id": task_id})
        assert reward == 1.0
        assert info["finish_reason"] == "submitted"
        with pytest.raises(AssertionError, match="ran out"):
            play_turns(env, [], options={"task_id": task_id})
    finally:
        env.close()
