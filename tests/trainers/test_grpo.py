"""GRPO through TRL's rollout_func: parameters move, env tokens get no gradient, DAPO's
dynamic sampling and finish-reason masking have their effect, resume continues."""

from __future__ import annotations

import io
import json
import logging
import math
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

pytest.importorskip("trl")

from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.pipeline import PipelineConfig
from agentgym.rollout.trajectory import read_trajectories
from agentgym.trainers.grpo import (
    EPISODES_PER_CALL,
    EnvRollout,
    GRPOOptions,
    grpo_config,
    train_grpo,
)
from agentgym.trainers.metrics import MetricsCallback, MetricsLog, read_metrics

ROLLOUT = RolloutConfig(Sampling(max_tokens=48, temperature=1.0), max_total_tokens=1024)


class CalculatorScript:
    """A token-level policy that plays calculator tasks by the rules a test sets:
    ``outcome(expression, attempt)`` is "right", "wrong" or "stall" (never submits).
    ``numbered=False``: episodes do not write their attempt number (it is 0), so every
    attempt at a task samples the same tokens (a collapsed policy)."""

    def __init__(self, tokenizer: Any, outcome: Any, numbered: bool = True):
        self.tokenizer, self.outcome, self.numbered = tokenizer, outcome, numbered
        self.attempts: Counter = Counter()

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        text = self.tokenizer.decode(prompt_ids)
        expression = re.search(r"What is (.+?)\?", text).group(1)
        turn = text.count("<|im_start|>assistant")
        note = ""
        if turn == 1:  # episodes play concurrently: each carries its attempt number
            self.attempts[expression] += 1
            note = f"attempt {self.attempts[expression]} " if self.numbered else ""
            call = {"name": "calculator", "arguments": {"expression": expression}}
        else:
            attempt = int(re.findall(r"attempt (\d+) ", text)[-1]) if self.numbered else 0
            verdict = self.outcome(expression, attempt)
            if verdict == "stall":
                call = {"name": "calculator", "arguments": {"expression": "1 + 1"}}
            else:
                answer = eval(expression) + (0 if verdict == "right" else 1)
                call = {"name": "submit", "arguments": {"answer": str(answer)}}
        ids = self.tokenizer.encode(f"{note}<tool_call>{json.dumps(call)}</tool_call>",
                                    add_special_tokens=False)
        return Generation([*ids, self.tokenizer.eos_token_id], [-1.0] * (len(ids) + 1), "stop")


def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


class _Logs:
    def __init__(self) -> None:
        from transformers import TrainerCallback

        logs = self.logs = []

        class Callback(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs_: Any = None,
                       **kwargs: Any) -> None:
                logs.append({"step": state.global_step, **(kwargs.get("logs") or logs_ or {})})

        self.callback = Callback()


def _train(model: Any, out: Path, policy: Any, steps: int, **kwargs: Any) -> Any:
    return train_grpo(
        model, "calculator", env_kwargs={"num_tasks": 16}, output_dir=out,
        args={"max_steps": steps, "per_device_train_batch_size": 8, "num_generations": 4,
              "learning_rate": 1e-2, "save_steps": 1, **kwargs.pop("args", {})},
        rollout=ROLLOUT, pipeline=PipelineConfig(concurrency=8), policy=policy, **kwargs)


