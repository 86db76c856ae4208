"""reward_curve.png from metrics records, stages one after another."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from agentgym.trainers.plots import plot_curves

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_curve_is_written_for_every_kind_of_run(tmp_path: Path):
    records = [{"stage": "00-sft", "step": s, "loss": 1.0 / s} for s in (1, 2)]
    records += [{"stage": "01-grpo", "step": s, "loss": 0.1, "reward": 0.2 * s,
                 "env/pass_rate": 0.1 * s} for s in (1, 2, 3)]
    for name, rows in (("both", records), ("sft-only", records[:2]), ("empty", [])):
        path = plot_curves(rows, tmp_path / f"{name}.png", title=name)
        assert path.read_bytes().startswith(PNG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["both.png", "empty.png",
                                                          "sft-only.png"]  # no .tmp left
