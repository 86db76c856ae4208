"""bench/web.py runs and prints one JSON object with its documented keys (its numbers are
not checked here: tests do not time things)."""

from __future__ import annotations

import pytest

from tests.bench.helpers import run_bench
from tests.plugins.web.conftest import chromium_missing


@pytest.mark.slow
@pytest.mark.skipif(bool(chromium_missing()), reason=f"bench needs {chromium_missing()}")
def test_web_bench_json() -> None:
    result = run_bench("web.py", "--episodes", "4", "--concurrency", "2", "--oracle-episodes",
                       "6", "--miniwob-episodes", "4", timeout=900)
    for key in ("reset_ms_p50", "reset_ms_p95", "step_ms_p50", "step_ms_p95",
                "episodes_per_min_8"):
        assert result[key] > 0, (key, result)
    assert result["oracle_pass_rate"] == 1.0
    assert result["miniwob_episodes_per_min_reused"] > 0
    assert result["miniwob_episodes_per_min_fresh"] > 0
    assert result["miniwob_solver_pass_rate"] == 1.0
