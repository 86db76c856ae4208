"""`agentgym train` end to end on CPU: SFT on oracle demonstrations then GRPO, with eval
before and after, metrics.jsonl, reward_curve.png and eval.json; --resume skips the
finished stage and continues the interrupted one from its checkpoint; SIGTERM leaves
complete files."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

CONFIG = """\
model: {tiny: {copy_steps: 3}}
output_dir: OUT
seed: 0
env: {id: calculator, kwargs: {num_tasks: 16}}
eval: {kwargs: {split: test}, episodes: 4}
rollout: {max_tokens: 24, max_total_tokens: 384, concurrency: 8}
stages:
  - sft:
      demonstrations: {policy: oracle, episodes: 8}
      args: {max_steps: 2, per_device_train_batch_size: 4, learning_rate: 1.0e-3,
             logging_steps: 1, save_steps: 1}
  - grpo:
      args: {max_steps: 2, per_device_train_batch_size: 4, num_generations: 2,
             logging_steps: 1, save_steps: 1}
"""


def train(cli: str, config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, "train", str(config), *args], capture_output=True, text=True,
                          timeout=400, cwd=config.parent)


def metrics(run: Path) -> list[dict[str, Any]]:
    text = (run / "metrics.jsonl").read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def steps(records: list[dict[str, Any]], stage: str, key: str = "loss") -> list[int]:
    return [r["step"] for r in records if r["stage"] == stage and key in r]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory, agentgym_cli: str) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("train")
    config = folder / "config.yaml"
    config.write_text(CONFIG.replace("OUT", str(folder / "run")))
    result = train(agentgym_cli, config, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    return {"config": config, "run": folder / "run", "result": result,
            "summary": json.loads(result.stdout)}


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_train_runs_the_stages_and_evaluates_after_each(first_run: dict[str, Any]):
    run, summary = first_run["run"], first_run["summary"]
    assert [(s["kind"], s["skipped"]) for s in summary["stages"]] == [("sft", False),
                                                                      ("grpo", False)]
    assert summary["base_model"] == str(run / "base-model")
    assert summary["final_model"] == str(run / "01-grpo" / "final")
    assert (run / "01-grpo" / "final" / "model.safetensors").is_file()
    for stage in ("00-sft", "01-grpo"):
        assert (run / stage / "stage.json").is_file()

    demonstrations = (run / "00-sft" / "demonstrations.jsonl").read_text().splitlines()
    assert len(demonstrations) == 8
    assert all(json.loads(line)["reward"] == 1.0 for line in demonstrations)
    # SFT cuts rows at the rollout's max_total_tokens, not TRL's 1,024
    import torch

    sft_args = torch.load(run / "00-sft" / "checkpoint-2" / "training_args.bin",
                          weights_only=False)
    assert sft_args.max_length == 384

    records = metrics(run)
    assert all({"stage", "kind", "step"} <= set(r) for r in records)
    assert steps(records, "00-sft") == [1, 2]
    assert steps(records, "01-grpo") == [1, 2]
    grpo = [r for r in records if r["stage"] == "01-grpo" and "loss" in r]
    assert all(r["kind"] == "grpo" for r in grpo)
    assert all("env/pass_rate" in r and "time/rollout_s" in r for r in grpo)

    assert (run / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    evals = json.loads((run / "eval.json").read_text())
    assert evals["before"]["model"] == str(run / "base-model")
    assert evals["after"]["model"] == summary["final_model"]
    assert evals["before"]["n"] == evals["after"]["n"] == 4
    assert evals["change"] == evals["after"]["pass_rate"] - evals["before"]["pass_rate"]
    assert summary["pass_rate_before"] == evals["before"]["pass_rate"]
    assert summary["pass_rate_after"] == evals["after"]["pass_rate"]
    # One entry per stage, base first, each of the model that stage left.
    assert [(e["stage"], e["kind"]) for e in evals["stages"]] == [
        ("base", "base"), ("00-sft", "sft"), ("01-grpo", "grpo")]
    assert [e["model"] for e in evals["stages"]] == [
        str(run / "base-model"), str(run / "00-sft" / "final"), summary["final_model"]]
    assert evals["stages"][0] == evals["before"] and evals["stages"][-1] == evals["after"]
    assert [s["pass_rate"] for s in summary["stages"]] == [
        e["pass_rate"] for e in evals["stages"][1:]]
    assert "held-out eval by stage" in first_run["result"].stderr
    assert "00-sft" in first_run["result"].stderr.split("held-out eval by stage")[-1]


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_the_console_shows_one_line_per_step_and_no_dict_of_logs(first_run: dict[str, Any]):
    stderr = first_run["result"].stderr
    lines = stderr.splitlines()
    for kind in ("sft", "grpo"):
        steps = [line for line in lines if line.startswith(f"{kind} step ")]
        assert [line.split()[2] for line in steps] == ["1/2", "2/2"], stderr[-3000:]
        assert all(line.endswith(" s/step") for line in steps)
        assert any(line.startswith(f"{kind} done: 2 steps in ") for line in lines)
    assert all("pass " in line and "groups with variance " in line
               for line in lines if line.startswith("grpo step "))
    assert "{'" not in stderr and "Warning" not in stderr  # no dict dumps, no deprecations
    assert any(line.startswith("copy pretraining: 3 steps in ") for line in lines), stderr[-3000:]


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_the_run_keeps_eval_episodes_and_rollouts_that_view_and_compare_read(
        first_run: dict[str, Any], tmp_path: Path):
    from click.testing import CliRunner

    from agentgym.cli import main
    from agentgym.viewer.index import EpisodeIndex, trajectory_files

    run = first_run["run"]
    evals = json.loads((run / "eval.json").read_text())
    for entry in evals["stages"]:
        folder = run / "eval" / entry["stage"]
        episodes = [json.loads(line) for line in (folder / "trajectories.jsonl").open()]
        assert len(episodes) == 4 and entry["trajectories"] == str(folder / "trajectories.jsonl")
        assert {e["policy"] for e in episodes} == {f"hf:{entry['model']}"}
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["pass_rate"] == entry["pass_rate"] and (folder / "report.html").is_file()
    # One group (of num_generations=2) per rollout call, one call per step.
    rollouts = [json.loads(line) for line in (run / "01-grpo" / "rollouts.jsonl").open()]
    assert [r["episode"] // 1_000_000 for r in rollouts] == [0, 0, 1, 1]
    assert all(r["task_id"] == g[0]["task_id"] for g in (rollouts[:2], rollouts[2:]) for r in g)
    assert all(r["completion_ids"] and r["loss_mask"] for r in rollouts)

    # agentgym view's loader: demonstrations, training rollouts and every evaluation.
    index = EpisodeIndex(trajectory_files(run))
    names = {str(f.relative_to(run)) for f in index.files}
    assert names == {"00-sft/demonstrations.jsonl", "01-grpo/rollouts.jsonl",
                     "eval/base/trajectories.jsonl", "eval/00-sft/trajectories.jsonl",
                     "eval/01-grpo/trajectories.jsonl"}
    assert len(index.rows) == 8 + 4 + 3 * 4 and index.bad_lines == 0

    # agentgym compare: the run before and after training, by stage.
    done = CliRunner().invoke(main, ["compare", f"{run}:base", str(run), "--json",
                                     "--out", str(tmp_path / "compare.html")])
    assert done.exit_code == 0, done.output
    comparison = json.loads(done.stdout)
    assert comparison["b"]["name"] == f"{run}:01-grpo" and comparison["warning"] is None
    assert comparison["shared_tasks"] == len({e["task_id"] for e in episodes})


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_saved_models_carry_agentgyms_model_card(first_run: dict[str, Any]):
    run = first_run["run"]
    for stage, base in (("00-sft", run / "base-model"), ("01-grpo", run / "00-sft" / "final")):
        for card in (run / stage / "README.md", run / stage / "final" / "README.md"):
            text = card.read_text()
            assert "[None]" not in text, card
            assert f"Trained from the local model `{base}`" in text, card
            assert f'from_pretrained("{run / stage / "final"}")' in text


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_resume_skips_the_finished_stage_and_continues_from_the_checkpoint(
        first_run: dict[str, Any], agentgym_cli: str, tmp_path: Path):
    # The state an interruption during GRPO's second step leaves: checkpoint-1, no final.
    run = tmp_path / "run"
    shutil.copytree(first_run["run"], run)
    grpo = run / "01-grpo"
    for name in ("final", "checkpoint-2"):
        shutil.rmtree(grpo / name)
    (grpo / "stage.json").unlink()
    sft_state = (run / "00-sft" / "stage.json").read_text()
    before = metrics(run)

    result = train(agentgym_cli, first_run["config"], "--output-dir", str(run), "--resume",
                   "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert [(s["kind"], s["skipped"]) for s in summary["stages"]] == [("sft", True),
                                                                      ("grpo", False)]
    assert (run / "00-sft" / "stage.json").read_text() == sft_state
    assert (grpo / "final" / "model.safetensors").is_file()

    after = metrics(run)
    # Step 1's line is the one logged before the interruption (training went on from
    # checkpoint-1, not from scratch); step 2, logged after the checkpoint, came again once.
    assert steps(after, "01-grpo") == [1, 2]
    first = [r for r in before if r["stage"] == "01-grpo" and r["step"] == 1]
    assert [r for r in after if r["stage"] == "01-grpo" and r["step"] == 1] == first
    assert [r for r in after if r["stage"] == "00-sft"] == [r for r in before
                                                           if r["stage"] == "00-sft"]

    evals = json.loads((run / "eval.json").read_text())
    original = json.loads((first_run["run"] / "eval.json").read_text())
    assert evals["before"] == original["before"]  # kept, not evaluated again
    assert evals["stages"][1] == original["stages"][1]  # the finished SFT stage's, kept
    assert evals["after"]["model"] == str(grpo / "final")  # the resumed stage's, new
    assert len(evals["stages"]) == 3
    # The rollouts of the step played again are not kept twice.
    assert len((grpo / "rollouts.jsonl").read_text().splitlines()) == 4


@pytest.mark.slow  # a run of its own (~15 s)
def test_seed_replaces_the_runs_seed_and_keeps_the_models(first_run: dict[str, Any],
                                                           agentgym_cli: str, tmp_path: Path):
    run = tmp_path / "seed7"
    result = train(agentgym_cli, first_run["config"], "--output-dir", str(run), "--seed", "7")
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((run / "run.json").read_text())["config"]
    assert config["seed"] == 7 and config["model"]["seed"] == 0
    # The same base model as the first run (its weights keep model.tiny.seed), other
    # demonstrations' order and sampling: the GRPO rollouts differ.
    base = (run / "base-model" / "model.safetensors").read_bytes()
    assert base == (first_run["run"] / "base-model" / "model.safetensors").read_bytes()

    def sampled(folder: Path) -> list[list[int]]:
        lines = (folder / "01-grpo" / "rollouts.jsonl").read_text().splitlines()
        return [json.loads(line)["completion_ids"] for line in lines]

    assert sampled(run) != sampled(first_run["run"])


@pytest.mark.slow  # each reads the one end-to-end run of the module (~15 s)
def test_an_interrupted_run_leaves_complete_files(first_run: dict[str, Any], agentgym_cli: str,
                                                  tmp_path: Path):
    config = tmp_path / "config.yaml"
    long_sft = (CONFIG.replace("OUT", str(tmp_path / "run"))
                .replace("max_steps: 2,", "max_steps: 500,")
                .replace("{tiny: {copy_steps: 3}}", str(first_run["run"] / "base-model"))
                .replace("eval: {kwargs: {split: test}, episodes: 4}\n", ""))
    config.write_text(long_sft)
    log = tmp_path / "run" / "metrics.jsonl"
    process = subprocess.Popen([agentgym_cli, "train", str(config)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text()) and process.poll() is None:
            assert time.monotonic() < deadline, "no SFT step was logged"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "--resume" in stdout and "Traceback" not in stderr
    assert metrics(tmp_path / "run")[0]["stage"] == "00-sft"  # complete lines only
    assert (tmp_path / "run" / "reward_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "run" / "00-sft" / "stage.json").exists()


RECORDED_ORACLE = """
from agentgym import hookimpl
from agentgym.core.policies import OraclePolicy
from agentgym.core.registry import Spec

