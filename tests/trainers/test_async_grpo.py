"""Asynchronous GRPO (agentgym.trainers.async_grpo): the weights' version of every sampled
token, the truncated importance weights, the staleness rules, fairness, a real run and its
resume."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from agentgym.core.errors import InvalidArgumentError
from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.engine import Engine
from agentgym.trainers.async_grpo import AsyncOptions, fairness, importance_weights
from agentgym.trainers.grpo import EnvRollout, GRPOOptions
from tests.trainers.test_grpo import ROLLOUT, CalculatorScript, _Logs, _tokenizer, _train, _Trainer


class Versioned(CalculatorScript):
    """The calculator script, its tokens marked with the weights' version ``version``."""

    version = 0

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        generation = await super().generate(prompt_ids, sampling)
        generation.versions = [self.version] * len(generation.token_ids)
        return generation


class Chunks:
    """A sampler that says which tasks the next generation batches hold."""

    def __init__(self, chunks: list[list[str]]):
        self.chunks = chunks

    def chunks_after(self, current: list[str], count: int) -> list[list[str]]:
        return self.chunks[:count]


def _half_right(expression: str, attempt: int) -> str:
    return ("right", "wrong")[attempt % 2]  # every group carries signal


def _async_rollout(tokenizer: Any, policy: Any, group_size: int = 4,
                   **options: Any) -> EnvRollout:
    return EnvRollout("calculator", {"num_tasks": 64}, group_size=group_size,
                      tokenizer=tokenizer,
                      rollout=ROLLOUT, policy=policy,
                      options=GRPOOptions(asynchronous=AsyncOptions(**options)))


def _settle(rollout: EnvRollout) -> None:
    """Wait until every group asked for is played."""
    deadline = time.monotonic() + 60
    while rollout._producer.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not rollout._producer.in_flight


# ---- versions ------------------------------------------------------------------------------


def test_the_engine_records_the_version_of_each_token(tiny_model_dir: Path) -> None:
    engine = Engine(tiny_model_dir, slots=2, max_len=256, stop_token_ids=[10**9])  # never sampled

    def update_mid_request() -> None:
        while engine.steps_run < 5:
            time.sleep(0.001)
        engine.update_weights()  # the shared model changed in place: a new version

    try:
        updater = threading.Thread(target=update_mid_request)
        updater.start()
        generation = asyncio.run(engine.generate([1, 2, 3], Sampling(max_tokens=200,
                                                                     temperature=0)))
        updater.join()
    finally:
        engine.close()
    versions = generation.versions
    assert len(versions) == len(generation.token_ids) == 200
    assert versions[0] == 0 and versions[-1] == 1, "the update did not land mid-request"
    assert versions == sorted(versions)  # one switch, from the step it landed at
    engine.update_weights(version=7)
    assert engine.version == 7


def test_trajectories_align_versions_with_tokens(tiny_model_dir: Path) -> None:
    tokenizer = _tokenizer(tiny_model_dir)
    policy = Versioned(tokenizer, _half_right)
    policy.version = 3
    rollout = _async_rollout(tokenizer, policy)
    try:
        rollout([f"calculator-train-{i}" for i in (0, 1) for _ in range(4)],
                _Trainer())
    finally:
        rollout.close()
    for trajectory in rollout.last:
        assert len(trajectory.versions) == len(trajectory.completion_ids)
        for version, own in zip(trajectory.versions, trajectory.loss_mask, strict=True):
            assert version == (3 if own else -1)  # -1: a token the env wrote


def test_groups_of_any_size_are_assembled_at_any_step(tiny_model_dir: Path) -> None:
    """A step's episodes are numbered from step * 1,000,000, which 3 does not divide."""
    tokenizer = _tokenizer(tiny_model_dir)
    rollout = _async_rollout(tokenizer, Versioned(tokenizer, _half_right), group_size=3)
    trainer = _Trainer()
    trainer.state.global_step = 1
    try:
        out = rollout([f"calculator-train-{i}" for i in (0, 1) for _ in range(3)], trainer)
    finally:
        rollout.close()
    groups = [rollout.last[i:i + 3] for i in (0, 3)]
    for group in groups:
        assert len({t.task_id for t in group}) == 1
        assert [t.episode - group[0].episode for t in group] == [0, 1, 2]
    assert sorted(out["task_id"]) == sorted(f"calculator-train-{i}" for i in (0, 1)
                                            for _ in range(3))


