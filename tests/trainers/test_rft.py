"""Rejection fine-tuning: every attempt is kept on disk, only the successes are trained on."""

import asyncio
import json
import re
from collections import Counter

import pytest
from transformers import AutoTokenizer, TrainerCallback

from agentgym.core.policies import Generation, Sampling
from agentgym.rollout.loop import RolloutConfig
from agentgym.rollout.trajectory import Trajectory, read_trajectories
from agentgym.trainers.rft import ATTEMPTS_FILE, NoSuccessError, collect, successful, train_rft

SFT = {"max_steps": 1, "per_device_train_batch_size": 2, "learning_rate": 1e-3,
       "disable_tqdm": True}


class PlusOnly:
    """A token policy that solves calculator tasks whose expression has a '+' and submits a
    wrong answer to the others, reading the task from the tokens it is given."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, sampling):
        text = self.tokenizer.decode(prompt_ids)
        expression = re.search(r"What is (.+?)\?<\|im_end\|>", text).group(1)
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text)
        if not results:
            call = {"name": "calculator", "arguments": {"expression": expression}}
        else:
            answer = results[-1] if "+" in expression else results[-1] + "1"
            call = {"name": "submit", "arguments": {"answer": answer}}
        turn = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        ids = [*self.tokenizer.encode(turn, add_special_tokens=False),
               self.tokenizer.eos_token_id]
        return Generation(ids, [-0.1] * len(ids), "stop")


class Logs(TrainerCallback):
    """Keeps what the trainer logs."""

    def __init__(self):
        self.seen = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(dict(logs or {}))


def test_successful_needs_the_threshold_and_no_error():
    ok = Trajectory("e", "a", 0, reward=1.0)
    low = Trajectory("e", "b", 1, reward=0.5)
    crashed = Trajectory("e", "c", 2, reward=1.0, error="boom")
    assert successful([ok, low, crashed]) == [ok]
    assert successful([ok, low, crashed], threshold=0.5) == [ok, low]


def test_rft_trains_only_on_successful_attempts(tiny_model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    logs = Logs()
    trainer = train_rft(str(tiny_model_dir), "calculator", output_dir=tmp_path, tasks=4,
                        attempts=2, policy=PlusOnly(tokenizer), sft_args=SFT, callbacks=[logs])
    attempts = read_trajectories(tmp_path / ATTEMPTS_FILE)
    # The file keeps every attempt, failed ones included.
    assert len(attempts) == 8
    assert Counter(t.reward for t in attempts) == {1.0: 4, 0.0: 4}
    kept = [t.prompt_ids + t.completion_ids for t in attempts if t.reward == 1.0]
    failed = [t.prompt_ids + t.completion_ids for t in attempts if t.reward == 0.0]
    # The trainer's dataset is exactly the successful attempts' tokens.
    rows = [row["input_ids"] for row in trainer.train_dataset]
    assert sorted(rows) == sorted(kept)
    assert not any(ids in rows for ids in failed)
    for row in trainer.train_dataset:
        trajectory = next(t for t in attempts if t.prompt_ids + t.completion_ids
                          == row["input_ids"])
        model = [0] * len(trajectory.prompt_ids) + trajectory.loss_mask
        assert [label != -100 for label in row["labels"]] == [m == 1 for m in model]
    assert {"rft/attempts": 8, "rft/kept": 4, "rft/success_rate": 0.5}.items() <= (
        logs.seen[0].items())
    assert trainer.state.global_step == 1 and (tmp_path / "final" / "config.json").is_file()


def test_rft_attempts_tasks_from_first_task(tiny_model_dir, tmp_path, caplog):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    logs = Logs()
    # Cycling back before first_task reaches tasks an earlier stage may have used: a warning.
    train_rft(str(tiny_model_dir), "calculator", env_kwargs={"num_tasks": 6},
              output_dir=tmp_path, tasks=3, attempts=1, first_task=4,
              policy=PlusOnly(tokenizer), sft_args=SFT, callbacks=[logs])
    assert [r.levelname for r in caplog.records if "run past" in r.getMessage()] == ["WARNING"]
    assert ("3 tasks from task 4 run past the 6 tasks of 'calculator': tasks 0-0, before 4,"
            " are played too") in caplog.text
    attempts = read_trajectories(tmp_path / ATTEMPTS_FILE)
    assert [t.task_id for t in sorted(attempts, key=lambda t: t.episode)] == [
        "calculator-train-4", "calculator-train-5", "calculator-train-0"]  # cycling
    assert {"rft/tasks": 3, "rft/first_task": 4}.items() <= logs.seen[0].items()


def test_rft_without_a_success_says_how_to_get_one(tiny_model_dir, tmp_path):
    # The untrained tiny model (the default policy: HFPolicy over the model) writes gibberish.
    rollout = RolloutConfig(Sampling(max_tokens=8, temperature=1.0, seed=0))
    with pytest.raises(NoSuccessError, match=r"none of the 4 attempts.*sft stage.*attempts"
                                             r".*temperature"):
        train_rft(str(tiny_model_dir), "calculator", output_dir=tmp_path, tasks=2, attempts=2,
                  rollout=rollout, sft_args=SFT)
    assert len(read_trajectories(tmp_path / ATTEMPTS_FILE)) == 4
    assert not (tmp_path / "final").exists()


def test_collect_keeps_every_attempt_and_resumes(tmp_path):
    from agentgym.core import OraclePolicy

    out = tmp_path / "attempts.jsonl"
    first = asyncio.run(collect("calculator", OraclePolicy(), tasks=2, attempts=2, out=out))
    assert sorted(t.episode for t in first) == [0, 1, 2, 3]
    with pytest.raises(FileExistsError, match="--resume"):
        asyncio.run(collect("calculator", OraclePolicy(), tasks=3, attempts=2, out=out))
    played = []
    both = asyncio.run(collect("calculator", OraclePolicy(), tasks=3, attempts=2, out=out,
                               resume=True, on_done=played.append))
    assert sorted(t.episode for t in played) == [4, 5]  # only the missing attempts ran
    assert sorted(t.episode for t in both) == list(range(6))


def test_rft_can_fine_tune_another_model_on_earlier_trajectories_too(tiny_model_dir, tmp_path):
    """``train_from`` and ``also`` (an ``rft`` stage with ``restart``): the attempts are the
    policy's, the model fine-tuned is ``train_from``, on ``also`` and the kept attempts."""
    from transformers import AutoModelForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    attempting = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    earlier = [Trajectory("calculator", "calculator-train-9", 0, reward=1.0, messages=[
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "<tool_call>\n{\"name\": \"submit\", \"arguments\":"
                                         " {\"answer\": \"4\"}}\n</tool_call>"}])]
    logs = Logs()
    trainer = train_rft(attempting, "calculator", output_dir=tmp_path, tasks=4, attempts=1,
                        policy=PlusOnly(tokenizer), sft_args=SFT, callbacks=[logs],
                        train_from=str(tiny_model_dir), also=earlier)
    assert trainer.model is not attempting
    kept = [t for t in read_trajectories(tmp_path / ATTEMPTS_FILE) if t.reward == 1.0]
    rows = [row["input_ids"] for row in trainer.train_dataset]
    assert len(rows) == len(kept) + 1 == 3
    assert sorted(t.prompt_ids + t.completion_ids for t in kept) == sorted(
        r for r in rows if tokenizer.decode(r).count("What is 2 + 2?") == 0)
    assert {"rft/kept": 2, "rft/also": 1}.items() <= logs.seen[0].items()


