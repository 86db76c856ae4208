"""What agentgym relies on inside TRL still holds on the installed TRL: each function of
``agentgym.trainers.trl_adapter`` against a real ``GRPOTrainer`` (built, not trained)."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from agentgym.trainers.grpo import grpo_config, task_dataset
from agentgym.trainers.trl_adapter import (
    TrainSamplerHook,
    log_metrics,
    quiet_expected_warnings,
    repeat_sampler_layout,
    stop_token_ids,
)


def _zero_reward(completions: list[Any], **_: Any) -> list[float]:
    return [0.0] * len(completions)


@pytest.fixture(scope="module")
def trainer(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    class Hooked(TrainSamplerHook, GRPOTrainer):
        def wrap_train_sampler(self, sampler: Any, dataset: Any) -> Any:
            self.seen = (sampler, dataset)
            return sampler

    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    args = grpo_config(tmp_path_factory.mktemp("adapter"), {
        "max_steps": 1, "per_device_train_batch_size": 4, "num_generations": 2,
        "steps_per_generation": 2, "num_iterations": 3})
    return Hooked(model=model, reward_funcs=[_zero_reward], args=args,
                  train_dataset=task_dataset([f"t{i}" for i in range(8)]),
                  processing_class=tokenizer)


def test_logged_metrics_come_out_averaged_at_the_next_log(trainer: Any):
    from transformers import TrainerCallback

    logged: list[dict[str, Any]] = []

    class Catch(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **kwargs: Any) -> None:
            logged.append(dict(logs))

    trainer.add_callback(Catch())
    trainer.model.train()
    log_metrics(trainer, {"env/pass_rate": 0.25})
    log_metrics(trainer, {"env/pass_rate": 0.75})
    trainer.log({"loss": 1.0})
    assert logged[-1]["loss"] == 1.0 and logged[-1]["env/pass_rate"] == 0.5
    trainer.log({"loss": 2.0})
    assert "env/pass_rate" not in logged[-1]  # logged once, then cleared


def test_the_sampler_hook_sees_trls_repeat_sampler(trainer: Any):
    trainer.get_train_dataloader()
    sampler, dataset = trainer.seen
    assert dataset is trainer.train_dataset
    assert type(sampler).__name__ == "RepeatSampler"
    # A generation of 2 steps x 4 rows in groups of 2: 4 distinct prompts, each twice in a
    # row; the chunk comes again for every step that reads it (2 x num_iterations=3).
    assert repeat_sampler_layout(sampler) == (4, 2, 6)
    indices = list(iter(sampler))
    chunk = indices[:4 * 2]
    assert chunk[::2] == chunk[1::2] and len(set(chunk)) == 4
    assert indices[:8 * 6] == chunk * 6 and indices[8 * 6:8 * 7] != chunk


def test_stop_tokens_hold_the_tokenizers_eos(trainer: Any):
    assert trainer.processing_class.eos_token_id in stop_token_ids(trainer)


def test_the_vllm_engine_is_called_as_the_adapter_expects():
    from trl.generation.vllm_generation import VLLMGeneration

    parameters = list(inspect.signature(VLLMGeneration.generate).parameters)
    assert parameters[:4] == ["self", "prompts", "images", "num_generations"]
    assert "logprob_token_ids" in (VLLMGeneration.generate.__doc__ or "")


def test_the_unscorable_row_warning_is_silenced():
    from trl.trainer import grpo_trainer

    quiet_expected_warnings()
    assert "All reward functions returned None" in inspect.getsource(grpo_trainer)
    logger = logging.getLogger("trl.trainer.grpo_trainer")
    silenced = logger.makeRecord(logger.name, logging.WARNING, __file__, 0,
                                 "All reward functions returned None for the following", (),
                                 None)
    kept = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, "other", (), None)
    assert not logger.filter(silenced) and logger.filter(kept)
    assert grpo_trainer.logger.logger is logger  # accelerate's adapter over this logger
