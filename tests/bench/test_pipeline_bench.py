"""bench/pipeline.py runs and prints one JSON object with its documented keys, the
setup-latency sweep's included (its numbers are not checked here: tests do not time
things, and these runs are scaled far down)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench

ROW_KEYS = {"makespan_s", "bound_s", "peak_live", "sandbox_s", "idle_sandbox_s"}


@pytest.mark.slow
def test_pipeline_bench_json_keeps_its_keys_and_adds_the_sweep() -> None:
    result = run_bench("pipeline.py", "--episodes", "8", "--concurrency", "4", "--remote-latency",
                       "0.1", "--latencies", "0.5,heavy", "--sweep-modes",
                       "pipeline,unbounded,sync", "--sweep-episodes", "8", "--scale", "0.02",
                       timeout=900)
    for key in ("modes", "lower_bound_s", "overhead_ms_per_step", "constants",
                "lower_bound_parts_s", "real_work_per_episode_s", "mean_reward", "errors"):
        assert key in result, key
    assert set(result["modes"]) == {"sync", "async_batch", "pipeline"}
    assert set(result["sweep"]) == {"0.5", "heavy"}
    for latency, modes in result["sweep"].items():
        assert set(modes) == {"pipeline", "unbounded", "sync"}, latency
        for mode, row in modes.items():
            assert set(row) >= ROW_KEYS, (latency, mode)
            assert row["errors"] == 0 and row["mean_reward"] == 1.0, (latency, mode)
            assert 0 <= row["idle_sandbox_s"] <= row["sandbox_s"], (latency, mode)
            # The bound is a lower bound: no run may beat it.
            assert row["makespan_s"] >= row["bound_s"] > 0, (latency, mode, row)
        assert modes["unbounded"]["peak_live"] == 8  # every episode at once
