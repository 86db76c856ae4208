"""What agentgym relies on inside TRL still holds on the installed TRL: each function of
``agentgym.trainers.trl_adapter`` against a real ``GRPOTrainer`` (built, not trained)."""

from __future__ import annotations

import inspect
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("trl")

from agentgym.core.policies import Sampling
from agentgym.rollout.loop import RolloutConfig
from agentgym.trainers import trl_adapter
from agentgym.trainers.grpo import grpo_config, task_dataset
from agentgym.trainers.trl_adapter import (
    PlainLogpsOffGPU,
    ScoredBatch,
    TrainSamplerHook,
    adapters_disabled,
    completion_logps,
    frozen_copy,
    is_peft_trainer,
    log_metrics,
    quiet_expected_warnings,
    repeat_sampler_layout,
    steps_per_generation_batch,
    stop_token_ids,
    use_console_callback,
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


def test_rollout_calls_are_steps_per_generation_batch_apart(tiny_model_dir: Path,
                                                           tmp_path: Path):
    """TRL calls the rollout_func every steps_per_generation_batch(args) optimizer steps."""
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    steps: list[int] = []

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list]:
        steps.append(trainer.state.global_step)
        n = len(prompts)
        return {"prompt_ids": [[1]] * n, "completion_ids": [[2, 3]] * n,
                "logprobs": [[-1.0, -1.0]] * n}

    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    args = grpo_config(tmp_path, {
        "max_steps": 3, "per_device_train_batch_size": 2, "num_generations": 2,
        "gradient_accumulation_steps": 2, "steps_per_generation": 2, "num_iterations": 2,
        "save_strategy": "no"})
    assert steps_per_generation_batch(args) == 2
    quiet_expected_warnings()
    GRPOTrainer(model=model, reward_funcs=[_zero_reward], args=args,
                train_dataset=task_dataset([f"t{i}" for i in range(8)]),
                processing_class=tokenizer, rollout_func=rollout_func).train()
    assert steps == [0, 2]


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


