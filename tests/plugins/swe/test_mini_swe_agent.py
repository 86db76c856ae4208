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


TRAIN_CONFIG = """\
model: {tiny: {}}
output_dir: OUT
seed: 0
env: {id: swe-synth, kwargs: {tasks: TASKS}, harness: mini-swe-agent}
eval: {episodes: 1}
rollout: {max_tokens: 24, max_total_tokens: 3072, concurrency: 2}
stages:
  - grpo:
      args: {max_steps: 2, per_device_train_batch_size: 2, num_generations: 2,
             logging_steps: 1, save_steps: 2}
"""


def test_agentgym_train_runs_grpo_with_mini_swe_agent_playing(pypi, standin_tasks, tmp_path,
                                                              agentgym_cli) -> None:
    """The tiny model behind mini-swe-agent for two GRPO steps: the run completes, its
    rollouts and eval episodes are the harness's, and the viewer reads them."""
    import subprocess

    from agentgym.viewer.index import EpisodeIndex, trajectory_files

    run = tmp_path / "run"
    config = tmp_path / "config.yaml"
    config.write_text(TRAIN_CONFIG.replace("OUT", str(run)).replace("TASKS", str(standin_tasks)))
    done = subprocess.run([agentgym_cli, "train", str(config), "--json"], capture_output=True,
                          text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    steps = [r for r in records if r["stage"] == "00-grpo" and "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["capture/calls"] >= 1 and r["rollout/extra_rows"] >= 0 for r in steps)
    rollouts = [json.loads(line) for line in (run / "00-grpo" / "rollouts.jsonl").open()]
    assert rollouts and {r["policy"] for r in rollouts} == {"harness:mini-swe-agent"}
    assert all(r["finish_reason"].startswith("harness_") for r in rollouts), \
        [(r["finish_reason"], r["error"]) for r in rollouts]
    assert all(sum(r["loss_mask"]) > 0 for r in rollouts)  # the model's tokens are trained
    evals = json.loads((run / "eval.json").read_text())
    assert [e["stage"] for e in evals["stages"]] == ["base", "00-grpo"]
    index = EpisodeIndex(trajectory_files(run))
    # The eval episodes: one before training, one after.
    assert index.bad_lines == 0 and len(index.rows) == len(rollouts) + 2
