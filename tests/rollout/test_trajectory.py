"""Trajectory files: metrics stored as JSON objects, read back as written, by agentgym and
by ``datasets``; files from before (metrics as a JSON string) still read."""

import dataclasses
import json

import pytest

from agentgym.rollout.trajectory import (
    Trajectory,
    TrajectoryWriter,
    read_trajectories,
    trajectory_features,
)

datasets = pytest.importorskip("datasets")

# Two SWE-shaped rows: per-test results keyed by test id, different tests, an extra key.
RESOLVED = Trajectory(
    "swe-synth", "toolz-1", 0, reward=1.0, finish_reason="submitted",
    metrics={"resolved": True, "f2p_passed": 1, "tests": {"tests/test_a.py::test_x": "PASSED"},
             "reason": "all 1 FAIL_TO_PASS and 0 PASS_TO_PASS tests passed",
             "dropped_files": []},
    messages=[{"role": "user", "content": "fix it"},
              {"role": "assistant", "content": "", "tool_calls": [
                  {"id": "call_0", "type": "function",
                   "function": {"name": "submit", "arguments": "{}"}}]}],
)
UNRESOLVED = Trajectory(
    "swe-synth", "toolz-2", 1, finish_reason="max_turns",
    metrics={"resolved": False, "f2p_passed": 0,
             "tests": {"tests/test_b.py::test_y": "FAILED", "tests/test_b.py::test_z": "PASSED"},
             "reason": "the diff changes no non-test file", "dropped_files": ["tests/t.py"],
             "applied": False},
    messages=[{"role": "user", "content": "fix it"}],
)


def write(path, trajectories):
    with TrajectoryWriter(path) as writer:
        for trajectory in trajectories:
            writer.write(trajectory)
    return path


def load(path, **options):
    return datasets.load_dataset("json", data_files=str(path), split="train",
                                 cache_dir=str(path.parent / "hf-cache"), **options)


def test_metrics_are_a_json_object_in_the_row_and_read_back_the_same(tmp_path):
    path = write(tmp_path / "t.jsonl", [RESOLVED, UNRESOLVED])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["metrics"] == RESOLVED.metrics  # an object, not a string holding one
    assert read_trajectories(path) == [RESOLVED, UNRESOLVED]


def test_datasets_reads_rows_whose_metrics_have_different_keys(tmp_path):
    data = load(write(tmp_path / "t.jsonl", [RESOLVED, UNRESOLVED]))
    assert data[0]["metrics"] == RESOLVED.metrics
    assert data[1]["metrics"] == UNRESOLVED.metrics
    assert data["reward"] == [1.0, 0.0]


def test_trajectory_features_read_a_file_whose_variety_starts_late(tmp_path):
    # The first block holds one shape of metrics, a later row another: the schema
    # inferred from the first block cannot hold it (shown with small blocks rather than
    # a 10 MB file); the features can. Should datasets learn to, the first half fails.
    path = write(tmp_path / "t.jsonl", [dataclasses.replace(RESOLVED, episode=i)
                                        for i in range(20)] + [UNRESOLVED])
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        load(path, chunksize=4096)
    data = load(path, chunksize=4096, features=trajectory_features())
    assert data[20]["metrics"] == UNRESOLVED.metrics and data[0]["metrics"] == RESOLVED.metrics
    assert data[0]["messages"] == RESOLVED.messages


def test_trajectory_features_name_every_field():
    assert list(trajectory_features()) == [f.name for f in dataclasses.fields(Trajectory)]


def test_files_with_metrics_as_a_json_string_still_read(tmp_path):
    old = json.loads(RESOLVED.to_json())
    old["metrics"] = json.dumps(old["metrics"])  # as files were written before
    path = tmp_path / "old.jsonl"
    path.write_text(json.dumps(old) + "\n" + UNRESOLVED.to_json() + "\n")
    assert read_trajectories(path) == [RESOLVED, UNRESOLVED]
    for data in (load(path), load(path, features=trajectory_features())):
        assert data[0]["metrics"] in (RESOLVED.metrics, old["metrics"])
        assert data[1]["metrics"] == UNRESOLVED.metrics