def test_grpo_steps_move_parameters_and_log_env_metrics(tiny_model_dir: Path,
                                                        tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # half the attempts of every task succeed: every group carries signal
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    logs = _Logs()
    trainer = _train(model, tmp_path / "run", policy, 2, tokenizer=tokenizer,
                     callbacks=[logs.callback])
    assert trainer.state.global_step == 2
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "no parameter changed after two GRPO steps"
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    assert len(steps) == 2
    for log in steps:
        assert log["env/pass_rate"] == pytest.approx(0.5)
        assert log["rewards/env_reward/mean"] == pytest.approx(0.5)
        assert log["env/turns"] == pytest.approx(2.0)
        assert log["env/finish/submitted"] == pytest.approx(1.0)
        assert log["time/rollout_s"] > 0 and log["time/generate_s"] > 0
        assert log["dynamic_sampling/masked_groups"] == 0
        assert log["rollout/episodes"] == 8 and log["rollout/sampled_tokens"] > 0
    assert (tmp_path / "run" / "final" / "config.json").is_file()
    # The sample of rollouts: the first group (of 4) of each step's call, whole.
    kept = read_trajectories(tmp_path / "run" / "rollouts.jsonl")
    assert [t.episode // EPISODES_PER_CALL for t in kept] == [0] * 4 + [1] * 4
    assert [t.key for t in kept[4:]] == [t.key for t in trainer.rollout_func.last[:4]]
    assert sorted(t.reward for t in kept[4:]) == [0.0, 0.0, 1.0, 1.0]


def test_environment_tokens_get_zero_gradient(tiny_model_dir: Path, tmp_path: Path) -> None:
    from trl import GRPOTrainer

    from agentgym.trainers.grpo import env_reward, task_dataset

    tokenizer = _tokenizer(tiny_model_dir)
    tokenizer.padding_side = "left"
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    rollout = EnvRollout("calculator", {"num_tasks": 16}, group_size=4, tokenizer=tokenizer,
                         options=GRPOOptions(prefetch=False), rollout=ROLLOUT, policy=policy)
    args = grpo_config(tmp_path, {"per_device_train_batch_size": 8, "num_generations": 4},
                       rollout=ROLLOUT)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=[env_reward], args=args,
                          train_dataset=task_dataset([f"calculator-train-{i}" for i in range(16)]),
                          processing_class=tokenizer, rollout_func=rollout)
    try:
        inputs = [{"prompt": f"calculator-train-{i // 4}"} for i in range(8)]
        batch = trainer._generate_and_score_completions(inputs)
    finally:
        rollout.close()
    model = trainer.model
    captured: dict[str, torch.Tensor] = {}

    def keep(module: Any, args: Any, output: torch.Tensor) -> None:
        output.retain_grad()
        captured["hidden"] = output

    # The last hidden state at position p feeds only the prediction of token p + 1 (TRL
    # fuses the LM head with the loss, so the logits are never materialised to hook).
    handle = model.model.norm.register_forward_hook(keep)
    try:
        trainer.compute_loss(model, batch).backward()
    finally:
        handle.remove()
    prompt_length = batch["prompt_ids"].shape[1]
    completion_length = batch["completion_ids"].shape[1]
    grad = captured["hidden"].grad[:, prompt_length - 1:prompt_length - 1 + completion_length]
    per_token = grad.abs().sum(-1)  # per_token[b, j]: gradient reaching completion token j
    model_tokens = (batch["completion_mask"] * batch["tool_mask"]) == 1
    env_tokens = (batch["tool_mask"] == 0) & (batch["completion_mask"] == 1)
    assert env_tokens.any() and model_tokens.any()
    assert torch.all(per_token[env_tokens] == 0)
    assert torch.all(per_token[model_tokens] > 0)


def test_dynamic_sampling_replaces_flat_groups(tiny_model_dir: Path, tmp_path: Path) -> None:
    tokenizer = _tokenizer(tiny_model_dir)
    even = {}  # tasks whose index is even always succeed, odd ones always fail: flat groups

    def outcome(expression: str, attempt: int) -> str:
        return even.setdefault(expression, "right" if len(even) % 2 == 0 else "wrong")

    mixed: set[str] = set()

    def varied(expression: str, attempt: int) -> str:
        if expression in mixed:
            return ("right", "wrong")[attempt % 2]
        return outcome(expression, attempt)

    policy = CalculatorScript(tokenizer, varied)
    rollout = EnvRollout("calculator", {"num_tasks": 16}, group_size=4, tokenizer=tokenizer,
                         rollout=ROLLOUT, policy=policy,
                         options=GRPOOptions(prefetch=False, max_resample_rounds=2))
    trainer = _Trainer()
    first = [f"calculator-train-{i}" for i in (0, 0, 0, 0, 1, 1, 1, 1)]
    try:
        # Every task is flat and no other task varies: groups stay and are masked.
        out = rollout(first, trainer)
        logged = rollout.take_metrics()
        assert out["task_id"] == first
        assert all(sum(mask) == 0 for mask in out["env_mask"])
        assert logged["dynamic_sampling/masked_groups"] == 2
        assert logged["dynamic_sampling/replaced_groups"] == 0
        assert logged["dynamic_sampling/flat_fraction"] == 1.0
        assert logged["groups/with_variance"] == 0.0
        assert logged["groups/identical"] == 0.0  # attempts are numbered
        assert rollout.take_metrics() == {}  # taken once
        # Now the other tasks vary: both flat groups are replaced by groups of other tasks.
        from agentgym.plugins.calculator.env import make_task

        mixed.update(make_task(i).metadata["expression"] for i in range(2, 16))
        # The call's own episodes were prepared ahead (prefetch): the replacement groups'
        # run comes after, and the hits are still counted.
        jobs = [(task, trainer.state.global_step * EPISODES_PER_CALL + i)
                for i, task in enumerate(first)]

        async def prepare() -> None:
            rollout._pipeline.prepare(jobs)

        rollout._loop.run(prepare())
        out = rollout(first, trainer)
        logged = rollout.take_metrics()
    finally:
        rollout.close()
    assert logged["prefetch/hits"] == 8
    assert len(out["prompt_ids"]) == 8
    groups = [out["task_id"][i:i + 4] for i in (0, 4)]
    assert all(len(set(g)) == 1 and g[0] not in first for g in groups)
    assert all(len(set(out["env_reward"][i:i + 4])) == 2 for i in (0, 4))
    assert all(sum(mask) > 0 for mask in out["env_mask"])
    assert logged["dynamic_sampling/replaced_groups"] == 2
    assert logged["dynamic_sampling/masked_groups"] == 0
    # Flat as first played, with variance as trained on.
    assert logged["dynamic_sampling/flat_fraction"] == 1.0
    assert logged["groups/with_variance"] == 1.0


def test_the_engine_s_work_is_logged_per_call(tiny_model_dir: Path) -> None:
    """With agentgym's engine as the policy, each call logs what the engine did since the
    previous one (what a GPU run reads to see whether generation kept the GPU busy)."""
    from agentgym.rollout.engine import Engine

    engine = Engine(str(tiny_model_dir), slots=8, max_len=ROLLOUT.max_total_tokens + 1)
    rollout = EnvRollout("calculator", {"num_tasks": 16}, group_size=4,
                         tokenizer=engine.tokenizer, rollout=ROLLOUT, policy=engine,
                         options=GRPOOptions(prefetch=False, dynamic_sampling=False))
    trainer = _Trainer()
    prompts = [f"calculator-train-{i}" for i in (0, 0, 0, 0, 1, 1, 1, 1)]
    logged = []
    try:
        for _ in range(2):
            before = (engine.steps_run, engine.decode_tokens, engine.prefill_tokens)
            rollout(prompts, trainer)
            logged.append(rollout.take_metrics())
            steps, decoded, prefilled = (engine.steps_run - before[0],
                                         engine.decode_tokens - before[1],
                                         engine.prefill_tokens - before[2])
            assert logged[-1]["engine/decode_steps"] == steps > 0
            assert logged[-1]["engine/rows_per_decode"] == pytest.approx(decoded / steps)
            assert logged[-1]["engine/prefill_tokens"] == prefilled > 0
            assert logged[-1]["engine/busy_s"] > 0
            trainer.state.global_step += 1
    finally:
        rollout.close()
        engine.close()
    # Eight episodes at once: a decode step runs several of them.
    assert 1 < logged[0]["engine/rows_per_decode"] <= 8
    # A busy share needs the previous call's time: from the second call on.
    assert "engine/busy_fraction" not in logged[0]
    assert 0 < logged[1]["engine/busy_fraction"] <= 1


def test_finish_reason_masking(tiny_model_dir: Path) -> None:
    tokenizer = _tokenizer(tiny_model_dir)
    # attempts 1 and 2 stall until the turn limit, 3 succeeds, 4 fails
    verdicts = {1: "stall", 2: "stall", 3: "right", 0: "wrong"}
    policy = CalculatorScript(tokenizer, lambda expr, attempt: verdicts[attempt % 4])
    rollout = EnvRollout("calculator", {"num_tasks": 16}, group_size=4, tokenizer=tokenizer,
                         rollout=ROLLOUT, policy=policy, options=GRPOOptions(prefetch=False))
    trainer = _Trainer()
    try:
        out = rollout(["calculator-train-3"] * 4, trainer)
        logged = rollout.take_metrics()
    finally:
        rollout.close()
    reasons = out["finish_reason"]
    assert sorted(reasons) == ["max_turns", "max_turns", "submitted", "submitted"]
    for reason, mask, reward in zip(reasons, out["env_mask"], out["env_reward"], strict=True):
        if reason == "max_turns":  # no gradient, and out of the group's baseline
            assert sum(mask) == 0 and reward is None
        else:
            assert sum(mask) > 0 and reward in (0.0, 1.0)
    assert logged["masked/finish_reason"] == pytest.approx(0.5)
    # The two scorable episodes (one right, one wrong) carry the group's signal.
    assert logged["dynamic_sampling/flat_fraction"] == 0.0
    assert logged["groups/with_variance"] == 1.0
    # Without the masking the same episodes would train (reward 0, mask kept).
    unmasked = EnvRollout("calculator", {"num_tasks": 16}, group_size=4, tokenizer=tokenizer,
                          rollout=ROLLOUT, policy=policy,
                          options=GRPOOptions(prefetch=False, mask_finish_reasons=()))
    try:
        out = unmasked(["calculator-train-3"] * 4, trainer)
    finally:
        unmasked.close()
    assert all(sum(mask) > 0 for mask in out["env_mask"])
    assert None not in out["env_reward"]


def test_resume_continues_from_the_checkpoint_step(tiny_model_dir: Path,
                                                   tmp_path: Path) -> None:
    tokenizer = _tokenizer(tiny_model_dir)
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    out = tmp_path / "run"
    _train(str(tiny_model_dir), out, policy, 2, tokenizer=tokenizer)
    assert (out / "checkpoint-2").is_dir()
    logs = _Logs()
    trainer = _train(str(tiny_model_dir), out, policy, 3, tokenizer=tokenizer, resume=True,
                     callbacks=[logs.callback])
    assert trainer.state.global_step == 3
    trained = [log for log in logs.logs if "env/pass_rate" in log]
    assert [log["step"] for log in trained] == [3], "resume replayed steps the checkpoint had"
    # kl/ref still measures from the stage's start, not from the checkpoint resumed.
    assert trained[0]["kl/ref"] > 1e-5


# ---- learning health (agentgym.trainers.health) ---------------------------------------------

HEALTH_LOGGER = "agentgym.trainers.health"


def _health_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == HEALTH_LOGGER and r.levelno == logging.WARNING]


