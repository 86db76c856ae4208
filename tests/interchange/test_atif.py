"""ATIF out and back (agentgym.interchange.atif): real episodes (the oracle's, a scripted
token-level policy's, through a moving context window, the tiny model's) become documents
the atif package's models accept and come back as the very records they were; `agentgym
export`, `eval --format atif` and `rollout --format atif` write them; `agentgym view`'s
index reads them as it reads agentgym's own files."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

atif = pytest.importorskip(
    "atif", reason="the atif package is not installed (pip install -e '.[atif]')")

from agentgym.cli import main  # noqa: E402
from agentgym.core.errors import InvalidArgumentError  # noqa: E402
from agentgym.core.policies import OraclePolicy  # noqa: E402
from agentgym.interchange.atif import (  # noqa: E402
    AtifWriter,
    from_atif,
    read_atif,
    to_atif,
    validate,
)
from agentgym.rollout.evaluate import evaluate, rollout  # noqa: E402
from agentgym.rollout.loop import RolloutConfig  # noqa: E402
from agentgym.rollout.trajectory import Trajectory, read_trajectories  # noqa: E402
from agentgym.viewer.index import EpisodeIndex  # noqa: E402
from agentgym.viewer.server import open_index  # noqa: E402

MEMORY = {"sessions": 6, "questions": ["single", "update"], "context_budget": 256}


def round_trip(trajectory: Trajectory) -> tuple[dict, Trajectory]:
    """The episode's document as the atif models write it, and what it reads back as."""
    document = atif.Trajectory.model_validate(to_atif(trajectory)).to_json_dict()
    return document, from_atif(json.loads(json.dumps(document)))


def oracle_episodes(n: int = 3, env_id: str = "calculator", **env_kwargs) -> list[Trajectory]:
    report = asyncio.run(evaluate(env_id, OraclePolicy(), n, policy_name="oracle",
                                  env_kwargs=env_kwargs))
    return report.trajectories


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    pytest.importorskip("transformers", reason="the tiny model needs the train extra")
    from agentgym.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=32,
                            num_layers=1)


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir)


def scripted_replay(tokenizer, env_id: str, **env_kwargs) -> Trajectory:
    """The oracle's episode played again token by token (each turn's text as the chat
    template writes it, with logprobs and a weights version), as a model would."""
    from agentgym.rollout.chat import ChatTokens, _assistant_text, with_decoded_arguments
    from agentgym.testing import ScriptedTokens

    [demonstration] = oracle_episodes(1, env_id, **env_kwargs)
    chat = ChatTokens(tokenizer, demonstration.tools)
    messages = [with_decoded_arguments(m) for m in demonstration.messages]
    texts = [_assistant_text(chat, messages[:i], m) for i, m in enumerate(messages)
             if m["role"] == "assistant"]
    [trajectory] = asyncio.run(rollout(
        env_id, ScriptedTokens(tokenizer, texts, logprob=-0.25, version=3), 1,
        config=RolloutConfig(max_total_tokens=4096), env_kwargs=env_kwargs))
    assert trajectory.reward == 1.0 and trajectory.completion_ids
    return trajectory


def runs_of_ones(mask: list[int], values: list) -> list[list]:
    runs, current = [], []
    for m, v in zip([*mask, 0], [*values, None], strict=True):
        if m:
            current.append(v)
        elif current:
            runs, current = [*runs, current], []
    return runs


# ---- the mapping --------------------------------------------------------------------------

