"""SFT on trajectories: only the model's tokens carry loss; the model is saved; resume works."""

import asyncio
import json
import subprocess

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from agentgym.core import OraclePolicy
from agentgym.rollout.chat import tokenize_conversation
from agentgym.rollout.evaluate import rollout
from agentgym.rollout.trajectory import Trajectory, read_trajectories
from agentgym.trainers.sft import sft_trainer, train_sft, trajectory_dataset

FAST = {"per_device_train_batch_size": 4, "learning_rate": 1e-3, "logging_steps": 1,
        "disable_tqdm": True}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def demonstrations():
    return asyncio.run(rollout("calculator", OraclePolicy(), 8))


class Steps(TrainerCallback):
    """Records the global step at the start of every optimizer step."""

    def __init__(self):
        self.started = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started.append(state.global_step)


def test_dataset_rows_are_the_loop_tokens(tokenizer, demonstrations):
    token_level = Trajectory("calculator", "t", 0, prompt_ids=[5, 6, 7],
                             completion_ids=[8, 9, 10, 11], loss_mask=[1, 1, 0, 1])
    env_only = Trajectory("calculator", "t", 1, prompt_ids=[5], completion_ids=[6],
                          loss_mask=[0])
    dataset = trajectory_dataset([*demonstrations, token_level, env_only], tokenizer)
    assert len(dataset) == len(demonstrations) + 1  # the one with no model token is skipped
    for row, trajectory in zip(dataset, demonstrations, strict=False):
        prompt, completion, mask = tokenize_conversation(tokenizer, trajectory.messages,
                                                         trajectory.tools)
        assert row["input_ids"] == prompt + completion
        assert row["completion_mask"] == [0] * len(prompt) + mask
    assert dataset[-1] == {"input_ids": [5, 6, 7, 8, 9, 10, 11],
                           "completion_mask": [0, 0, 0, 1, 1, 0, 1]}
    bare = trajectory_dataset(demonstrations, tokenizer, tool_schemas=False)
    for row, trajectory in zip(bare, demonstrations, strict=True):  # the tools section is left out
        prompt, completion, _ = tokenize_conversation(tokenizer, trajectory.messages, None)
        assert row["input_ids"] == prompt + completion
        assert "<tools>" not in tokenizer.decode(row["input_ids"])
    with pytest.raises(ValueError, match="none of the 1 trajectories"):
        trajectory_dataset([env_only], tokenizer)
    foreign = Trajectory("calculator", "t", 2, prompt_ids=[1], completion_ids=[10**6],
                         loss_mask=[1])
    with pytest.raises(ValueError, match="another tokenizer"):
        trajectory_dataset([foreign], tokenizer)


def test_sft_trains_on_model_tokens_only_and_saves(tiny_model_dir, tokenizer, demonstrations,
                                                   tmp_path):
    dataset = trajectory_dataset(demonstrations, tokenizer)
    masks = {tuple(r["input_ids"]): r["completion_mask"] for r in dataset}
    trainer = train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path,
                        args={**FAST, "max_steps": 2})
    # What the trainer trains on: labels are -100 exactly where the mask is 0.
    processed = trainer.train_dataset
    assert len(processed) == len(dataset)
    for row in processed:
        mask = masks[tuple(row["input_ids"])]
        assert [label != -100 for label in row["labels"]] == [m == 1 for m in mask]
        assert all(label in (-100, i) for label, i in zip(row["labels"], row["input_ids"],
                                                          strict=True))
    batch = next(iter(trainer.get_train_dataloader()))
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=True):
        n = next(len(k) for k in masks if list(k) == ids[: len(k)])
        assert [x != -100 for x in labels[:n]] == [m == 1 for m in masks[tuple(ids[:n])]]
        assert all(x == -100 for x in labels[n:])  # padding
    assert trainer.state.global_step == 2
    # The parameters moved, and the final model and tokenizer load from output_dir/final.
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "final").state_dict()
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert "model.layers.0.mlp.down_proj.weight" in changed and len(changed) > len(before) // 2
    assert AutoTokenizer.from_pretrained(tmp_path / "final").chat_template == (
        tokenizer.chat_template)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the plain-logits loss is the CPU path")
def test_the_cpu_loss_and_metrics_equal_trls_fused_head(tiny_model_dir, tokenizer, demonstrations,
                                                       tmp_path):
    trainer = sft_trainer(str(tiny_model_dir), trajectory_dataset(demonstrations, tokenizer),
                          output_dir=tmp_path, args={**FAST, "max_steps": 1})
    assert type(trainer).__name__ == "PlainLossSFTTrainer"
    batch = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    fused = super(type(trainer), trainer)  # TRL's compute_loss, on the fused LM head
    trainer.model.train()  # as in a training step: the metrics go to "train"
    results = []
    for compute in (trainer, fused):
        trainer._metrics["train"].clear()
        trainer._total_train_tokens = 0
        with torch.no_grad():
            loss = compute.compute_loss(trainer.model, dict(batch))
        metrics = trainer._metrics["train"]
        results.append([float(loss), metrics["entropy"][0], metrics["mean_token_accuracy"][0],
                        metrics["num_tokens"][0]])
    assert results[0] == pytest.approx(results[1], rel=1e-4)
    assert results[0][0] > 1.0  # an untrained model: a real loss, not a zero of masked tokens