BUILT = []

def recorded(argument):
    BUILT.append(argument)
    return OraclePolicy()

@hookimpl
def agentgym_policies():
    return [Spec("recorded", recorded, "The oracle, remembering its argument.")]
"""


def test_demonstrations_come_from_a_policy_named_with_an_argument(fake_plugin, tmp_path: Path,
                                                                  tiny_model_dir: Path):
    """The run builds demonstration policies as the CLI does (``ID:ARG``, colons kept)."""
    import io
    import sys

    from rich.console import Console

    from agentgym.rollout.trajectory import read_trajectories
    from agentgym.trainers.config import parse_config
    from agentgym.trainers.run import train as train_run

    fake_plugin("recorded", RECORDED_ORACLE)
    config = parse_config({
        "model": str(tiny_model_dir), "output_dir": str(tmp_path / "run"),
        "env": {"id": "calculator", "kwargs": {"num_tasks": 4}},
        "rollout": {"max_tokens": 24, "max_total_tokens": 384},
        "stages": [{"sft": {"demonstrations": {"policy": "recorded:http://h:1/v1",
                                               "episodes": 4},
                            "args": {"max_steps": 1, "per_device_train_batch_size": 4}}}],
    })
    summary = train_run(config, console=Console(file=io.StringIO()))
    assert sys.modules["recorded_plugin"].BUILT == ["http://h:1/v1"]
    demos = read_trajectories(tmp_path / "run" / "00-sft" / "demonstrations.jsonl")
    assert [t.reward for t in demos] == [1.0] * 4
    assert {t.policy for t in demos} == {"recorded:http://h:1/v1"}
    assert summary["stages"][0]["skipped"] is False


WINDOWED = """\
model: {tiny: {}}
output_dir: OUT
seed: 0
env: {id: memory-sessions-small}
eval: {kwargs: {seed: 1}, episodes: 2}
rollout: {max_tokens: 64, max_total_tokens: 512, concurrency: 8, tool_schemas: false}
stages:
  - sft:
      demonstrations: {policy: oracle, episodes: 4}
      args: {max_steps: 2, per_device_train_batch_size: 8, learning_rate: 1.0e-3,
             logging_steps: 1, save_steps: 10}
  - grpo:
      args: {max_steps: 2, per_device_train_batch_size: 4, num_generations: 2,
             logging_steps: 1, save_steps: 10}
      # An untrained model's episodes run out of turns, in flat groups: kept in the loss
      # (not masked), their rows still go in, each credited against its state's episodes.
      options: {dynamic_sampling: false, mask_finish_reasons: [], turn_credit: true}