def test_oracle_episodes_map_to_atif_s_own_fields_and_back():
    for trajectory in oracle_episodes():
        document, back = round_trip(trajectory)
        assert asdict(back) == asdict(trajectory)
        steps = document["steps"]
        assert [s["source"] for s in steps] == ["system", "user", "agent", "agent"]
        assert not any("extra" in s for s in steps)  # all of it in ATIF's own fields
        first_call = trajectory.messages[2]["tool_calls"][0]
        call = steps[2]["tool_calls"][0]
        assert call == {"tool_call_id": first_call["id"], "function_name": "calculator",
                        "arguments": json.loads(first_call["function"]["arguments"])}
        assert steps[2]["observation"]["results"] == [
            {"source_call_id": first_call["id"], "content": trajectory.messages[3]["content"]}]
        assert document["agent"]["model_name"] == "oracle"
        assert document["agent"]["tool_definitions"] == trajectory.tools
        assert document["final_metrics"]["extra"]["reward"] == 1.0
        assert document["final_metrics"]["extra"]["reward_metrics"] == trajectory.metrics
        own = document["extra"]["agentgym"]
        assert (own["env"], own["task_id"], own["episode"], own["finish_reason"]) == (
            "calculator", trajectory.task_id, trajectory.episode, "submitted")
        assert "tokens" not in own  # a text-level record has none to keep


def test_a_token_level_episode_puts_its_tokens_on_the_agent_steps(tokenizer):
    trajectory = scripted_replay(tokenizer, "calculator")
    document, back = round_trip(trajectory)
    assert asdict(back) == asdict(trajectory)
    assert "tokens" not in document["extra"]["agentgym"]  # the steps gave them back
    metrics = [s["metrics"] for s in document["steps"] if "metrics" in s]
    assert len(metrics) == trajectory.turns
    sampled = runs_of_ones(trajectory.loss_mask, trajectory.completion_ids)
    assert [m["completion_token_ids"] for m in metrics] == sampled
    assert [m["logprobs"] for m in metrics] == [[-0.25] * len(run) for run in sampled]
    assert [m["extra"]["agentgym"]["versions"] for m in metrics] == [
        [3] * len(run) for run in sampled]
    sequence = trajectory.prompt_ids + trajectory.completion_ids
    for m in metrics:  # each prompt is all the model saw before its turn
        assert m["prompt_token_ids"] == sequence[:len(m["prompt_token_ids"])]
        assert m["prompt_tokens"] == len(m["prompt_token_ids"])
    final = document["final_metrics"]
    assert final["total_completion_tokens"] == sum(map(len, sampled))


def test_a_moving_context_window_is_a_step_whose_prompt_starts_afresh(tokenizer):
    trajectory = scripted_replay(tokenizer, "memory-sessions", **MEMORY)
    assert len(trajectory.earlier_samples) >= 2
    document, back = round_trip(trajectory)
    assert asdict(back) == asdict(trajectory)
    assert "tokens" not in document["extra"]["agentgym"]
    prompts = [s["metrics"]["prompt_token_ids"] for s in document["steps"] if "metrics" in s]
    fresh = [p for before, p in itertools.pairwise(prompts) if p[:len(before)] != before]
    assert len(fresh) == len(trajectory.earlier_samples)


def test_the_tiny_model_s_episode_comes_back_token_for_token(model_dir):
    from agentgym.core.policies import Sampling
    from agentgym.rollout.policies.hf import HFPolicy

    policy = HFPolicy(str(model_dir))
    config = RolloutConfig(Sampling(max_tokens=8, temperature=1.0, seed=1),
                           max_total_tokens=4096)
    [trajectory] = asyncio.run(rollout("calculator", policy, 1, config=config,
                                       env_kwargs={"max_turns": 2}))
    assert trajectory.completion_ids and trajectory.logprobs
    document, back = round_trip(trajectory)
    assert asdict(back) == asdict(trajectory)
    assert "tokens" not in document["extra"]["agentgym"]