def test_the_deprecation_trls_code_trips_is_silenced_and_no_other(trainer: Any):
    from trl.models import utils

    assert "is_gradient_checkpointing" in inspect.getsource(utils)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_expected_warnings()
        assert trainer.model.is_gradient_checkpointing is False  # what TRL reads
        warnings.warn("a warning of ours", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a warning of ours"]


def test_the_console_callback_replaces_transformers_printers(trainer: Any):
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class Lines(TrainerCallback):
        pass

    def names() -> list[type]:
        return [type(c) for c in trainer.callback_handler.callbacks]

    assert ProgressCallback in names()  # what transformers adds by default
    lines = Lines()
    use_console_callback(trainer, lines)
    assert ProgressCallback not in names() and PrinterCallback not in names()
    assert lines in trainer.callback_handler.callbacks


def _batch(trainer: Any) -> ScoredBatch:
    import torch

    generator = torch.Generator().manual_seed(0)
    vocab = trainer.model.config.vocab_size
    prompts = torch.randint(3, vocab, (3, 5), generator=generator)
    completions = torch.randint(3, vocab, (3, 4), generator=generator)
    prompt_mask = torch.ones_like(prompts)
    prompt_mask[0, :2] = 0  # left padding
    completion_mask = torch.ones_like(completions)
    completion_mask[1, 3:] = 0  # right padding
    return ScoredBatch(torch.cat([prompts, completions], 1),
                       torch.cat([prompt_mask, completion_mask], 1), 4, completion_mask,
                       advantages=torch.zeros(3))


def test_completion_logps_are_the_models_log_softmax_of_the_sampled_tokens(trainer: Any):
    import torch

    batch = _batch(trainer)
    rows = torch.tensor([True, True, False])
    logps = completion_logps(trainer, batch, rows)
    assert logps.shape == (2, 4) and not logps.requires_grad
    with torch.no_grad():  # TRL's fused head leaves the plain forward (logits) as it was
        logits = trainer.model(input_ids=batch.input_ids[rows],
                               attention_mask=batch.attention_mask[rows]).logits
    expected = torch.log_softmax(logits[:, -5:-1].float() / trainer.temperature, dim=-1)
    expected = expected.gather(-1, batch.input_ids[rows][:, -4:, None]).squeeze(-1)
    real = batch.loss_mask[rows].bool()
    torch.testing.assert_close(logps[real], expected[real], rtol=1e-4, atol=1e-4)
    # A frozen copy scores the same, and is its own model.
    reference = frozen_copy(trainer)
    assert not any(p.requires_grad for p in reference.parameters())
    assert next(reference.parameters()).data_ptr() != next(trainer.model.parameters()).data_ptr()
    torch.testing.assert_close(completion_logps(trainer, batch, rows, model=reference), logps)
    assert not is_peft_trainer(trainer)


def test_a_frozen_copy_keeps_scoring_the_weights_it_copied(tiny_model_dir: Path, tmp_path: Path):
    import torch
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    class Plain(PlainLogpsOffGPU, GRPOTrainer):
        pass

    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    for cls in (GRPOTrainer, Plain):  # TRL's fused head, and the plain logits off GPU
        trainer = cls(model=model, reward_funcs=[_zero_reward], processing_class=tokenizer,
                      args=grpo_config(tmp_path / cls.__name__, {
                          "max_steps": 1, "per_device_train_batch_size": 4,
                          "num_generations": 2}),
                      train_dataset=task_dataset([f"t{i}" for i in range(8)]))
        batch = _batch(trainer)
        rows = torch.tensor([True, True, True])
        reference = frozen_copy(trainer)
        before = completion_logps(trainer, batch, rows)
        with torch.no_grad():  # a training step, as far as the copy should care
            trainer.model.get_output_embeddings().weight.mul_(1.5)
        after = completion_logps(trainer, batch, rows)
        assert not torch.allclose(after, before)
        torch.testing.assert_close(completion_logps(trainer, batch, rows, model=reference),
                                   before)
        model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")


def test_plain_logps_off_gpu_score_as_trls_fused_head(tiny_model_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    import torch
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    class Plain(PlainLogpsOffGPU, GRPOTrainer):
        pass

    def build(cls: type) -> Any:  # the same weights, at a temperature that is not 1
        model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
        args = grpo_config(tmp_path / cls.__name__, {
            "max_steps": 1, "per_device_train_batch_size": 4, "num_generations": 2},
            rollout=RolloutConfig(sampling=Sampling(temperature=0.7)))
        return cls(model=model, reward_funcs=[_zero_reward], args=args,
                   processing_class=tokenizer,
                   train_dataset=task_dataset([f"t{i}" for i in range(8)]))

    fused_trainer, plain = build(GRPOTrainer), build(Plain)
    batch = _batch(plain)
    args = (batch.input_ids, batch.attention_mask, batch.logits_to_keep)
    fused, fused_entropy, _ = fused_trainer._get_per_token_logps_and_entropies(
        fused_trainer.model, *args, batch_size=2, compute_entropy=True)
    logps, entropy, aux = plain._get_per_token_logps_and_entropies(
        plain.model, *args, batch_size=2, compute_entropy=True)
    assert aux is None and logps.shape == fused.shape == (3, 4)
    torch.testing.assert_close(logps, fused, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(entropy, fused_entropy, rtol=1e-4, atol=1e-5)
    assert float(logps[1, 3]) == 0.0 and float(entropy[1, 3]) == 0.0  # padding scores 0
    # Logits that would not fit at once go through a row at a time, scoring the same.
    monkeypatch.setattr(trl_adapter, "_PLAIN_LOGITS_BYTES", 1)
    one_by_one, _, _ = plain._get_per_token_logps_and_entropies(plain.model, *args,
                                                               batch_size=2)
    torch.testing.assert_close(one_by_one, logps.detach())
    logps.sum().backward()  # the loss trains through it
    assert plain.model.get_output_embeddings().weight.grad is not None


def test_rows_of_other_lengths_score_as_each_alone(tiny_model_dir: Path, tmp_path: Path):
    import torch
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    class Plain(PlainLogpsOffGPU, GRPOTrainer):
        pass

    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    plain = Plain(model=model, reward_funcs=[_zero_reward], processing_class=tokenizer,
                  args=grpo_config(tmp_path, {"max_steps": 1, "per_device_train_batch_size": 4,
                                              "num_generations": 2}),
                  train_dataset=task_dataset([f"t{i}" for i in range(8)]))
    # Prompts of 3 to 40 tokens, completions of 0 to 12: one batch padded to 40 + 12.
    shapes = [(40, 12), (3, 2), (10, 0), (25, 7), (4, 12), (38, 1)]
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, model.config.vocab_size, (len(shapes), 52), generator=generator)
    mask = torch.zeros_like(ids)
    for row, (prompt, completion) in enumerate(shapes):
        mask[row, 40 - prompt:40 + completion] = 1
    groups = trl_adapter.length_groups(mask, 40)
    assert sorted(row for g in groups for row in g.rows.tolist()) == list(range(len(shapes)))
    assert len(groups) > 1 and all(g.end - g.start < 52 for g in groups[:-1])
    assert len(trl_adapter.length_groups(mask, 40, ratio=float("inf"))) == 1
    logps, entropy, _ = plain._get_per_token_logps_and_entropies(
        model, ids, mask, 12, compute_entropy=True)
    fused, fused_entropy, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        plain, model, ids, mask, 12, compute_entropy=True)
    torch.testing.assert_close(logps, fused, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(entropy, fused_entropy, rtol=1e-4, atol=1e-5)
    for row, (prompt, completion) in enumerate(shapes):  # each row alone, unpadded
        alone = ids[row:row + 1, 40 - prompt:40 + max(completion, 1)]
        with torch.no_grad():
            logits = model(input_ids=alone).logits[0, prompt - 1:prompt - 1 + completion]
        expected = torch.log_softmax(logits / plain.temperature, -1).gather(
            -1, alone[0, prompt:prompt + completion, None]).squeeze(-1)
        torch.testing.assert_close(logps[row, :completion].detach(), expected,
                                   rtol=1e-4, atol=1e-5)
        assert not logps[row, completion:].any()  # padding scores 0
    # A step whose rows completed nothing still trains through the model (a zero update),
    # as under TRL's own scoring: its backward must not fail.
    nothing = mask.clone()
    nothing[:, 40:] = 0
    logps, _, _ = plain._get_per_token_logps_and_entropies(model, ids, nothing, 12)
    assert not logps.any()
    logps.sum().backward()
    assert model.get_output_embeddings().weight.grad is not None


def test_adapters_disabled_scores_the_base_model(tiny_model_dir: Path, tmp_path: Path):
    import torch
    from peft import LoraConfig
    from trl import GRPOTrainer

    from agentgym.rollout.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(tiny_model_dir, padding_side="left")
    args = grpo_config(tmp_path, {"max_steps": 1, "per_device_train_batch_size": 4,
                                  "num_generations": 2})
    adapters = LoraConfig(r=4, target_modules=["q_proj"], task_type="CAUSAL_LM")
    lora = GRPOTrainer(model=model, reward_funcs=[_zero_reward], args=args,
                       train_dataset=task_dataset([f"t{i}" for i in range(8)]),
                       processing_class=tokenizer, peft_config=adapters)
    assert is_peft_trainer(lora)
    batch, rows = _batch(lora), torch.ones(3, dtype=torch.bool)
    base = completion_logps(lora, batch, rows)
    with torch.no_grad():  # move the adapters away from their no-op start
        for name, parameter in lora.model.named_parameters():
            if "lora_B" in name:
                parameter.fill_(0.5)
    assert not torch.allclose(completion_logps(lora, batch, rows), base)
    with adapters_disabled(lora):
        torch.testing.assert_close(completion_logps(lora, batch, rows), base)


def test_the_scored_batch_is_what_the_hook_expects():
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask",
                "advantages", "old_per_token_logps", "ref_per_token_logps"):
        assert f'output["{key}"]' in source or f'"{key}":' in source, key
    assert list(inspect.signature(GRPOTrainer._generate_and_score_completions).parameters) == [
        "self", "inputs"]


def _scored(advantages: list[Any], tokens: list[int]) -> dict[str, Any]:
    """A scored batch as TRL returns it: row i has ``tokens[i]`` completion tokens in the
    loss (of 3) and advantage ``advantages[i]`` (a number, or one per token)."""
    rows = len(advantages)
    mask = torch.tensor([[1] * n + [0] * (3 - n) for n in tokens])
    if any(isinstance(a, list) for a in advantages):
        advantages = [a if isinstance(a, list) else [a] * 3 for a in advantages]
    return {"prompt_ids": torch.arange(rows * 2).reshape(rows, 2),
            "prompt_mask": torch.ones(rows, 2, dtype=torch.long),
            "completion_ids": torch.arange(rows * 3).reshape(rows, 3),
            "completion_mask": mask, "old_per_token_logps": -torch.rand(rows, 3),
            "advantages": torch.tensor(advantages, dtype=torch.float),
            "num_items_in_batch": mask.sum(), "prompts": [f"p{i}" for i in range(rows)]}


def _inert_trainer(steps: int, beta: float = 0.0, loss_type: str = "dapo") -> Any:
    from collections import defaultdict
    from types import SimpleNamespace

    return SimpleNamespace(beta=beta, model=SimpleNamespace(training=True),
                           _metrics={"train": defaultdict(list)},
                           args=SimpleNamespace(loss_type=loss_type, steps_per_generation=steps,
                                                top_entropy_quantile=1.0))


def test_rows_that_cannot_move_the_weights_are_left_out():
    trainer = _inert_trainer(steps=2)
    # Rows 1 and 4 carry gradient; 0 and 2 have advantage 0; 3 has no token in the loss;
    # 5's advantage lies on a token outside the loss only.
    output = _scored([0.0, 1.5, 0.0, -0.2, -0.4, [0.0, 0.0, 2.0]], [3, 2, 1, 0, 3, 2])
    kept = trl_adapter.drop_inert_rows(trainer, output)
    assert kept["prompts"] == ["p1", "p4"]
    for key in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask",
                "old_per_token_logps", "advantages"):
        assert torch.equal(kept[key], output[key][[1, 4]]), key
    assert kept["num_items_in_batch"] is output["num_items_in_batch"]  # the loss's scale
    assert trainer._metrics["train"]["rows/trained"] == [pytest.approx(2 / 6)]


