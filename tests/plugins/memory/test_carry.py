"""A memory env pays for answers from its memory, not from history the agent carries in its
own context: its window shows the env's replies alone, and no reply repeats the agent
(memory.carry-in-message and memory.carry-in-echo were paid 1.0 on every task of all three
envs before, 2026-12-02)."""

from __future__ import annotations

import pytest

from agentgym.plugins.memory.base import MemoryTaskEnv
from agentgym.rollout.validate import validate

CARRY = ["memory.carry-in-message", "memory.carry-in-echo"]


@pytest.mark.parametrize("env_id", ["memory-sessions-small", "memory-sessions",
                                    "memory-chunked"])
def test_carrying_the_history_in_its_own_context_is_not_paid(env_id):
    report = validate(env_id, {}, None, n=3, probes=CARRY)
    assert report.ok, report.failed  # the oracle is still paid; neither probe is
    counts = report.probe_counts()
    assert [(counts[p]["played"], counts[p]["paid"]) for p in CARRY] == [(3, 0), (3, 0)]


def test_the_carry_probes_are_paid_where_the_window_shows_the_agent(monkeypatch):
    """The probes can fail: with a window of whole turns and errors that repeat the
    arguments, both carry the history and are paid."""
    monkeypatch.setattr(MemoryTaskEnv, "context_replies_only", False)
    counts = validate("memory-sessions", {}, None, n=2, probes=CARRY).probe_counts()
    assert [(counts[p]["played"], counts[p]["paid"]) for p in CARRY] == [(2, 2), (2, 2)]