def _grpo_logs(path: Path) -> list[dict[str, Any]]:
    return [r for r in read_metrics(path) if "env/pass_rate" in r]


def test_a_healthy_run_logs_learning_health_and_warns_of_nothing(
        tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=HEALTH_LOGGER)
    tokenizer = _tokenizer(tiny_model_dir)
    # every third attempt succeeds: each group of 4 has 1 or 2 successes, never flat
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("wrong", "right")[attempt % 3 == 0])
    metrics = MetricsLog(tmp_path / "metrics.jsonl")
    console = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no library deprecation reaches users
        trainer = _train(str(tiny_model_dir), tmp_path / "run", policy, 3, tokenizer=tokenizer,
                         callbacks=[MetricsCallback(metrics, "01-grpo", "grpo")],
                         args={"save_strategy": "no"}, console=Console(file=console))
    metrics.close()
    steps = _grpo_logs(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in steps] == [1, 2, 3]
    for record in steps:
        assert record["dynamic_sampling/flat_fraction"] == 0.0
        assert record["groups/with_variance"] == 1.0
        assert record["groups/count"] == 2.0
        assert record["groups/identical"] == 0.0
        assert record["episodes/in_loss"] == 1.0
        assert record["episodes/mean_length"] > 10  # model tokens of the two turns
        assert record["time/step_s"] >= record["time/rollout_s"] > 0
        assert record["entropy"] > 1.0  # a random model is far from collapse
        assert all(f"clip_ratio/{k}" in record for k in ("low_mean", "high_mean", "region_mean"))
        assert record["rollout/tokens_per_s"] > 0
    # The reference is the starting model: no distance before the first update, some after.
    kl = [r["kl/ref"] for r in steps]
    assert kl[0] == pytest.approx(0.0, abs=1e-6)
    assert all(value > 1e-4 for value in kl[1:]), kl
    # TRL's advantages, recomputed from the last step's episodes (TRL's scale_rewards="group":
    # reward minus the group mean, over the group's unbiased std + 1e-4).
    rewards = torch.tensor([t.reward for t in trainer.rollout_func.last]).view(-1, 4)
    assert {int(g.sum()) for g in rewards} <= {1, 2} and len(rewards) == 2
    advantages = (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)
    last = steps[-1]
    assert last["advantage/mean_abs"] == pytest.approx(float(advantages.abs().mean()), rel=1e-4)
    assert last["advantage/max"] == pytest.approx(float(advantages.max()), rel=1e-4)
    assert last["advantage/min"] == pytest.approx(float(advantages.min()), rel=1e-4)
    assert _health_warnings(caplog) == []
    # The console: one line per step with the numbers that matter, and no dict of logs.
    lines = console.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("grpo done: 3 steps in ")
    assert lines[-1].endswith("; 6 of 6 groups had reward variance")
    for step, (line, record) in enumerate(zip(lines, steps, strict=False), start=1):
        assert re.fullmatch(
            rf"grpo step {step}/3  reward {record['reward']:.3f}"
            rf"  pass {record['env/pass_rate']:.0%}  groups with variance 2/2"
            rf"  loss \S+  kl \S+  \d+\.\d s/step", line), line
    printed = capfd.readouterr()
    assert "{" not in printed.out + printed.err and "Warning" not in printed.err