# ---- the importance correction --------------------------------------------------------------


def test_importance_weights_match_a_reference_computation() -> None:
    generator = torch.Generator().manual_seed(0)
    policy = -torch.rand(3, 5, generator=generator) * 3
    sampling = -torch.rand(3, 5, generator=generator) * 3
    sampling[1, 2] = math.nan  # unknown: weight 1
    mask = torch.ones(3, 5)
    mask[2, 3:] = 0  # env tokens and padding: weight 1
    weights, stats = importance_weights(policy, sampling, mask, cap=1.5)
    ratios = []
    for i in range(3):
        for j in range(5):
            if mask[i, j] == 0 or math.isnan(sampling[i, j]):
                expected = 1.0
            else:
                ratio = math.exp(policy[i, j].item() - sampling[i, j].item())
                ratios.append(ratio)
                expected = min(ratio, 1.5)
            assert weights[i, j].item() == pytest.approx(expected, rel=1e-6)
    assert stats["mean"] == pytest.approx(sum(ratios) / len(ratios), rel=1e-6)
    assert stats["max"] == pytest.approx(max(ratios), rel=1e-6)
    assert stats["truncated"] == pytest.approx(sum(r > 1.5 for r in ratios) / len(ratios))


def test_a_token_weight_scales_the_clipped_surrogate_exactly() -> None:
    """What folding the weights into the advantages relies on (DAPO's clipped loss)."""
    ratio = torch.tensor([0.5, 0.9, 1.0, 1.2, 1.6])
    for advantage in (-1.3, 0.7):
        for weight in (0.2, 1.0, 1.9):
            clipped = ratio.clamp(1 - 0.2, 1 + 0.28)
            plain = -torch.min(ratio * advantage, clipped * advantage) * weight
            folded = -torch.min(ratio * (advantage * weight), clipped * (advantage * weight))
            assert torch.allclose(plain, folded)


# ---- staleness rules and fairness ------------------------------------------------------------


def _stale_run(tokenizer: Any, stale: str) -> dict[str, Any]:
    """At step 0 four groups are asked for (two for this call, two ahead for the next),
    all played with weights of version 0; the call takes two. The trainer, now at step 3
    with weights of version 3, asks with max_staleness 1: the two left are 3 steps stale.
    Returns the second call's episodes (``trained``), the two groups' tasks (``left``),
    its metrics (``logged``) and the fairness summary (``fairness``)."""
    policy = Versioned(tokenizer, _half_right)
    rollout = _async_rollout(tokenizer, policy, max_staleness=1, stale=stale)
    try:
        rollout.use_sampler(Chunks([[f"calculator-train-{i}" for i in (10, 11)]]))
        trainer = _Trainer()
        rollout([f"calculator-train-{i}" for i in (0, 1) for _ in range(4)], trainer)
        rollout.take_metrics()
        first = {t.task_id for t in rollout.last}
        _settle(rollout)
        trainer.state.global_step, policy.version = 3, 3
        rollout.use_sampler(Chunks([]))
        rollout([f"calculator-train-{i}" for i in (2, 3) for _ in range(4)], trainer)
        logged = rollout.take_metrics()
    finally:
        rollout.close()
    return {"trained": rollout.last, "logged": logged, "fairness": rollout.final_fairness,
            "left": {f"calculator-train-{i}" for i in (0, 1, 10, 11)} - first}


def test_the_drop_rule_never_trains_a_group_older_than_max_staleness(
        tiny_model_dir: Path) -> None:
    run = _stale_run(_tokenizer(tiny_model_dir), "drop")
    assert len(run["left"]) == 2 and len(run["trained"]) == 8
    assert not run["left"] & {t.task_id for t in run["trained"]}
    for trajectory in run["trained"]:
        own = [v for v, m in zip(trajectory.versions, trajectory.loss_mask, strict=True) if m]
        assert min(own) >= 3 - 1  # the step minus max_staleness
    assert run["logged"]["async/stale_dropped_groups"] == 2
    assert run["logged"]["async/staleness_max"] == 0
    # Every task was asked for once: no per-task share yet; episodes all took 2 turns.
    assert run["fairness"]["worst_ratio"] is None and run["fairness"]["tasks"] == 0
    assert run["fairness"]["groups_asked"] == 8 and run["fairness"]["groups_trained"] == 4
    assert run["fairness"]["trained_turns_ratio"] == 1.0


