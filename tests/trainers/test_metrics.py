"""metrics.jsonl: JSON-safe records, one whole line each, trimmed on resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch

from agentgym.trainers.metrics import MetricsLog, json_safe, read_metrics


def test_values_become_json_safe():
    assert json_safe({"loss": torch.tensor(0.5), "nan": math.nan, "inf": -math.inf,
                      "steps": (1, 2), 3: object}) == {
        "loss": 0.5, "nan": None, "inf": None, "steps": [1, 2], "3": str(object)}


def test_records_are_appended_and_kept_on_resume(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    assert read_metrics(path) == []
    log = MetricsLog(path)
    for step in (1, 2, 3):
        log.write({"stage": "00-sft", "step": step, "loss": torch.tensor(float(step))})
    log.keep(lambda r: r["step"] <= 2)
    log.write({"stage": "00-sft", "step": 3, "loss": math.nan})
    log.close()
    assert read_metrics(path) == [{"stage": "00-sft", "step": 1, "loss": 1.0},
                                  {"stage": "00-sft", "step": 2, "loss": 2.0},
                                  {"stage": "00-sft", "step": 3, "loss": None}]