def test_a_step_with_a_non_finite_gradient_is_skipped(
        tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A NaN gradient (poisoned here before the optimizer step) never reaches the weights:
    that step is skipped, warned of and counted; the other steps train."""
    from transformers import AutoModelForCausalLM, TrainerCallback

    caplog.set_level(logging.WARNING, logger=HEALTH_LOGGER)
    tokenizer = _tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    weights: dict[int, dict[str, torch.Tensor]] = {}

    class Poison(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            weights[state.global_step] = {k: v.clone() for k, v in model.state_dict().items()}

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any,
                                  **kwargs: Any) -> None:
            if state.global_step == 1:  # the second step
                next(p for p in model.parameters() if p.grad is not None).grad[0] = math.nan

    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    logs = _Logs()
    _train(model, tmp_path / "run", policy, 3, tokenizer=tokenizer,
           callbacks=[Poison(), logs.callback], args={"save_strategy": "no"})
    weights[3] = {k: v.clone() for k, v in model.state_dict().items()}
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())
    moved = [step for step in (0, 1, 2)
             if any(not torch.equal(weights[step][k], weights[step + 1][k]) for k in weights[0])]
    assert moved == [0, 2]
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    assert [log.get("health/skipped_steps") for log in steps] == [None, 1.0, None]
    (warning,) = [m for m in _health_warnings(caplog) if "not finite" in m]
    assert warning.startswith("GRPO step 2: the gradient was not finite")


@pytest.mark.parametrize("reference", ["lora", "trl-reference"])
def test_kl_to_the_reference_needs_no_copy_with_lora_or_beta(
        reference: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    tokenizer = _tokenizer(tiny_model_dir)
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    logs = _Logs()
    extra: dict[str, Any] = (
        {"lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}}
        if reference == "lora" else {"args": {"beta": 0.04}})
    trainer = _train(str(tiny_model_dir), tmp_path / "run", policy, 3, tokenizer=tokenizer,
                     callbacks=[logs.callback], **extra)
    assert trainer.reference_kl.copy is None  # the adapters are switched off / TRL's reference
    steps = [log for log in logs.logs if "kl/ref" in log]
    assert len(steps) == 3
    assert steps[0]["kl/ref"] == pytest.approx(0.0, abs=1e-6)
    assert all(log["kl/ref"] > 1e-5 for log in steps[1:])
    if reference == "trl-reference":  # the same k3 estimate TRL's loss uses for `kl`
        for log in steps:
            assert log["kl/ref"] == pytest.approx(log["kl"], rel=1e-5, abs=1e-7)


def test_a_run_without_signal_warns_what_to_change(
        tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=HEALTH_LOGGER)
    tokenizer = _tokenizer(tiny_model_dir)
    policy = CalculatorScript(tokenizer, lambda expr, attempt: "wrong")  # reward always 0
    logs = _Logs()
    _train(str(tiny_model_dir), tmp_path / "run", policy, 2, tokenizer=tokenizer,
           callbacks=[logs.callback],
           options=GRPOOptions(warn_after_steps=2, measure_kl=False, log_rollouts=0),
           args={"save_strategy": "no"})
    assert not (tmp_path / "run" / "rollouts.jsonl").exists()  # log_rollouts: 0
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    for log in steps:
        assert log["dynamic_sampling/flat_fraction"] == 1.0
        assert log["groups/with_variance"] == 0.0
        assert log["episodes/in_loss"] == 0.0  # every group masked
        assert log["episodes/mean_length"] is None  # no length, rather than 0 tokens
        assert "advantage/mean_abs" not in log and "kl/ref" not in log
    warnings = _health_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("GRPO step 2: no learning signal for 2 steps")
    assert "Every episode failed" in warnings[0] and "rollout.temperature" in warnings[0]
    assert "num_generations" in warnings[0] and "max_resample_rounds" in warnings[0]


def test_an_episode_error_is_said_once_with_its_message(
        tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The metrics only count errors (env/finish/error); the log says what they were."""
    caplog.set_level(logging.WARNING, logger="agentgym.trainers.grpo")
    tokenizer = _tokenizer(tiny_model_dir)
    script = CalculatorScript(tokenizer, lambda expr, attempt: "right")

    class HalfBroken:
        tokenizer = script.tokenizer

        async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
            if script.attempts.total() % 2:
                script.attempts["broken"] += 1
                raise RuntimeError("the model failed: simulated")
            return await script.generate(prompt_ids, sampling)

    _train(str(tiny_model_dir), tmp_path / "run", HalfBroken(), 2, tokenizer=tokenizer,
           options=GRPOOptions(measure_kl=False, log_rollouts=0),
           args={"save_strategy": "no"})
    said = [r.getMessage() for r in caplog.records if "ended with an error" in r.getMessage()]
    assert len(said) == 1, said  # the same error again is not said again
    assert said[0].split()[1:3] == ["of", "8"] and "the model failed: simulated" in said[0]


def test_grpo_draws_its_groups_from_the_stage_s_tasks(tiny_model_dir: Path,
                                                     tmp_path: Path) -> None:
    import agentgym
    from agentgym.core.errors import InvalidArgumentError

    tokenizer = _tokenizer(tiny_model_dir)
    policy = CalculatorScript(tokenizer, lambda expr, attempt: ("right", "wrong")[attempt % 2])
    env = agentgym.make("calculator", num_tasks=16)
    chosen = set(env.task_ids()[8:12])
    env.close()
    trainer = _train(str(tiny_model_dir), tmp_path / "run", policy, 2, tokenizer=tokenizer,
                     tasks=4, first_task=8)
    kept = read_trajectories(tmp_path / "run" / "rollouts.jsonl")
    played = {t.task_id for t in [*kept, *trainer.rollout_func.last]}
    assert played and played <= chosen, (played, chosen)
    with pytest.raises(InvalidArgumentError, match="tasks=10 from first_task=8, but calculator"
                                                   " has 16 tasks"):
        _train(str(tiny_model_dir), tmp_path / "short", policy, 1, tokenizer=tokenizer,
               tasks=10, first_task=8)
    with pytest.raises(InvalidArgumentError, match="draws from 1 of calculator's tasks"):
        _train(str(tiny_model_dir), tmp_path / "few", policy, 1, tokenizer=tokenizer,
               tasks=1, first_task=8)


def test_a_collapsed_policy_is_warned_of(tiny_model_dir: Path, tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=HEALTH_LOGGER)
    tokenizer = _tokenizer(tiny_model_dir)
    # Near-zero temperature: every attempt at a task is the same tokens, and TRL scores them
    # at that temperature (the entropy collapses too). Without dynamic sampling they train.
    policy = CalculatorScript(tokenizer, lambda expr, attempt: "right", numbered=False)
    cold = RolloutConfig(Sampling(max_tokens=48, temperature=0.01), max_total_tokens=1024)
    logs = _Logs()
    train_grpo(str(tiny_model_dir), "calculator", env_kwargs={"num_tasks": 16},
               output_dir=tmp_path / "run", tokenizer=tokenizer, rollout=cold, policy=policy,
               args={"max_steps": 2, "learning_rate": 1e-2, "save_strategy": "no"},
               options=GRPOOptions(dynamic_sampling=False, warn_after_steps=2),
               callbacks=[logs.callback])
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    assert all(log["groups/identical"] == 1.0 and log["entropy"] < 0.02 for log in steps)
    collapse = [w for w in _health_warnings(caplog) if "collapsed" in w]
    assert len(collapse) == 1, _health_warnings(caplog)
    assert "every group's episodes were identical" in collapse[0]
    assert "mean token entropy" in collapse[0] and "< min_entropy 0.02" in collapse[0]


def test_bad_grpo_args_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="did you mean 'learning_rate'"):
        grpo_config(tmp_path, {"learning_rat": 1e-3})
    with pytest.raises(ValueError, match="temperature"):
        grpo_config(tmp_path, {"temperature": 0.5}, rollout=ROLLOUT)


