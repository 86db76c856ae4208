"""Learning health: the k3 KL estimate, the warnings' rules, and the docs that name both.
Whole GRPO runs (metrics logged, warnings fired on flat and collapsed runs) are in
test_grpo.py."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("trl")

from agentgym.trainers.grpo import GRPOOptions
from agentgym.trainers.health import LearningHealth, k3_kl

DOC = (Path(__file__).parents[2] / "docs" / "training.md").read_text()


def test_k3_estimates_the_kl_from_samples_of_the_policy():
    generator = torch.Generator().manual_seed(0)
    policy = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    reference = torch.tensor([0.2, 0.2, 0.2, 0.2, 0.2])
    tokens = torch.multinomial(policy, 200_000, replacement=True, generator=generator)
    logps, reference_logps = policy.log()[tokens], reference.log()[tokens]
    exact = float((policy * (policy / reference).log()).sum())
    mask = torch.ones_like(logps)
    assert k3_kl(logps, reference_logps, mask) == pytest.approx(exact, rel=0.02)
    assert k3_kl(logps, logps, mask) == 0.0
    # Masked tokens (what the env wrote, padding) do not count.
    mask[: len(mask) // 2] = 0
    garbage = reference_logps.clone()
    garbage[: len(mask) // 2] = -50.0
    assert k3_kl(logps, garbage, mask) == pytest.approx(exact, rel=0.03)


def _feed(health: LearningHealth, logs: list[dict]) -> None:
    for step, log in enumerate(logs, start=1):
        health.on_log(None, SimpleNamespace(global_step=step), None, logs=log)


HEALTHY = {"groups/with_variance": 0.5, "groups/identical": 0.0, "entropy": 1.2,
           "episodes/in_loss": 1.0, "env/pass_rate": 0.4}
FLAT = {**HEALTHY, "groups/with_variance": 0.0, "env/pass_rate": 1.0}
LOW_ENTROPY = {**HEALTHY, "entropy": 0.001, "groups/with_variance": 0.125}


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentgym.trainers.health"]


def test_warnings_need_consecutive_steps_and_repeat_while_it_lasts(
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="agentgym.trainers.health")
    # A healthy step breaks the streak; a log without the keys (the end of training) doesn't.
    _feed(LearningHealth(after_steps=3), [FLAT, FLAT, HEALTHY, FLAT, FLAT, {"loss": 1.0}])
    assert _warnings(caplog) == []
    _feed(LearningHealth(after_steps=3), [FLAT, FLAT, {"train_runtime": 1.0}, FLAT] + [FLAT] * 3)
    warnings = _warnings(caplog)
    assert [w.split(":")[0] for w in warnings] == ["GRPO step 4", "GRPO step 7"]
    assert "Every episode passed: use harder tasks" in warnings[0]
    caplog.clear()
    _feed(LearningHealth(after_steps=0), [FLAT] * 5)
    assert _warnings(caplog) == []


def test_low_entropy_counts_only_on_steps_that_trained_tokens(
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="agentgym.trainers.health")
    # TRL logs entropy 0 when every token was masked: that is not a collapse.
    _feed(LearningHealth(after_steps=2), [{**LOW_ENTROPY, "episodes/in_loss": 0.0}] * 2)
    assert _warnings(caplog) == []
    _feed(LearningHealth(after_steps=2, min_entropy=0.0005), [LOW_ENTROPY] * 2)
    assert _warnings(caplog) == []
    _feed(LearningHealth(after_steps=2), [LOW_ENTROPY] * 2)
    (warning,) = _warnings(caplog)
    assert "collapsed for 2 steps (mean token entropy 0.001 < min_entropy 0.02, 12% of" \
        in warning
    caplog.clear()
    # A model sure of its format samples at low entropy and still learns where its groups
    # vary (the memory recipe: 0.011-0.026 nats, half its groups or more with variance).
    _feed(LearningHealth(after_steps=2), [{**LOW_ENTROPY, "groups/with_variance": 0.5}] * 4)
    assert _warnings(caplog) == []


def test_drift_from_the_starting_model_is_warned_of_with_its_trend(
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="agentgym.trainers.health")
    start = {**HEALTHY, "kl/ref": 0.0, "env/pass_rate": 0.34, "env/tool_errors": 0.34}
    drifted = {**HEALTHY, "kl/ref": 0.33, "env/pass_rate": 0.39, "env/tool_errors": 0.85}
    no_generation = {"loss": 0.1}  # a step that reuses the batch: no kl/ref, no streak break
    _feed(LearningHealth(after_steps=3), [start, drifted, no_generation, drifted,
                                          {**drifted, "kl/ref": 0.1}, drifted, drifted])
    assert _warnings(caplog) == []  # the dip under max_kl broke the streak
    _feed(LearningHealth(after_steps=3), [start, drifted, no_generation, drifted, drifted])
    (warning,) = _warnings(caplog)
    assert warning.startswith("GRPO step 5: the policy has drifted")
    assert "kl/ref 0.33 >= max_kl 0.2" in warning
    assert "training pass rate 0.39 (first step 0.34)" in warning
    assert "tool errors per episode 0.85 (first step 0.34)" in warning
    assert "Lower learning_rate, set beta > 0" in warning
    caplog.clear()
    _feed(LearningHealth(after_steps=3, max_kl=0.0), [drifted] * 6)
    _feed(LearningHealth(after_steps=3, max_kl=0.5), [drifted] * 6)
    assert _warnings(caplog) == []


def test_no_signal_advice_follows_the_options(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="agentgym.trainers.health")
    _feed(LearningHealth(after_steps=1, dynamic_sampling=False),
          [{**FLAT, "env/pass_rate": 0.0}])
    (warning,) = _warnings(caplog)
    assert "Every episode failed" in warning and "sft or rft stage" in warning
    assert "turn on options.dynamic_sampling" in warning
    caplog.clear()
    masked = {**FLAT, "env/pass_rate": 0.0, "masked/finish_reason": 1.0,
              "env/finish/max_turns": 0.75, "env/finish/context_limit": 0.25}
    _feed(LearningHealth(after_steps=1), [masked])
    (warning,) = _warnings(caplog)
    assert "Every episode was masked by its finish reason (mostly 'max_turns')" in warning
    assert "Every episode failed" not in warning


def test_health_options_are_checked():
    with pytest.raises(ValueError, match=r"warn_after_steps must be >= 0 \(0: never warn\)"):
        GRPOOptions(warn_after_steps=-1)
    with pytest.raises(ValueError, match="min_entropy must be >= 0"):
        GRPOOptions(min_entropy=-0.1)
    with pytest.raises(ValueError, match=r"max_kl must be >= 0 \(0: no drift warning\)"):
        GRPOOptions(max_kl=-1)


def test_every_grpo_option_and_health_metric_is_documented():
    options = [f.name for f in dataclasses.fields(GRPOOptions)]
    metrics = ["dynamic_sampling/flat_fraction", "groups/with_variance", "groups/identical",
               "episodes/in_loss", "advantage/mean_abs", "advantage/max", "advantage/min",
               "kl/ref", "entropy", "clip_ratio/*", "rollout/tokens_per_s",
               "async/staleness_mean", "async/is_ratio_mean", "fairness/worst_task_ratio",
               "cost/sandbox_s_per_useful_group"]
    missing = [name for name in options + metrics if not re.search(rf"`{re.escape(name)}`", DOC)]
    assert not missing, f"docs/training.md lacks: {missing}"
