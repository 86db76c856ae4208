"""mini-swe-agent, unmodified and installed from PyPI, plays swe-synth tasks inside the
task's sandbox (local and docker) through the capture proxy: a scripted model answering
in mini-swe-agent's own action format with the task's reference fix is paid 1.0, one that
does nothing useful 0.0, and the recorded sample is exactly what the model sampled."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("torch", reason="the capture server needs the train extra")

import agentgym  # noqa: F401  (registers the envs)
from agentgym.rollout.harness import HarnessRunner
from agentgym.testing import ScriptedTokens

pytestmark = pytest.mark.slow  # installs mini-swe-agent (once) and synthesizes tasks


def action(thought: str, command: str) -> str:
    """A turn in mini-swe-agent's text-based format (its mini_textbased.yaml)."""
    return f"THOUGHT: {thought}\n\n```mswea_bash_command\n{command}\n```"


SUBMIT = action("Done.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")


@pytest.fixture(scope="module")
def standin_tasks(scales_standin, tmp_path_factory) -> Path:
    """Two swe-synth tasks of the three-function stand-in project."""
    from agentgym.plugins.swe.synth import synthesize

    rows = synthesize(*scales_standin, 2, progress=False)
    path = tmp_path_factory.mktemp("swe-synth-msa") / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    from agentgym.testing import build_tiny_model

    return AutoTokenizer.from_pretrained(
        build_tiny_model(tmp_path_factory.getbasetemp() / "tiny-model"))


@pytest.fixture(scope="module")
def pypi() -> None:
    """mini-swe-agent installed (from PyPI, once per machine); skips only when PyPI cannot
    be reached and it is not installed yet."""
    from agentgym.core.harness import HARNESS_MOUNT
    from agentgym.core.pyenv import PythonEnvError, build_python_env
    from agentgym.plugins.harnesses import mini_swe_agent

    harness = mini_swe_agent()
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        unreachable = None
    except OSError as error:
        unreachable = error
    try:
        build_python_env(harness.requirements, HARNESS_MOUNT, name=f"harness-{harness.id}")
    except PythonEnvError:
        if unreachable is None:
            raise
        pytest.skip(f"PyPI is unreachable ({unreachable}) and mini-swe-agent is not installed")


def play(backend: str, tasks: Path, texts: list[str], tokenizer):
    env = gym.make("swe-synth", tasks=str(tasks), backend=backend)
    task_id = env.unwrapped.task_ids()[0]
    patch = env.unwrapped.instances[task_id].patch
    policy = ScriptedTokens(tokenizer, [t.replace("{patch}", patch) for t in texts])

    async def go():
        try:
            return await runner.play(env, task_id, env_id="swe-synth")
        finally:
            await env.unwrapped.aclose()

    with HarnessRunner("mini-swe-agent", policy) as runner:
        return asyncio.run(go()), policy


def test_mini_swe_agent_with_the_reference_fix_is_paid(backend, pypi, standin_tasks,
                                                       tokenizer) -> None:
    fix = action("Apply the fix.", "cat > /tmp/fix.patch <<'PATCH_EOF'\n{patch}PATCH_EOF\n"
                 "git apply /tmp/fix.patch && git diff --stat")
    record, policy = play(backend, standin_tasks, [fix, SUBMIT], tokenizer)
    assert record.error is None, record.error
    assert record.finish_reason == "harness_exit", record.metrics["harness"]
    assert record.reward == 1.0, record.metrics
    assert record.metrics["resolved"] is True
    # mini-swe-agent keeps its history: one sample, its mask exactly the sampled tokens.
    assert (record.metrics["capture/calls"], record.metrics["capture/samples"]) == (2, 1)
    assert record.metrics["capture/mismatches"] == 0 and record.earlier_samples == []
    assert [t for t, m in zip(record.completion_ids, record.loss_mask, strict=True) if m] == \
        policy.sampled
    assert sum(record.loss_mask) == sum(len(g.token_ids) for g in policy.generations)


def test_mini_swe_agent_doing_nothing_useful_gets_nothing(backend, pypi, standin_tasks,
                                                          tokenizer) -> None:
    record, policy = play(backend, standin_tasks,
                          [action("Look around.", "ls && git status"), SUBMIT], tokenizer)
    assert record.finish_reason == "harness_exit", record.metrics["harness"]
    assert record.reward == 0.0
    assert [t for t, m in zip(record.completion_ids, record.loss_mask, strict=True) if m] == \
        policy.sampled