def test_the_correct_rule_trains_stale_groups_the_longest_waiting_first(
        tiny_model_dir: Path) -> None:
    run = _stale_run(_tokenizer(tiny_model_dir), "correct")
    assert {t.task_id for t in run["trained"]} == run["left"]
    assert run["logged"]["async/staleness/3"] == 1.0
    assert run["logged"]["async/stale_dropped_groups"] == 0
    assert run["fairness"]["groups_trained"] == 4


def test_a_settled_task_is_skipped_when_asked_for(tiny_model_dir: Path) -> None:
    from agentgym.plugins.calculator.env import make_task

    solved = make_task(0).metadata["expression"]  # always solved: its groups are flat

    def outcome(expression: str, attempt: int) -> str:
        return "right" if expression == solved else _half_right(expression, attempt)

    tokenizer = _tokenizer(tiny_model_dir)
    rollout = _async_rollout(tokenizer, Versioned(tokenizer, outcome), skip_settled=1)
    trainer = _Trainer()
    try:
        rollout([f"calculator-train-{i}" for i in (0, 1) for _ in range(4)], trainer)
        first = rollout.take_metrics()
        trainer.state.global_step = 1
        rollout([f"calculator-train-{i}" for i in (0, 2) for _ in range(4)], trainer)
        second = rollout.take_metrics()
        asked = rollout._producer.asked
    finally:
        rollout.close()
    assert first["async/skipped_settled_groups"] == 0  # not settled before its first group
    assert second["async/skipped_settled_groups"] == 1
    assert asked["calculator-train-0"] == 1  # asked once, then skipped
    assert "calculator-train-0" not in {t.task_id for t in rollout.last}


def test_fairness_compares_trained_and_asked_shares() -> None:
    report = fairness(Counter(a=2, b=2), Counter(a=2, b=1))
    assert report["worst_ratio"] == pytest.approx((1 / 3) / (1 / 2))
    assert report["best_ratio"] == pytest.approx((2 / 3) / (1 / 2))
    assert (report["under"], report["over"]) == ("b", "a")
    assert fairness(Counter(a=1), Counter())["worst_ratio"] is None  # nothing trained yet
    # Tasks asked for once are left out unless asked: one in flight is not yet unfair.
    assert fairness(Counter(a=1, b=1), Counter(a=1))["worst_ratio"] is None
    assert fairness(Counter(a=1, b=1), Counter(a=1), min_asked=1)["worst_ratio"] == 0.0


def test_the_turns_tally_shows_a_lean_to_short_episodes() -> None:
    from agentgym.rollout.trajectory import Trajectory
    from agentgym.trainers.async_grpo import TurnsTally

    def group(turns: int) -> list[Trajectory]:
        return [Trajectory("env", "t", i, turns=turns) for i in range(2)]

    tally = TurnsTally()
    assert tally.ratio() is None
    tally.add(group(2), trained=True)
    tally.add(group(6), trained=False)  # a long group left out
    assert tally.ratio() == pytest.approx(2 / 4)


def test_async_options_are_checked_and_read_from_a_run_config() -> None:
    options = GRPOOptions.from_config({"async": {"max_staleness": 1, "stale": "drop"}})
    assert options.asynchronous == AsyncOptions(max_staleness=1, stale="drop")
    with pytest.raises(InvalidArgumentError, match="stale"):
        AsyncOptions(stale="keep")
    with pytest.raises(InvalidArgumentError, match="max_staleness"):
        AsyncOptions(max_staleness=-1)
    with pytest.raises(InvalidArgumentError, match="did you mean 'max_staleness'"):
        GRPOOptions.from_config({"async": {"max_stalenes": 1}})