def test_a_restarting_rft_stage_reads_what_the_earlier_stages_trained_on(tmp_path):
    from agentgym.rollout.trajectory import TrajectoryWriter
    from agentgym.trainers.config import parse_config
    from agentgym.trainers.run import _trained_on

    config = parse_config({
        "model": {"tiny": {"hidden_size": 32}}, "output_dir": str(tmp_path / "run"),
        "env": {"id": "calculator"},
        "stages": [{"sft": {"demonstrations": {"policy": "oracle", "episodes": 3}}},
                   {"rft": {"tasks": 3, "threshold": 0.5}},
                   {"rft": {"tasks": 3, "restart": True}}]})
    rows = {0: ("demonstrations.jsonl", [1.0, 0.0, 1.0]), 1: (ATTEMPTS_FILE, [0.5, 0.0, 1.0])}
    for index, (name, rewards) in rows.items():
        config.stage_dir(index).mkdir(parents=True)
        with TrajectoryWriter(config.stage_dir(index) / name) as writer:
            for episode, reward in enumerate(rewards):
                writer.write(Trajectory("calculator", f"t{index}", episode, reward=reward))
    trained = _trained_on(config, 2)
    # the demonstrations the sft stage kept (reward >= 1.0) and the attempts rft kept (>= 0.5)
    assert [(t.task_id, t.episode) for t in trained] == [("t0", 0), ("t0", 2), ("t1", 0),
                                                         ("t1", 2)]
    assert config.stages[2].restart and not config.stages[1].restart
