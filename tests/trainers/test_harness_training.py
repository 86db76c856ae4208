"""GRPO on episodes an agent program played: a program that rewrites its history gives
several samples per episode, and every sample becomes a training row with its episode's
advantage, scored as TRL scores its own rows (the further rows' log-probs under the
trained and reference weights, the re-padded batch scoring the first rows as TRL did)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from agentgym.core.contributions import EnvRegistration
from agentgym.core.harness import Harness
from agentgym.core.hookspecs import hookimpl
from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.loop import RolloutConfig
from agentgym.testing import ScriptedTokens
from agentgym.trainers import trl_adapter
from agentgym.trainers.grpo import train_grpo

sys.path.insert(0, str(Path(__file__).parents[1] / "rollout"))
from test_harness import AnswerEnv, agent_harness

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None or os.geteuid() != 0,
    reason="the local sandbox needs bubblewrap (apt-get install bubblewrap) and root")


class ByTurn(ScriptedTokens):
    """Plays each episode by its own turn (read from the prompt: the test agent writes
    "turn N" into each observation), whatever else runs at once: two commands, then every
    other episode of a task writes its word (paid) and the others a wrong one, then DONE.
    So every group of two has a reward of 1 and one of 0."""

    def __init__(self, tokenizer: Any):
        super().__init__(tokenizer, [])
        self.answers: dict[str, int] = {}
        self.text = ""

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        prompt = self.tokenizer.decode(prompt_ids)
        turns = re.findall(r"turn (\d+) exit", prompt)
        turn = int(turns[-1]) if turns else 0
        word = re.search(r"Write the word (\w+)", prompt).group(1)
        if turn == 2:
            n = self.answers[word] = self.answers.get(word, -1) + 1
            self.text = f"echo {word if n % 2 == 0 else 'wrong'} > answer.txt"
        else:
            self.text = ["echo one", "echo two", "", "DONE"][min(turn, 3)]
        return await super().generate(prompt_ids, sampling)

    def next_text(self) -> str:
        return self.text


class Plugin:
    @hookimpl
    def agentgym_envs(self) -> list:
        return [EnvRegistration("test-harness-answer", lambda: AnswerEnv("local"),
                                "write a word into answer.txt, in a local sandbox")]

    @hookimpl
    def agentgym_harnesses(self) -> list[Harness]:
        rewriting = agent_harness(KEEP="1")
        return [Harness("test-rewriting-agent", rewriting.command, time_limit_s=60,
                        env=rewriting.env)]


def test_every_sample_of_a_rewriting_harness_is_trained_with_its_episodes_advantage(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import agentgym

    agentgym.register_plugin(Plugin(), name="test-harness-training")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    # Four calls an episode: the program keeps only its latest exchange from the third on,
    # so each episode is three samples.
    policy = ByTurn(tokenizer)
    seen: list[tuple[dict[str, Any], list[Any], dict[str, Any], torch.Tensor]] = []
    original = trl_adapter.append_rows

    def spy(trainer: Any, output: dict[str, Any], rows: list[Any]) -> dict[str, Any]:
        before = {k: v.clone() if torch.is_tensor(v) else v for k, v in output.items()}
        merged = original(trainer, output, rows)
        # The re-padded batch, scored now (before this batch's update) the way the added
        # rows were: TRL's own rows must come out as TRL scored them.
        rescored = trl_adapter.completion_logps(trainer, trl_adapter.ScoredBatch(
            input_ids=torch.cat([merged["prompt_ids"], merged["completion_ids"]], dim=1),
            attention_mask=torch.cat([merged["prompt_mask"], merged["completion_mask"]], dim=1),
            logits_to_keep=merged["completion_ids"].size(1), loss_mask=None, advantages=None),
            torch.arange(len(before["prompt_ids"])))
        seen.append((before, list(rows), merged, rescored))
        return merged

    monkeypatch.setattr(trl_adapter, "append_rows", spy)
    trainer = train_grpo(
        model, "test-harness-answer", output_dir=tmp_path / "run", tokenizer=tokenizer,
        harness="test-rewriting-agent", policy=policy,
        args={"max_steps": 2, "per_device_train_batch_size": 4, "num_generations": 2,
              "num_iterations": 2, "beta": 0.04, "learning_rate": 1e-3,
              "save_strategy": "no"},
        rollout=RolloutConfig(Sampling(max_tokens=32, temperature=1.0), max_total_tokens=2048))
    assert trainer.state.global_step == 2
    before, rows, merged, rescored = seen[0]
    batch = len(before["prompt_ids"])
    assert rows and len(merged["prompt_ids"]) == batch + len(rows)
    assert len(merged["prompt_ids"]) % trainer.args.steps_per_generation == 0
    for i, row in enumerate(rows):
        at = batch + i
        width = len(row.completion_ids)
        assert merged["completion_ids"][at, :width].tolist() == row.completion_ids
        assert merged["tool_mask"][at, :width].tolist() == row.loss_mask
        assert merged["completion_mask"][at, width:].sum() == 0  # padding is out of the loss
        assert merged["advantages"][at] == before["advantages"][row.source]
        prompt = merged["prompt_ids"][at][merged["prompt_mask"][at].bool()].tolist()
        assert prompt == row.prompt_ids
    # Every group had a paid and an unpaid episode: the further rows carry their signal.
    assert {round(float(before["advantages"][r.source]), 3) for r in rows} >= {-0.707, 0.707}
    # Each further sample's loss tokens are tokens the policy sampled.
    sampled = set(policy.sampled)
    assert all(t in sampled for r in rows for t, m in zip(r.completion_ids, r.loss_mask,
                                                           strict=True) if m)
    # The re-padded batch scores TRL's own rows as TRL did, so the added rows' log-probs,
    # computed the same way, are what TRL would have computed.
    width_c = before["completion_ids"].size(1)
    mask = (before["completion_mask"] * before["tool_mask"]).bool()
    assert torch.allclose(rescored[:, :width_c][mask], before["old_per_token_logps"][mask],
                          atol=1e-4)
    assert torch.isfinite(merged["ref_per_token_logps"][batch:]).all()
    assert merged["num_items_in_batch"] == (merged["completion_mask"]
                                            * merged["tool_mask"]).sum()
