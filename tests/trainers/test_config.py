"""The `agentgym train` config: every problem is reported up front, under its dotted path,
with the fix (closest name, expected type, allowed values); valid configs load."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("trl")

from agentgym.trainers.config import (
    STAGE_KINDS,
    ConfigError,
    Demonstrations,
    EnvSection,
    EvalSection,
    GRPOStage,
    RFTStage,
    SFTStage,
    TinyModel,
    TrainConfig,
    load_config,
    parse_config,
    rollout_keys,
)

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples" / "configs").glob("*.yaml"))

BASE: dict[str, Any] = {
    "model": {"tiny": {"hidden_size": 32}},
    "output_dir": "runs/test",
    "env": {"id": "calculator", "kwargs": {"split": "train"}},
    "eval": {"kwargs": {"split": "test"}, "episodes": 4},
    "rollout": {"max_tokens": 32},
    "stages": [
        {"sft": {"demonstrations": {"policy": "oracle", "episodes": 8},
                 "args": {"max_steps": 2, "learning_rate": "1e-3"}}},
        {"grpo": {"args": {"max_steps": 2, "num_generations": 2},
                  "options": {"mask_finish_reasons": ["error"]}, "lora": {"r": 4}}},
    ],
}


def problems(**changes: Any) -> dict[str, str]:
    """The issues of BASE with top-level keys replaced (None deletes), by dotted path."""
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return dict(caught.value.issues)


def grpo(**body: Any) -> list[dict[str, Any]]:
    return [{"grpo": body}]


def test_a_valid_config_loads_with_types_converted():
    config = parse_config(copy.deepcopy(BASE))
    assert config.model == TinyModel(hidden_size=32)
    assert config.output_dir == Path("runs/test")
    assert config.eval == EvalSection(kwargs={"split": "test"}, episodes=4, temperature=0.0)
    assert config.rollout.episodes.sampling.max_tokens == 32
    assert config.rollout.pipeline.mode == "pipeline"
    assert config.rollout.rollout_config().tool_schemas  # schemas in prompts by default
    bare = parse_config({**copy.deepcopy(BASE), "rollout": {"tool_schemas": False}})
    assert bare.rollout.rollout_config().tool_schemas is False
    sft, grpo_stage = config.stages
    assert isinstance(sft, SFTStage) and sft.demonstrations == [Demonstrations(episodes=8)]
    assert sft.args == {"max_steps": 2, "learning_rate": 1e-3}  # YAML's "1e-3" text is a float
    assert isinstance(grpo_stage, GRPOStage)
    assert grpo_stage.options == {"mask_finish_reasons": ("error",)}  # a list became the tuple
    assert grpo_stage.lora == {"r": 4}
    assert [config.stage_dir(i).name for i in range(2)] == ["00-sft", "01-grpo"]
    assert config.to_dict()["stages"][1]["grpo"]["args"] == {"max_steps": 2,
                                                             "num_generations": 2}


def test_a_model_folder_or_hub_id_is_accepted(tiny_model_dir: Path):
    assert parse_config({**BASE, "model": str(tiny_model_dir)}).model == str(tiny_model_dir)
    hub = "Qwen/Qwen2.5-0.5B-Instruct"  # not fetched here: the trainer loads it
    assert parse_config({**BASE, "model": hub}).model == hub
    assert "folder not found" in problems(model="./no-such-model")["model"]
    found = problems(model={"tiny": {"hidden_size": 40}})
    assert "multiple of 16" in found["model.tiny.hidden_size"]
    assert "did you mean 'tiny'" in problems(model={"tin": {}})["model.tin"]
    assert "must be > 0, got 0" in problems(model={"tiny": {"init_std": 0}})["model.tiny.init_std"]
    assert parse_config({**BASE, "model": {"tiny": {"init_std": 0.06}}}).model.init_std == 0.06
    assert "must be >= 0" in problems(model={"tiny": {"copy_steps": -5}})["model.tiny.copy_steps"]
    assert parse_config({**BASE, "model": {"tiny": {"copy_steps": 9}}}).model.copy_steps == 9


def test_unknown_trl_arg_names_the_closest_field():
    found = problems(stages=grpo(args={"learning_rat": 1e-5}))
    assert "did you mean 'learning_rate'?" in found["stages[0].grpo.args.learning_rat"]
    assert "trl.GRPOConfig" in found["stages[0].grpo.args.learning_rat"]
    found = problems(stages=[{"rft": {"tasks": 4, "args": {"num_train_epoch": 1}}}])
    assert "'num_train_epochs'" in found["stages[0].rft.args.num_train_epoch"]


def test_wrong_types_name_the_expected_type():
    found = problems(seed="abc", stages=grpo(args={"num_generations": "four"}),
                     rollout={"concurrency": True, "temperature": [1]})
    assert found["seed"] == "expected an integer, got 'abc' (str)"
    assert "expected an integer or null, got 'four'" in found["stages[0].grpo.args.num_generations"]
    assert "expected an integer, got True (bool)" in found["rollout.concurrency"]
    assert "expected a number" in found["rollout.temperature"]


def test_bad_values_list_the_allowed_ones():
    found = problems(rollout={"mode": "pipe"}, report_to="wandbb",
                     stages=grpo(args={"lr_scheduler_type": "cosin", "save_strategy": "step"}))
    assert "did you mean 'pipeline'?" in found["rollout.mode"]
    assert "allowed: sync, async_batch, pipeline" in found["rollout.mode"]
    assert "allowed: none, wandb, tensorboard" in found["report_to"]
    assert "did you mean 'cosine'?" in found["stages[0].grpo.args.lr_scheduler_type"]
    assert "'steps'" in found["stages[0].grpo.args.save_strategy"]


def test_the_pipeline_settings_are_checked_and_reach_the_pipeline():
    found = problems(rollout={"overlap_setup": "of", "max_live_sandboxes": 0,
                              "setup_timeout_s": 0})
    assert "did you mean 'off'?" in found["rollout.overlap_setup"]
    assert found["rollout.max_live_sandboxes"] == "must be >= 1, got 0"
    assert found["rollout.setup_timeout_s"] == "must be > 0, got 0"
    pipeline = parse_config({**copy.deepcopy(BASE), "rollout": {
        "concurrency": 4, "max_live_sandboxes": 6, "grade_concurrency": 2,
        "overlap_setup": "off", "setup_timeout_s": 30.0}}).rollout.pipeline
    assert (pipeline.live_cap, pipeline.grade_concurrency, pipeline.overlap_setup,
            pipeline.setup_timeout_s) == (6, 2, "off", 30.0)


def test_numbers_out_of_range_are_refused():
    found = problems(eval={"episodes": 0}, rollout={"top_p": 1.5, "prefetch": -1})
    assert found == {"eval.episodes": "must be >= 1, got 0",
                     "rollout.top_p": "must be <= 1, got 1.5",
                     "rollout.prefetch": "must be >= 0, got -1"}


def test_unknown_and_missing_fields():
    found = problems(eval={"temprature": 0}, output_dir=None)
    assert "did you mean 'temperature'?" in found["eval.temprature"]
    assert found["output_dir"] == "missing (required): expected a path"
    assert "did you mean 'seed'" in problems(sed=1)["sed"]


def test_unknown_env_id_lists_the_close_ones():
    found = problems(env={"id": "calculater"})
    assert "Did you mean 'calculator'?" in found["env.id"]
    assert "agentgym list envs" in found["env.id"]


def test_env_kwargs_are_arguments_of_the_env():
    found = problems(env={"id": "calculator", "kwargs": {"splt": "train"}})
    assert "did you mean 'split'?" in found["env.kwargs.splt"]
    found = problems(eval={"kwargs": {"num_task": 3}})
    assert "did you mean 'num_tasks'?" in found["eval.kwargs.num_task"]


def test_env_kwargs_have_the_env_signature_types():
    # The same check as `-e KEY=VALUE` (agentgym.core.env_kwargs): they cannot drift.
    found = problems(env={"id": "calculator", "kwargs": {"max_turns": "abc", "split": "valid"}})
    assert found["env.kwargs.max_turns"] == "expected an integer, got 'abc' (str)"
    assert "'valid' is not allowed (allowed: train, test)" in found["env.kwargs.split"]
    config = parse_config({**copy.deepcopy(BASE), "env": {"id": "calculator",
                                                           "kwargs": {"tasks": None}}})
    assert config.env.kwargs == {"tasks": None}


def test_stage_kinds_and_shapes():
    found = problems(stages=[{"gpro": {}}, {"sft": {}, "grpo": {}}, "grpo"])
    assert "did you mean 'grpo'?" in found["stages[0]"]
    assert "one of: sft, rft, grpo" in found["stages[0]"]
    assert "one key" in found["stages[1]"] and "one key" in found["stages[2]"]
    assert "non-empty list" in problems(stages=[])["stages"]
    found = problems(stages=[{"rft": {"attempts": 2}}])
    assert found["stages[0].rft.tasks"] == "missing (required): expected an integer"
    rft = parse_config({**BASE, "stages": [{"rft": {"tasks": 8}}]}).stages[0]
    assert rft == RFTStage(tasks=8, attempts=4, first_task=None, threshold=1.0, args={})
    found = problems(stages=[{"rft": {"tasks": 8, "first_task": -1}}])
    assert found["stages[0].rft.first_task"] == "must be >= 0, got -1"


def test_every_stage_kind_may_skip_its_eval():
    stages = parse_config({**BASE, "stages": [
        {"sft": {"demonstrations": {"policy": "oracle", "episodes": 8}, "eval": False}},
        {"rft": {"tasks": 8, "eval": False}}, {"grpo": {}}]}).stages
    assert [stage.eval for stage in stages] == [False, False, True]
    found = problems(stages=[{"rft": {"tasks": 8, "eval": "sometimes"}}])
    assert "expected" in found["stages[0].rft.eval"], found


def test_rft_starts_after_the_tasks_the_run_has_used():
    mixture = [{"policy": "oracle", "episodes": 3}, {"policy": "wrong", "episodes": 5}]
    config = parse_config({**BASE, "stages": [
        {"rft": {"tasks": 4}}, {"sft": {"demonstrations": mixture}}, {"rft": {"tasks": 4}},
        {"rft": {"tasks": 2, "first_task": 20}}, {"rft": {"tasks": 1}},
        {"sft": {"demonstrations": {"policy": "oracle", "episodes": 2}}}, {"rft": {"tasks": 1}}]})
    # From task 0 with nothing before it; after the mixture's 5 (each policy plays from task
    # 0); after the earlier rft's tasks 5-8; as given; after that one's 20-21.
    assert [config.first_task(i) for i in (0, 2, 3, 4, 6)] == [0, 5, 20, 22, 23]


def test_grpo_draws_from_every_task_unless_given_tasks():
    demos = {"sft": {"demonstrations": {"policy": "oracle", "episodes": 6}}}
    config = parse_config({**BASE, "stages": [
        demos, {"grpo": {}}, {"grpo": {"tasks": 4}}, {"grpo": {"first_task": 3}},
        {"rft": {"tasks": 2}}, {"grpo": {"tasks": 2, "first_task": 30}}, {"grpo": {"tasks": 1}}]})
    assert config.stages[1] == GRPOStage()
    # Every task; after the demonstrations' 6; as given (and an open range counts for
    # nothing after it); after the grpo stage's tasks 6-9; as given; after that one's 30-31.
    assert [config.first_task(i) for i in range(1, 7)] == [0, 6, 3, 10, 30, 32]
    found = problems(stages=[{"grpo": {"tasks": 0, "first_task": -1}}])
    assert found["stages[0].grpo.tasks"] == "must be >= 1, got 0"
    assert found["stages[0].grpo.first_task"] == "must be >= 0, got -1"


def test_sft_takes_exactly_one_source(tmp_path: Path):
    assert "exactly one of" in problems(stages=[{"sft": {}}])["stages[0].sft"]
    missing = tmp_path / "demos.jsonl"
    found = problems(stages=[{"sft": {"trajectories": str(missing)}}])
    assert "file not found" in found["stages[0].sft.trajectories"]
    assert "agentgym rollout" in found["stages[0].sft.trajectories"]
    missing.write_text("")
    assert parse_config({**BASE, "stages": [{"sft": {"trajectories": str(missing)}}]})


def test_demonstrations_may_be_a_mixture_of_policies():
    mixture = [{"policy": "oracle", "episodes": 3},
               {"policy": "wrong", "episodes": 5, "threshold": None,
                "kwargs": {"num_tasks": 50}}]
    sft = parse_config({**BASE, "stages": [{"sft": {"demonstrations": mixture}}]}).stages[0]
    assert sft.demonstrations == [Demonstrations(episodes=3),
                                  Demonstrations("wrong", 5, {"num_tasks": 50}, None)]
    assert SFTStage(demonstrations=Demonstrations()).demonstrations == [Demonstrations()]
    bad = [{"policy": "oracle"}, {"policy": "wrng", "kwargs": {"num_task": 1}}]
    found = problems(stages=[{"sft": {"demonstrations": bad}}])
    assert "Did you mean 'wrong'?" in found["stages[0].sft.demonstrations[1].policy"]
    found = problems(stages=[{"sft": {"demonstrations": [{"policy": "wrong"}] * 2 + [
        {"policy": "oracle", "kwargs": {"num_task": 1}}]}}])
    assert "num_tasks" in found["stages[0].sft.demonstrations[2].kwargs.num_task"]
    assert "non-empty list" in problems(stages=[{"sft": {"demonstrations": []}}])[
        "stages[0].sft.demonstrations"]


def test_demonstration_policy_must_exist():
    found = problems(stages=[{"sft": {"demonstrations": {"policy": "orcle"}}}])
    assert "Did you mean 'oracle'?" in found["stages[0].sft.demonstrations.policy"]
    found = problems(stages=[{"sft": {"demonstrations": {"policy": "opneai:http://h:80/v1"}}}])
    assert "Unknown policy 'opneai'. Did you mean 'openai'?" in found[
        "stages[0].sft.demonstrations.policy"]


def test_a_demonstration_policy_is_checked_by_its_id_and_not_built():
    # The check looks the id up only: a server that is not running is no config problem.
    stages = [{"sft": {"demonstrations": {"policy": "openai:http://127.0.0.1:9/v1"}}}]
    assert parse_config({**BASE, "stages": stages})


def test_grpo_options_and_lora_are_checked():
    found = problems(stages=grpo(options={"dynamic_sampleing": True,
                                          "mask_finish_reasons": "error"},
                                 lora={"lora_alph": 16}))
    assert "did you mean 'dynamic_sampling'?" in found["stages[0].grpo.options.dynamic_sampleing"]
    assert "expected a list" in found["stages[0].grpo.options.mask_finish_reasons"]
    assert "did you mean 'lora_alpha'?" in found["stages[0].grpo.lora.lora_alph"]


def test_stage_args_cannot_set_the_output_dir():
    found = problems(stages=grpo(args={"output_dir": "elsewhere"}))
    assert "top-level output_dir" in found["stages[0].grpo.args.output_dir"]


def test_every_problem_is_reported_at_once_in_file_order(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {tiny: {}}\noutput_dir: out\nseed: x\n"
                    "env: {id: calculator}\nrollout: {mode: pipe}\n"
                    "stages:\n  - grpo: {args: {learning_rat: 1.0e-5}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 3 problems\n")
    assert [p for p, _ in caught.value.issues] == ["seed", "rollout.mode",
                                                   "stages[0].grpo.args.learning_rat"]


def test_yaml_errors_and_empty_files(tmp_path: Path):
    path = tmp_path / "broken.yaml"
    path.write_text("model: [tiny\n")
    with pytest.raises(ConfigError, match="not valid YAML: line 2"):
        load_config(path)
    path.write_text("")
    with pytest.raises(ConfigError, match="expected a mapping with fields model, output_dir"):
        load_config(path)


def test_output_dir_override(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {tiny: {}}\noutput_dir: a\nenv: {id: calculator}\n"
                    "stages: [{grpo: {}}]\n")
    assert load_config(path, output_dir=tmp_path / "b").output_dir == tmp_path / "b"


def test_seed_override_is_the_runs_and_leaves_the_tiny_models(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {tiny: {seed: 5}}\noutput_dir: a\nseed: 1\nenv: {id: calculator}\n"
                    "stages: [{grpo: {}}]\n")
    assert load_config(path).seed == 1
    config = load_config(path, seed=2)
    assert config.seed == 2 and config.model.seed == 5
    with pytest.raises(ConfigError, match="seed"):
        load_config(path, seed="two")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_configs_validate(path: Path):
    config = load_config(path)
    assert config.stages and config.eval is not None


def test_there_are_cpu_and_gpu_examples():
    assert {"calculator-cpu.yaml", "calculator-gpu.yaml"} <= {p.name for p in EXAMPLES}


def test_runtime_check_builds_each_stages_trl_config_before_any_model():
    from agentgym.trainers.run import check_runtime

    data = {**copy.deepcopy(BASE), "rollout": {"temperature": 0.7}}
    data["stages"] = [{"sft": {"demonstrations": {}, "args": {"max_steps": 1}}},
                      {"grpo": {"args": {"per_device_train_batch_size": 3,
                                         "num_generations": 2}}},
                      {"grpo": {"args": {"temperature": 1.0}}},
                      {"grpo": {"options": {"log_rollouts": -1}}}]
    with pytest.raises(ConfigError) as caught:
        check_runtime(parse_config(data))
    found = dict(caught.value.issues)
    assert set(found) == {"stages[1].grpo.args", "stages[2].grpo.args",
                          "stages[3].grpo.options"}
    assert "divisible by num_generations" in found["stages[1].grpo.args"]
    assert "temperature" in found["stages[2].grpo.args"]
    assert found["stages[3].grpo.options"] == (
        "log_rollouts must be >= 0 groups per rollout call (0: keep none), got -1")


def test_an_output_dir_holding_a_run_is_refused_without_resume(tmp_path: Path):
    from agentgym.trainers.run import RunExistsError, train

    (tmp_path / "run.json").write_text("{}")
    config = parse_config({**copy.deepcopy(BASE), "output_dir": str(tmp_path)})
    with pytest.raises(RunExistsError, match="pass --resume to continue it"):
        train(config)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # nothing was touched
    data = config.to_dict()
    data["stages"] = data["stages"][1:]
    (tmp_path / "run.json").write_text(json.dumps({"config": data}))
    with pytest.raises(RunExistsError, match=r"its stages were \['grpo'\]"):
        train(config, resume=True)
    # The same stages with another seed (a run started with --seed, resumed without it).
    (tmp_path / "run.json").write_text(json.dumps({"config": {**config.to_dict(), "seed": 3}}))
    with pytest.raises(RunExistsError, match=r"it ran with seed 3, and would go on with seed"
                       r" 0; pass --seed 3"):
        train(config, resume=True)


def test_the_command_refuses_a_reused_output_dir_before_loading_the_trainers(tmp_path: Path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({**BASE, "output_dir": str(tmp_path / "run")}))
    # In a fresh interpreter: whether the trainers were imported shows in sys.modules.
    script = ("import sys\nfrom agentgym.cli import main\ntry:\n"
              f"    main(['train', {str(config)!r}])\n"
              "except SystemExit as e:\n"
              "    print(e.code, 'agentgym.trainers.run' in sys.modules, 'trl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.stdout.split() == ["2", "False", "False"], out.stderr
    assert "already holds a run (run.json); pass --resume to continue it" in out.stderr


def test_every_config_field_is_documented():
    doc = (ROOT / "docs" / "training.md").read_text()
    classes = [TrainConfig, TinyModel, EnvSection, EvalSection, Demonstrations,
               *STAGE_KINDS.values()]
    missing = [f"{cls.__name__}.{f.name}" for cls in classes for f in dataclasses.fields(cls)
               if not re.search(rf"`{f.name}`", doc)]
    assert not missing, f"docs/training.md lacks: {missing}"
    # The rollout section's keys come from the rollout's dataclasses: each has its row.
    table = doc.split("### `rollout`", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(\w+)`", table, flags=re.M)
    assert sorted(rows) == sorted(rollout_keys()), "docs/training.md's rollout table"


# ---- the rollout section: the rollout's own dataclasses, written once ------------------------


def test_the_rollout_section_is_the_rollout_dataclasses_fields():
    """A field added to Sampling, RolloutConfig or PipelineConfig is a key of the section
    (loaded into that dataclass, under its bounds) without another edit; one the section
    leaves out says why."""
    from agentgym.core.policies import Sampling
    from agentgym.rollout.loop import RolloutConfig
    from agentgym.rollout.pipeline import PipelineConfig
    from agentgym.trainers.config import NOT_ROLLOUT_KEYS

    fields = {f.name for cls in (Sampling, RolloutConfig, PipelineConfig)
              for f in dataclasses.fields(cls)}
    assert set(rollout_keys()) == fields - set(NOT_ROLLOUT_KEYS)
    assert set(NOT_ROLLOUT_KEYS) <= fields  # no reason kept for a field that is gone
    # Each key reaches its dataclass, and the defaults are the dataclasses' own.
    section = parse_config(copy.deepcopy(BASE)).rollout
    assert section.to_dict() == {**{key: f.default for key, (_, f) in rollout_keys().items()},
                                 "max_tokens": 32}
    assert section.rollout_config(seed=7).seed == 7
    assert "seed" in problems(rollout={"seed": 1})["rollout.seed"]


def _below(bounds: dict[str, float]) -> float | None:
    if "min" in bounds:
        return bounds["min"] - 1
    if "gt" in bounds:
        return bounds["gt"]
    return None


BOUNDED_KEYS = sorted(key for key, (_, f) in rollout_keys().items()
                      if {"min", "gt", "max"} & set(f.metadata))


@pytest.mark.parametrize("key", BOUNDED_KEYS)
def test_every_rollout_bound_is_checked_under_its_key(key: str):
    """The config refuses what the dataclass refuses, naming the key, the value and the
    bound, with every other problem of the file (not one exception at a time)."""
    cls, f = rollout_keys()[key]
    bounds = {k: v for k, v in f.metadata.items() if k in ("min", "gt", "max")}
    bad = _below(bounds)
    bad = bounds["max"] + 1 if bad is None else bad
    found = problems(rollout={key: bad}, seed="x")
    assert found["rollout." + key].startswith("must be "), found
    assert f"got {bad}" in found["rollout." + key] and "seed" in found
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.{key} must be "):
        cls(**{key: bad})


def test_a_shadowing_field_is_refused(monkeypatch: pytest.MonkeyPatch):
    """Two rollout dataclasses may not share a key (the flat section could not tell them
    apart)."""
    from agentgym.trainers import config as module

    @dataclasses.dataclass
    class Shadow:
        concurrency: int = 1

    monkeypatch.setattr(module, "ROLLOUT_PARTS", (*module.ROLLOUT_PARTS, Shadow))
    with pytest.raises(TypeError, match=r"Shadow\.concurrency is also a field of PipelineConfig"):
        rollout_keys()


def test_cli_reports_config_errors_without_a_traceback(agentgym_cli: str, tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {tiny: {}}\noutput_dir: out\nenv: {id: calculater}\n"
                    "stages: [{gpro: {}}]\n")
    result = subprocess.run([agentgym_cli, "train", str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert "env.id: Unknown env 'calculater'" in result.stderr
    assert "stages[0]: unknown stage kind 'gpro'; did you mean 'grpo'?" in result.stderr


@pytest.mark.parametrize("path", sorted(
    (Path(__file__).parents[2] / "examples" / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_config_is_valid(path):
    """The shipped configs pass the same checks (env kwargs typed too) as a user's."""
    config = parse_config(yaml.safe_load(path.read_text()), source=str(path))
    assert config.env.id
