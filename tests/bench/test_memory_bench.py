"""bench/memory.py runs and prints one JSON object with its documented keys (its numbers
are not checked here: tests do not time things)."""

from __future__ import annotations

from tests.bench.helpers import run_bench


def test_memory_bench_json() -> None:
    result = run_bench("memory.py", "--episodes", "3", "--sessions", "20", "--items", "500")
    for key in ("reset_ms_p50", "step_ms_p50", "search_ms_p50_10k"):
        assert result[key] > 0, (key, result)
    assert result["items"] == 500
