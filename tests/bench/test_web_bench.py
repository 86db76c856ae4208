"""bench/web.py runs and prints one JSON object with its documented keys (its numbers are
not checked here: tests do not time things)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.web.conftest import chromium_missing

BENCH = Path(__file__).resolve().parents[2] / "bench" / "web.py"


@pytest.mark.skipif(bool(chromium_missing()), reason=f"bench needs {chromium_missing()}")
def test_web_bench_json() -> None:
    command = [sys.executable, str(BENCH), "--episodes", "4", "--concurrency", "2",
               "--oracle-episodes", "6", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    for key in ("reset_ms_p50", "reset_ms_p95", "step_ms_p50", "step_ms_p95",
                "episodes_per_min_8"):
        assert result[key] > 0, (key, result)
    assert result["oracle_pass_rate"] == 1.0