class _Trainer:
    """All EnvRollout reads from the trainer TRL passes it: the step counter."""

    def __init__(self) -> None:
        from transformers.trainer_callback import TrainerState

        self.state = TrainerState()


# ---- a sandboxed env, registered through the public plugin API ------------------------------


class WordCount:
    """Token policy for the sandboxed env: counts the words with ``wc`` in the sandbox, then
    submits (the right count on odd attempts, one more on even ones)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer, self.attempts = tokenizer, Counter()

    async def generate(self, prompt_ids: list[int], sampling: Sampling) -> Generation:
        text = self.tokenizer.decode(prompt_ids)
        name = re.search(r"Count the words in (\S+)\.", text).group(1)
        if text.count("<|im_start|>assistant") == 1:
            self.attempts[name] += 1
            note = f"attempt {self.attempts[name]} "
            call = {"name": "shell", "arguments": {"command": f"wc -w < {name}"}}
        else:
            note, attempt = "", int(re.findall(r"attempt (\d+) ", text)[-1])
            count = int(re.findall(r"<tool_response>\s*(\d+)", text)[-1])
            answer = count if attempt % 2 else count + 1
            call = {"name": "submit", "arguments": {"answer": str(answer)}}
        ids = self.tokenizer.encode(f"{note}<tool_call>{json.dumps(call)}</tool_call>",
                                    add_special_tokens=False)
        return Generation([*ids, self.tokenizer.eos_token_id], None, "stop")


def _sandboxed_plugin(workspace: Path) -> Any:
    from agentgym.core import (
        AgentEnv,
        EnvRegistration,
        Reward,
        RewardResult,
        Submitted,
        Task,
        TaskList,
        hookimpl,
        open_sandbox,
        tool,
    )

    class Answer(Reward):
        def score(self, episode: Any) -> RewardResult:
            return RewardResult(float(str(episode.submission) == episode.task.metadata["n"]))

    class WordCountEnv(AgentEnv):
        """Count the words of a file with a shell in a local sandbox."""

        reward = Answer()

        def __init__(self, **kwargs: Any):
            tasks = TaskList([Task(f"words-{i}", f"Count the words in f{i}.txt.",
                                   metadata={"n": str(i + 3)}) for i in range(8)])
            super().__init__(tasks, max_turns=3, **kwargs)
            self.box = None

        async def setup_episode(self, task: Task) -> None:
            self.box = await open_sandbox("local", template=str(workspace))

        async def teardown_episode(self) -> None:
            if self.box is not None:
                await self.box.close()
                self.box = None

        @tool
        async def shell(self, command: str) -> str:
            """Run a shell command in the workspace.

            Args:
                command: the command line.
            """
            return (await self.box.exec(command, timeout=30)).output

        @tool
        def submit(self, answer: str) -> str:
            """Submit the count.

            Args:
                answer: the number of words.
            """
            raise Submitted(answer)

    class Plugin:
        @hookimpl
        def agentgym_envs(self) -> list:
            return [EnvRegistration("test-wordcount-sandbox", WordCountEnv,
                                    "wc in a local sandbox")]

    return Plugin()


def test_grpo_on_a_sandboxed_plugin_env(tiny_model_dir: Path, tmp_path: Path) -> None:
    import os
    import shutil

    if shutil.which("bwrap") is None or os.geteuid() != 0:
        pytest.skip("local sandbox unavailable: needs bubblewrap (apt-get install bubblewrap)"
                    " and root")
    from transformers import AutoModelForCausalLM

    import agentgym

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for i in range(8):
        (workspace / f"f{i}.txt").write_text(" ".join(["word"] * (i + 3)) + "\n")
    agentgym.register_plugin(_sandboxed_plugin(workspace), name="test-wordcount")
    tokenizer = _tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    logs = _Logs()
    trainer = train_grpo(
        model, "test-wordcount-sandbox", output_dir=tmp_path / "run", tokenizer=tokenizer,
        args={"max_steps": 3, "per_device_train_batch_size": 8, "num_generations": 4,
              "learning_rate": 1e-2, "save_strategy": "no"},
        rollout=ROLLOUT, policy=WordCount(tokenizer), callbacks=[logs.callback])
    assert trainer.state.global_step == 3
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    steps = [log for log in logs.logs if "env/pass_rate" in log]
    assert [log["env/pass_rate"] for log in steps] == [0.5, 0.5, 0.5]
    assert all(log["env/finish/submitted"] == 1.0 for log in steps)
    assert all(log["time/init_s"] > 0 and log["time/tool_s"] > 0 for log in steps)
    # Later steps found their sandboxes already started during the optimizer step.
    assert [log["prefetch/hits"] for log in steps[1:]] == [8.0, 8.0]


@pytest.mark.parametrize("baseline", ["group", "batch"])
def test_a_batch_baseline_learns_from_flat_groups(tiny_model_dir: Path, tmp_path: Path,
                                                  baseline: str) -> None:
    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # Every group is flat (a task's attempts all pass or all fail), so GRPO's group
    # baseline gives every episode advantage 0; against the batch's mean they differ.
    policy = CalculatorScript(tokenizer, lambda expr, attempt: (
        "right" if eval(expr) % 2 else "wrong"))
    logs = _Logs()
    _train(model, tmp_path / "run", policy, 1, tokenizer=tokenizer, callbacks=[logs.callback],
           args={"per_device_train_batch_size": 16},
           options=GRPOOptions(prefetch=False, dynamic_sampling=False, baseline=baseline,
                               negative_scale=0.5, measure_kl=False))
    (step,) = [log for log in logs.logs if "env/pass_rate" in log]
    assert 0 < step["env/pass_rate"] < 1  # both kinds of group in the batch
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert bool(changed) == (baseline == "batch")


def test_leaving_out_inert_rows_keeps_the_update(tiny_model_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoModelForCausalLM

    from agentgym.trainers import trl_adapter

    tokenizer = _tokenizer(tiny_model_dir)
    keep_all = trl_adapter.drop_inert_rows

    def step(drop: bool) -> tuple[dict[str, torch.Tensor], list[dict]]:
        monkeypatch.setattr(trl_adapter, "drop_inert_rows",
                            keep_all if drop else lambda trainer, output: output)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        # Tasks whose answer is even always pass (flat groups, advantage 0), the rest
        # pass on odd attempts only: half the rows carry gradient.
        policy = CalculatorScript(tokenizer, lambda expr, attempt: (
            "right" if eval(expr) % 2 == 0 or attempt % 2 else "wrong"))
        logs = _Logs()
        _train(model, tmp_path / f"drop-{drop}", policy, 1, tokenizer=tokenizer,
               callbacks=[logs.callback], args={"per_device_train_batch_size": 16,
                                                "optim": "sgd"},  # the update is the gradient
               options=GRPOOptions(prefetch=False, dynamic_sampling=False, measure_kl=False))
        return model.state_dict(), logs.logs

    start = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    dropped, logs = step(drop=True)
    kept, _ = step(drop=False)
    (trained,) = [log for log in logs if "rows/trained" in log]
    assert 0 < trained["rows/trained"] < 1
    moved = [k for k in start if not torch.equal(start[k], dropped[k])]
    assert moved
    for key in start:
        torch.testing.assert_close(dropped[key] - start[key], kept[key] - start[key],
                                   rtol=1e-4, atol=1e-8, msg=key)