"""


@pytest.mark.slow  # ~30 s: two short stages on the memory env
def test_an_env_that_moves_the_context_window_trains_every_window(tmp_path: Path,
                                                                 agentgym_cli: str):
    """memory-sessions-small shows the agent only its latest replies: its demonstrations
    become one SFT row per turn, and GRPO adds each episode's earlier windows as rows."""
    from agentgym.rollout.trajectory import read_trajectories

    config = tmp_path / "config.yaml"
    config.write_text(WINDOWED.replace("OUT", str(tmp_path / "run")))
    result = train(agentgym_cli, config)
    assert result.returncode == 0, result.stderr[-3000:]
    records = metrics(tmp_path / "run")
    grpo = [r for r in records if r["stage"] == "01-grpo" and "loss" in r]
    assert len(grpo) == 2 and all(r["rollout/extra_rows"] > 0 for r in grpo)
    [demo] = read_trajectories(tmp_path / "run" / "00-sft" / "demonstrations.jsonl")[:1]
    assert demo.reward == 1.0 and demo.context_replies_only
    assert len(demo.windows) == demo.turns == 5 and len(set(demo.windows)) == 4  # search, answer
    for episode in read_trajectories(tmp_path / "run" / "01-grpo" / "rollouts.jsonl"):
        assert len(episode.samples()) == episode.turns > 1  # each turn's window is new


@pytest.mark.slow  # a run of two short SFT stages (~15 s)
def test_a_stage_set_eval_false_is_not_evaluated(tmp_path: Path, agentgym_cli: str):
    config = tmp_path / "config.yaml"
    sft = ("  - sft:\n      demonstrations: {policy: oracle, episodes: 4}\n"
           "      args: {max_steps: 1, per_device_train_batch_size: 4, save_steps: 1}\n")
    config.write_text(CONFIG.split("stages:")[0].replace("OUT", str(tmp_path / "run"))
                      + "stages:\n" + sft + "      eval: false\n" + sft)
    result = train(agentgym_cli, config, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    evals = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert [e["stage"] for e in evals["stages"]] == ["base", "01-sft"]
    assert "pass_rate" not in summary["stages"][0] and "pass_rate" in summary["stages"][1]
    assert summary["pass_rate_after"] == evals["after"]["pass_rate"]
    assert "eval 00-sft" not in result.stderr and "eval 01-sft" in result.stderr