def test_inert_rows_fill_every_step_and_tokens_come_first():
    trainer = _inert_trainer(steps=4)
    output = _scored([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [2, 0, 0, 1, 3, 0, 2, 1])
    kept = trl_adapter.drop_inert_rows(trainer, output)
    # One row with signal, three inert ones beside it, those with tokens in the loss first.
    assert kept["prompts"] == ["p0", "p3", "p4", "p6"]
    nothing = trl_adapter.drop_inert_rows(_inert_trainer(steps=2), _scored([0.0] * 4, [1] * 4))
    assert len(nothing["prompts"]) == 2  # one row a step, however flat the batch


@pytest.mark.parametrize(("beta", "loss_type", "quantile"),
                         [(0.04, "dapo", 1.0), (0.0, "grpo", 1.0), (0.0, "dapo", 0.2)])
def test_rows_stay_where_leaving_them_out_would_change_the_loss(beta: float, loss_type: str,
                                                                quantile: float):
    trainer = _inert_trainer(steps=1, beta=beta, loss_type=loss_type)
    trainer.args.top_entropy_quantile = quantile  # the entropy mask's quantile is per step
    output = _scored([1.0, 0.0, 0.0], [2, 2, 2])
    assert trl_adapter.drop_inert_rows(trainer, output) is output