def test_a_run_config_takes_async_options_and_names_their_problems(tmp_path: Path) -> None:
    from agentgym.trainers.config import ConfigError, load_config

    def config(options: str) -> Path:
        path = tmp_path / "run.yaml"
        path.write_text(f"model: {{tiny: {{}}}}\noutput_dir: {tmp_path / 'out'}\n"
                        "env: {id: calculator}\n"
                        f"stages:\n  - grpo: {{options: {options}}}\n")
        return path

    loaded = load_config(config("{async: {max_staleness: 1, stale: drop}}"))
    options = GRPOOptions.from_config(loaded.stages[0].options)
    assert options.asynchronous == AsyncOptions(max_staleness=1, stale="drop")
    with pytest.raises(ConfigError, match=r"stages\[0\]\.grpo\.options\.async\.stale"):
        load_config(config("{async: {stale: keep}}"))


# ---- a real run --------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_async_run_trains_with_the_engine_and_resumes_without_training_a_group_twice(
        tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trained: list[list[tuple[str, int]]] = []
    output = EnvRollout._output

    def recording(self: EnvRollout, episodes: Any) -> Any:
        trained.append([t.key for group in episodes.groups for t in group])
        return output(self, episodes)

    monkeypatch.setattr(EnvRollout, "_output", recording)
    tokenizer = _tokenizer(tiny_model_dir)
    options = GRPOOptions(asynchronous=AsyncOptions(max_staleness=1), dynamic_sampling=False)
    out = tmp_path / "run"
    logs = _Logs()
    trainer = _train(str(tiny_model_dir), out, None, 2, tokenizer=tokenizer, options=options,
                     callbacks=[logs.callback])
    engine = trainer._own_policy
    assert isinstance(engine, Engine) and engine.version == 2
    assert engine.model is not trainer.model  # its own copy, given each step's weights
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, engine.model.state_dict()[name])
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    assert len(steps) == 2
    for log in steps:
        assert "async/staleness_mean" in log and "async/is_ratio_mean" in log
        assert log["async/is_ratio_mean"] > 0 and log["fairness/trained_turns_ratio"] > 0
    first_run = {key for call in trained for key in call}
    trained.clear()
    resumed = _train(str(tiny_model_dir), out, None, 3, tokenizer=tokenizer, options=options,
                     resume=True)
    assert resumed.state.global_step == 3 and resumed._own_policy.version == 3
    assert len(trained) == 1
    assert not first_run & set(trained[0]), "a group trained before was trained again"


def test_the_async_engine_samples_from_an_inference_copy(tiny_model_dir: Path) -> None:
    """The trainer's model has activation checkpointing on, trains, and its forward is a
    closure over itself (as TRL's fused LM head makes it); the engine's copy has none of
    it (a checkpointed layer in train mode drops the KV cache it is given; the closure
    would run the trainer's layers), never touches the trainer's layers, and samples the
    tokens an untouched model does."""
    from transformers import AutoModelForCausalLM

    from agentgym.trainers.grpo import inference_copy

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    enable = getattr(model, "activation_checkpointing_enable", None) \
        or model.gradient_checkpointing_enable
    enable()
    model.train()
    original_forward = model.forward

    def fused_forward(*args: Any, **kwargs: Any) -> Any:
        return original_forward(*args, **kwargs)

    model.forward = fused_forward
    copy = inference_copy(model, torch.bfloat16)
    trainer_layer_calls = []
    model.model.layers[0].register_forward_pre_hook(lambda *a: trainer_layer_calls.append(1))
    assert "forward" not in copy.__dict__ and next(copy.parameters()).dtype == torch.bfloat16
    assert not any(getattr(m, "gradient_checkpointing", False) for m in copy.modules())
    assert not any(m.training for m in copy.modules())
    assert not any(p.requires_grad for p in copy.parameters())
    assert any(getattr(m, "gradient_checkpointing", False) for m in model.modules())
    assert model.training and all(p.requires_grad for p in model.parameters())
    greedy = Sampling(max_tokens=16, temperature=0)
    prompt = list(range(5, 40))
    copy.float()  # bf16 on a CPU: the tokens are compared at the reference's precision
    copied, reference = Engine(copy, slots=2, max_len=128), Engine(str(tiny_model_dir))
    try:
        copy.train()  # even when something sets it training, it decodes with its cache
        ours, theirs = (asyncio.run(e.generate(prompt, greedy)) for e in (copied, reference))
    finally:
        copied.close()
        reference.close()
    assert ours.token_ids == theirs.token_ids
    assert trainer_layer_calls == []