def test_what_atif_has_no_place_for_is_kept_under_extra():
    calls = [{"id": "c1", "type": "function",
              "function": {"name": "run", "arguments": "{\"cmd\": \"ls\"}"}}]
    messages = [
        {"role": "developer", "content": "A role ATIF has no source for."},
        {"role": "tool", "tool_call_id": "c0", "name": "run", "content": "no call before"},
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
        {"role": "assistant", "content": None, "tool_calls": calls,
         "reasoning_content": "thinking"},
        {"role": "tool", "tool_call_id": "c1", "name": "run", "content": "a.txt"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "run", "arguments": "{oops"}}]},
        {"role": "tool", "tool_call_id": "elsewhere", "name": "run", "content": "?"},
        {"role": "assistant", "content": "Done."}]
    # Two sampled runs but three turns (a turn failed mid-way): the steps cannot carry
    # them, so the record's token fields are kept whole.
    trajectory = Trajectory(
        env="e", task_id="t/1", episode=4, policy="hf:/m", prompt_ids=[1, 2],
        completion_ids=[5, 6, 7, 8], loss_mask=[1, 0, 1, 1], logprobs=[-1.0, 0.0, -2.0, -3.0],
        versions=[0, -1, 1, 1], reward=0.5, finish_reason="error", turns=3, tool_errors=1,
        messages=messages, metrics={"nested": {"a": [1, None]}}, error="boom",
        tools=[{"type": "function", "function": {"name": "run", "parameters": {}}}],
        screenshots=[{"message": 3, "png": "iVBORw0KGgo="}], windows=[0, 0, 2])
    document, back = round_trip(trajectory)
    assert asdict(back) == asdict(trajectory)
    own = document["extra"]["agentgym"]
    assert own["tokens"]["completion_ids"] == [5, 6, 7, 8]
    assert own["screenshots"] == trajectory.screenshots and own["windows"] == [0, 0, 2]
    kept = [s["extra"]["agentgym"]["messages"] for s in document["steps"] if "extra" in s]
    assert kept == [messages[0:1], messages[1:2], messages[2:3], messages[3:5], messages[5:7]]
    agent = document["steps"][3]
    assert agent["reasoning_content"] == "thinking"
    assert agent["tool_calls"][0]["arguments"] == {"cmd": "ls"}  # ATIF readers see the call
    assert document["steps"][4]["tool_calls"][0]["arguments"] == {}
    assert document["steps"][4]["observation"]["results"] == [{"content": "?"}]


def test_documents_other_programs_wrote_read_as_their_conversation(tmp_path):
    document = {
        "schema_version": "ATIF-v1.6", "session_id": "s-1",
        "agent": {"name": "terminus", "version": "2", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "What time is it?"},
            {"step_id": 2, "source": "agent", "message": "Let me check.",
             "tool_calls": [{"tool_call_id": "c1", "function_name": "now", "arguments": {}}],
             "observation": {"results": [{"source_call_id": "c1", "content": "noon"}]},
             "metrics": {"prompt_tokens": 120, "completion_tokens": 18}}],
        "final_metrics": {"extra": {"reward": 1}}}
    record = from_atif(document)
    assert (record.env, record.task_id, record.policy, record.reward, record.turns) == (
        "terminus", "s-1", "m", 1.0, 1)
    assert record.messages == [
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "now", "content": "noon"}]
    # Harbor keeps one per trial, TRIAL/agent/trajectory.json: the trial names it.
    del document["session_id"]
    trial = tmp_path / "job" / "fix-bug__x1" / "agent"
    trial.mkdir(parents=True)
    (trial / "trajectory.json").write_text(json.dumps(document, indent=2))
    (tmp_path / "job" / "config.json").write_text("{}")
    index = open_index([tmp_path / "job"])
    assert [(r.task_id, r.reward) for r in index.rows] == [("fix-bug__x1", 1.0)]
    assert index.episode(0)["messages"][2]["content"] == "noon"
    with pytest.raises(InvalidArgumentError, match="not an ATIF document"):
        from_atif({"task_id": "t"})
    with pytest.raises(InvalidArgumentError, match="cannot be read"):
        from_atif({"schema_version": "ATIF-v1.8", "steps": [{"step_id": 1}]})
    with pytest.raises(InvalidArgumentError, match=r"not valid ATIF \(1 problem\(s\); first, at"
                                                   r" agent.version: Field required"):
        validate({"schema_version": "ATIF-v1.8", "agent": {"name": "a"}, "steps": []})