def test_resume_continues_from_the_last_checkpoint(tiny_model_dir, tokenizer, demonstrations,
                                                   tmp_path):
    dataset = trajectory_dataset(demonstrations, tokenizer)
    first = train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path,
                      args={**FAST, "max_steps": 2, "save_steps": 1})
    assert first.state.global_step == 2 and (tmp_path / "checkpoint-2").is_dir()
    steps = Steps()
    second = train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path, resume=True,
                       args={**FAST, "max_steps": 3, "save_steps": 1}, callbacks=[steps])
    assert steps.started == [2]  # one step, taken from checkpoint-2's state
    assert second.state.global_step == 3 and (tmp_path / "checkpoint-3").is_dir()


def test_unknown_config_fields_name_the_closest_one(tiny_model_dir, tokenizer, demonstrations,
                                                    tmp_path):
    dataset = trajectory_dataset(demonstrations[:1], tokenizer)
    with pytest.raises(ValueError, match=r"'learning_rat'.*'learning_rate'"):
        train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path,
                  args={"learning_rat": 1e-3})
    with pytest.raises(ValueError, match="environment tokens"):
        train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path,
                  args={"completion_only_loss": False})


@pytest.mark.filterwarnings("ignore:The .*keep_end.* truncation mode is deprecated:FutureWarning")
def test_max_length_that_cuts_rows_is_said(tiny_model_dir, tokenizer, demonstrations,
                                           tmp_path):
    """TRL cuts rows at max_length and drops those left with no model token: a cut is a
    warning with the length that fits, a run with nothing left an error before training."""
    dataset = trajectory_dataset(demonstrations, tokenizer)
    longest = max(len(row) for row in dataset["input_ids"])
    longer = sum(len(row) == longest for row in dataset["input_ids"])
    prompt = min(mask.index(1) for mask in dataset["completion_mask"])
    with pytest.warns(UserWarning, match=rf"{longer} of the 8 rows .* max_length={longest - 1}"
                                         rf" .* to {longest}"):
        sft_trainer(str(tiny_model_dir), dataset, output_dir=tmp_path,
                    args={**FAST, "max_length": longest - 1})
    with pytest.raises(ValueError, match=rf"every one of the 8 rows .* max_length={prompt}"
                                         rf" .* to {longest}"):
        sft_trainer(str(tiny_model_dir), dataset, output_dir=tmp_path,
                    args={**FAST, "max_length": prompt})
    # cut from the start instead, the rows keep their last (model) tokens: a warning only
    with pytest.warns(UserWarning, match=r"\(0 of them keep no model token"):
        sft_trainer(str(tiny_model_dir), dataset, output_dir=tmp_path,
                    args={**FAST, "max_length": prompt, "truncation_mode": "keep_end"})


def test_sft_from_an_oracle_rollout_file(tiny_model_dir, tokenizer, agentgym_cli, tmp_path):
    out = tmp_path / "demos.jsonl"
    subprocess.run([agentgym_cli, "rollout", "calculator", "--policy", "oracle", "-n", "8",
                    "--out", str(out)], check=True, capture_output=True, timeout=120)
    trajectories = read_trajectories(out)
    assert len(trajectories) == 8 and all(t.tools and not t.completion_ids for t in trajectories)
    import datasets

    assert json.loads(datasets.load_dataset("json", data_files=str(out),
                                            split="train")[0]["tools"]) == trajectories[0].tools
    dataset = trajectory_dataset(trajectories, tokenizer)
    assert len(dataset) == 8
    trainer = train_sft(str(tiny_model_dir), dataset, output_dir=tmp_path / "sft",
                        args={**FAST, "max_steps": 2})
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    assert (tmp_path / "sft" / "final" / "model.safetensors").is_file()


@pytest.mark.parametrize("parser", ["hermes", "xml"])
def test_a_template_without_tool_calls_learns_the_envs_format(tokenizer, parser,
                                                               content_only_template):
    import copy

    from agentgym.core.registry import build

    content_only = copy.deepcopy(tokenizer)
    content_only.chat_template = content_only_template
    demos = asyncio.run(rollout("calculator", OraclePolicy(), 2, env_kwargs={"parser": parser}))
    rows = trajectory_dataset(demos, content_only, parser=parser)
    reader = build("parsers", parser)
    for row, demo in zip(rows, demos, strict=True):
        taught = [i for i, m in zip(row["input_ids"], row["completion_mask"], strict=True) if m]
        text = content_only.decode(taught)
        first_call = demo.messages[2]["tool_calls"][0]["function"]
        parsed = reader.parse(text.split("<|im_end|>")[0]).tool_calls
        assert [(c.name, c.arguments) for c in parsed] == [
            (first_call["name"], json.loads(first_call["arguments"]))]
