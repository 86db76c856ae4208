"""bench/async_train.py runs with tiny settings and prints one JSON object: every mode
trained its steps without an error, the asynchronous ones on groups sampled by older
weights, and the makespan ratios are reported. Its numbers are not checked here (tests do
not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench

pytest.importorskip("trl", reason="the bench needs the train extra")


@pytest.mark.slow
def test_async_train_bench_json() -> None:
    result = run_bench("async_train.py", "--steps", "3", "--modes", "sync,async2",
                       "--scale", "0.05")
    for mode in ("sync", "async2"):
        assert result[f"{mode}_errors"] == 0
        assert result[f"{mode}_makespan_s"] > 0
        assert 0 < result[f"{mode}_gpu_busy"] <= 1
        assert 0 <= result[f"{mode}_worst_share_ratio"] <= result[f"{mode}_best_share_ratio"]
    assert result["sync_staleness_mean"] == 0
    assert result["async2_staleness_mean"] > 0  # groups played while the trainer stepped
    assert result["async2_makespan_ratio"] > 0
    assert len(result["task_turns"]) == result["constants"]["tasks"]