# ---- files and commands -------------------------------------------------------------------

def invoke(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def test_eval_then_export_then_view_shows_the_same_episodes(tmp_path):
    """The round trip a user makes: eval writes agentgym's file, export turns it into
    ATIF documents the atif models accept, and the viewer lists the same episodes."""
    run = tmp_path / "run.jsonl"
    assert invoke("eval", "calculator", "--policy", "oracle", "-n", "4", "--out", str(run),
                  "--json").exit_code == 0
    done = invoke("export", str(run), "--format", "atif")
    assert done.exit_code == 0, done.output
    folder = tmp_path / "run.atif"  # the default: beside the file
    files = sorted(folder.glob("*.json"))
    assert len(files) == 4 and f"wrote 4 ATIF trajectories to {folder}" in done.output
    for file in files:
        atif.Trajectory.model_validate_json(file.read_text())
    lines = tmp_path / "run.atif.jsonl"
    assert invoke("export", str(run), "--out", str(lines)).exit_code == 0
    for line in lines.read_text().splitlines():
        atif.Trajectory.model_validate_json(line)

    def rows(index: EpisodeIndex) -> list:
        return sorted(index.rows, key=lambda row: row.episode)

    original = EpisodeIndex([run])
    for target in (folder, lines):
        index = open_index([target])
        assert index.bad_lines == 0
        assert [(r.task_id, r.episode, r.reward, r.finish_reason, r.env, r.turns)
                for r in rows(index)] == [
            (r.task_id, r.episode, r.reward, r.finish_reason, r.env, r.turns)
            for r in rows(original)]
        for row, expected_row in zip(rows(index), rows(original), strict=True):
            episode, expected = index.episode(row.index), original.episode(expected_row.index)
            assert episode["messages"] == expected["messages"]
            assert episode["metrics"] == expected["metrics"]
            assert episode["tools"] == expected["tools"]
        assert index.query(text=original.episode(0)["messages"][1]["content"]).total == 1


def test_the_viewer_serves_an_atif_folder(tmp_path):
    from agentgym.core.serving import LocalServer
    from agentgym.viewer.server import viewer_app

    with AtifWriter(tmp_path / "atif") as writer:
        for trajectory in oracle_episodes(2):
            writer.write(trajectory)
    import urllib.request

    server = LocalServer(viewer_app(open_index([tmp_path]))).start()
    try:
        with urllib.request.urlopen(f"{server.url}/api/episodes", timeout=10) as response:
            page = json.load(response)
        assert page["total"] == 2 and page["mean_reward"] == 1.0
        with urllib.request.urlopen(f"{server.url}/api/episode/1", timeout=10) as response:
            episode = json.load(response)
        assert episode["messages"][-1]["role"] == "tool" and episode["reward"] == 1.0
    finally:
        server.close()


def test_eval_and_rollout_write_atif_with_format_and_rollout_resumes(tmp_path):
    out = tmp_path / "eval-atif"
    done = invoke("eval", "calculator", "--policy", "oracle", "-n", "3", "--out", str(out),
                  "--format", "atif", "--json")
    assert done.exit_code == 0, done.output
    assert sorted(t.task_id for t in read_atif(out)) == [
        f"calculator-train-{i}" for i in range(3)]
    again = invoke("eval", "calculator", "--policy", "oracle", "-n", "1", "--out", str(out),
                   "--format", "atif")
    assert again.exit_code == 2 and "already holds trajectories" in again.output
    forced = invoke("eval", "calculator", "--policy", "oracle", "-n", "1", "--out", str(out),
                    "--format", "atif", "--force")
    assert forced.exit_code == 0 and len(list(out.glob("*.json"))) == 1

    lines = tmp_path / "rollout.jsonl"
    for n in (2, 5):
        done = invoke("rollout", "calculator", "--policy", "oracle", "-n", str(n),
                      "--out", str(lines), "--format", "atif", "--resume")
        assert done.exit_code == 0, done.output
    assert "skipped 2 already there" in done.output
    assert sorted(t.episode for t in read_atif(lines)) == [0, 1, 2, 3, 4]
    agentgym_file = tmp_path / "plain.jsonl"
    invoke("rollout", "calculator", "--policy", "oracle", "-n", "1", "--out", str(agentgym_file))
    assert read_trajectories(agentgym_file)[0].task_id == "calculator-train-0"  # the default


@pytest.mark.parametrize(("args", "code", "message"), [
    (["export", "{notes}"], 1, "'{notes}' line 1 is not JSON, so '{notes}' is not a"
                               " trajectory file; export reads the JSONL files"),
    (["export", "{atif_file}"], 1, "already holds ATIF trajectories: nothing to export"),
    (["export", "{run}", "--format", "harbor"], 2, "'harbor' is not 'atif'"),
    (["export", "{run}", "--out", "{existing}"], 1,
     "'{existing}' already holds ATIF trajectories; remove them or choose another --out"),
    (["export", "{empty}"], 1, "no agentgym trajectory files (*.jsonl) in"),
    (["eval", "calculator", "--policy", "oracle", "-n", "1", "--format", "json"], 2,
     "'json' is not one of 'agentgym', 'atif'"),
    (["eval", "calculator", "--policy", "oracle", "-n", "1", "--out", "{tmp}/x.json",
      "--format", "atif"], 2, "a .json file holds one ATIF document, and a run has many"),
    (["eval", "calculator", "--policy", "oracle", "-n", "1", "--out", "{existing}"], 2,
     "is a folder: agentgym records go to a JSONL file; name one, or pass --format atif"),
])
def test_bad_inputs_are_one_line_errors(tmp_path, args, code, message):
    notes, run, atif_file = tmp_path / "notes.jsonl", tmp_path / "run.jsonl", tmp_path / "a.json"
    notes.write_text("not json\n")
    [trajectory] = oracle_episodes(1)
    run.write_text(trajectory.to_json() + "\n")
    atif_file.write_text(json.dumps(validate(to_atif(trajectory))))
    existing = tmp_path / "existing"
    with AtifWriter(existing) as writer:
        writer.write(trajectory)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.json").write_text(atif_file.read_text())
    names = {"notes": notes, "run": run, "atif_file": atif_file, "existing": existing,
             "empty": tmp_path / "empty", "tmp": tmp_path}
    result = CliRunner().invoke(main, [a.format(**names) for a in args])
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit)  # not a traceback
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert message.format(**names) in line


def test_the_module_imports_without_atif_and_writing_names_the_extra(tmp_path, monkeypatch):
    import subprocess

    script = ("import sys; sys.modules['atif'] = None\n"  # `import atif` fails
              "from agentgym.interchange import atif\n"
              "try:\n    atif.AtifWriter(sys.argv[1])\n"
              "except Exception as e:\n    print(type(e).__name__, e)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ,
                               "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("MissingResourceError writing ATIF trajectories needs the"
                                  " atif package")
    assert "pip install -e '.[atif]'" in done.stdout

    # Reading needs nothing: the viewer opens ATIF without the package.
    [trajectory] = oracle_episodes(1)
    (tmp_path / "run.jsonl").write_text(trajectory.to_json() + "\n")
    monkeypatch.setitem(sys.modules, "atif", None)
    assert from_atif(to_atif(trajectory)).messages == trajectory.messages
    result = CliRunner().invoke(main, ["export", str(tmp_path / "run.jsonl")])
    assert result.exit_code == 1
    [line] = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert "needs the atif package" in line and "pip install -e '.[atif]'" in line
