"""The line a trainer prints per logged step, and the model card saved with a model (the
lines of a real GRPO run are checked in test_grpo.py, of a whole run in
test_train_run.py)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("trl")

from rich.console import Console

from agentgym.trainers.console import StepLines, step_line
from agentgym.trainers.model_card import model_card

GRPO_LOG = {"reward": 0.4125, "env/pass_rate": 0.375, "groups/with_variance": 0.625,
            "groups/count": 8.0, "loss": 0.01234, "kl/ref": 0.00213, "kl": 0.5,
            "completions/mean_length": 40.0, "entropy": 1.2}


def test_a_grpo_line_holds_reward_pass_rate_groups_loss_kl_and_time():
    assert step_line("grpo", 3, 20, GRPO_LOG, 9.84) == (
        "grpo step 3/20  reward 0.412  pass 38%  groups with variance 5/8  loss 0.01234"
        "  kl 0.0021  9.8 s/step")


def test_a_grpo_line_leaves_out_what_the_log_lacks():
    # TRL's kl when agentgym measured none; the share of groups without their count.
    log = {"reward": 0.5, "groups/with_variance": 0.5, "kl": 0.031}
    assert step_line("grpo", 1, 2, log) == (
        "grpo step 1/2  reward 0.500  groups with variance 50%  kl 0.031")
    assert step_line("grpo", 2, 2, {"reward": None, "env/pass_rate": 0.0}, 1.0) == (
        "grpo step 2/2  reward none (every episode masked)  pass 0%  1.0 s/step")


def test_sft_and_rft_lines():
    log = {"loss": 1.25, "learning_rate": 3e-3, "grad_norm": 2.0, "entropy": 4.0}
    assert step_line("sft", 25, 800, log, 0.52) == (
        "sft step 25/800  loss 1.25  lr 3.00e-03  0.5 s/step")
    assert step_line("rft", 0, 0, {"rft/attempts": 64.0, "rft/kept": 12.0,
                                   "rft/success_rate": 0.1875}) == (
        "rft: kept 12 of 64 attempts")
    assert step_line("rft", 0, 0, {"rft/attempts": 64.0, "rft/kept": 12.0, "rft/tasks": 32.0,
                                   "rft/first_task": 128.0}) == (
        "rft: kept 12 of 64 attempts at tasks 128-159")


def test_step_lines_print_one_line_per_log_and_the_end():
    out = io.StringIO()
    lines = StepLines("sft", Console(file=out, width=40))
    state = SimpleNamespace(global_step=0, max_steps=4, is_world_process_zero=True)
    for step in (1, 2):
        lines.on_step_begin(None, state, None)
        state.global_step = step
        lines.on_step_end(None, state, None)
    lines.on_log(None, state, None, logs={"loss": 2.0, "learning_rate": 1e-3,
                                          "grad_norm": 1.0, "epoch": 0.5})
    lines.on_log(None, state, None, logs={"train_runtime": 3.25, "train_loss": 2.0})
    # One line each, however narrow the console: a file gets no wrapped lines.
    assert out.getvalue().splitlines() == [
        "sft step 2/4  loss 2  lr 1.00e-03  0.0 s/step", "sft done: 2 steps in 3.2 s"]


def test_grpo_end_line_counts_the_groups_that_carried_a_gradient():
    out = io.StringIO()
    lines = StepLines("grpo", Console(file=out, width=200))
    state = SimpleNamespace(global_step=0, max_steps=3, is_world_process_zero=True)

    def steps(count: int) -> None:
        for _ in range(count):
            lines.on_step_begin(None, state, None)
            state.global_step += 1
            lines.on_step_end(None, state, None)

    steps(1)
    lines.on_log(None, state, None, logs={"groups/with_variance": 0.25, "groups/count": 4.0})
    steps(2)  # logging_steps 2: the log holds the mean of two steps (3 of 4, then 1 of 4)
    lines.on_log(None, state, None, logs={"groups/with_variance": 0.5, "groups/count": 4.0})
    lines.on_log(None, state, None, logs={"train_runtime": 9.0})
    assert out.getvalue().splitlines()[-1] == (
        "grpo done: 3 steps in 9.0 s; 5 of 12 groups had reward variance")


def test_trl_configs_build_without_deprecation_warnings(tmp_path: Path):
    from trl import SFTConfig

    from agentgym.trainers.grpo import grpo_config
    from agentgym.trainers.sft import build_config

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = grpo_config(tmp_path, {"max_steps": 1})
        sft = build_config(SFTConfig, tmp_path, {"max_steps": 1})
    assert config.activation_checkpointing is False and sft.activation_checkpointing is False
    # A user's own setting is theirs, under either name.
    assert grpo_config(tmp_path, {"activation_checkpointing": True}).activation_checkpointing


def test_the_model_card_names_a_folder_base_model_and_how_to_load_it(tmp_path: Path):
    base = tmp_path / "00-sft" / "final"
    base.mkdir(parents=True)
    card = model_card(kind="grpo", base_model=str(base), model_dir=tmp_path / "01-grpo" /
                      "final", env_id="calculator")
    assert "[None]" not in card and "base_model:" not in card  # the hub knows no folder
    assert card.startswith("---\nlibrary_name: transformers\ntags: [agentgym, trl, grpo]\n---")
    assert "# 01-grpo" in card
    assert f"Trained from the local model `{base}` on the `calculator` env by GRPO" in card
    assert f'from_pretrained("{tmp_path / "01-grpo" / "final"}")' in card
    assert f"agentgym eval calculator --policy hf:{tmp_path / '01-grpo' / 'final'}" in card


def test_the_model_card_links_a_hub_base_model():
    card = model_card(kind="sft", base_model="Qwen/Qwen2.5-0.5B-Instruct", model_dir="out/final")
    assert "base_model: Qwen/Qwen2.5-0.5B-Instruct" in card
    assert ("Trained from [Qwen/Qwen2.5-0.5B-Instruct]"
            "(https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct) by supervised") in card
    assert "agentgym eval ENV_ID --policy hf:out/final" in card
